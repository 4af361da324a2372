// Logging: DNNGRAPH_LOG=error|warn|info|debug|dispatch sets the level (each includes the ones
// before it; unset or "off": nothing), DNNGRAPH_LOG_FILE=path appends the lines to a file
// instead of standard error. A sink (the Python module installs one that forwards to Python's
// `logging`) receives every line at or above the level instead.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace dnngraph {

enum class LogLevel { Off = 0, Error, Warn, Info, Debug, Dispatch };

std::string_view log_level_name(LogLevel l);  // "error", ...
// The level in force: DNNGRAPH_LOG when first asked, or the last set_log_level().
LogLevel log_level();
void set_log_level(LogLevel l);
inline bool log_enabled(LogLevel l) { return l != LogLevel::Off && l <= log_level(); }

// Writes one line "[dnngraph <level>] message" (to the sink, the file or standard error).
void log_message(LogLevel l, std::string_view message);

// Replaces the output (null: back to the file / standard error). The sink may be called from
// any thread that builds or executes a graph; it must not call back into dnngraph's logging.
using LogSink = std::function<void(LogLevel, std::string_view)>;
void set_log_sink(LogSink sink);

}  // namespace dnngraph
