// DNNGRAPH_LOG / DNNGRAPH_LOG_FILE and the optional sink (include/dnngraph/log.hpp).
#include "dnngraph/log.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>

namespace dnngraph {
namespace {

// The levels' names, in LogLevel order.
constexpr std::string_view kLevelNames[] = {"off", "error", "warn", "info", "debug", "dispatch"};

LogLevel parse_level(const char* v) {
  if (!v || !*v) return LogLevel::Off;
  const std::string s(v);
  for (LogLevel l :
       {LogLevel::Dispatch, LogLevel::Debug, LogLevel::Info, LogLevel::Warn, LogLevel::Error})
    if (s == log_level_name(l)) return l;
  if (s == "warning") return LogLevel::Warn;
  if (s.find("dispatch") != std::string::npos) return LogLevel::Dispatch;  // e.g. "info,dispatch"
  return LogLevel::Off;
}

struct Logger {
  std::atomic<LogLevel> level{parse_level(std::getenv("DNNGRAPH_LOG"))};
  std::mutex mu;  // guards sink and file
  std::shared_ptr<LogSink> sink;
  std::FILE* file = nullptr;
  bool file_opened = false;

  std::FILE* out() {
    if (!file_opened) {
      file_opened = true;
      const char* path = std::getenv("DNNGRAPH_LOG_FILE");
      if (path && *path) {
        file = std::fopen(path, "a");
        if (!file)
          std::fprintf(stderr, "[dnngraph warn] cannot open DNNGRAPH_LOG_FILE '%s': %s\n", path,
                       std::strerror(errno));
      }
    }
    return file ? file : stderr;
  }
};

Logger& logger() {
  static Logger* l = new Logger();  // never destroyed: threads may log during exit
  return *l;
}

}  // namespace

std::string_view log_level_name(LogLevel l) {
  const auto i = static_cast<size_t>(l);
  return i < std::size(kLevelNames) ? kLevelNames[i] : "off";
}

LogLevel log_level() { return logger().level.load(std::memory_order_relaxed); }
void set_log_level(LogLevel l) { logger().level.store(l, std::memory_order_relaxed); }

void log_message(LogLevel l, std::string_view message) {
  if (!log_enabled(l)) return;
  Logger& g = logger();
  std::shared_ptr<LogSink> sink;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    sink = g.sink;
    if (!sink) {
      std::FILE* f = g.out();
      std::fprintf(f, "[dnngraph %s] %.*s\n", std::string(log_level_name(l)).c_str(),
                   static_cast<int>(message.size()), message.data());
      std::fflush(f);
      return;
    }
  }
  (*sink)(l, message);  // outside the lock: the sink may take other locks (the GIL)
}

void set_log_sink(LogSink sink) {
  Logger& g = logger();
  std::lock_guard<std::mutex> lock(g.mu);
  g.sink = sink ? std::make_shared<LogSink>(std::move(sink)) : nullptr;
}

}  // namespace dnngraph
