// Reading the files the `dnngraph` subcommands take (graph descriptions).
#pragma once

#include <optional>
#include <string>

namespace dnngraph_cli {

// The whole text of the file at `path`; nullopt with `error` set to a one-line reason (a
// directory, cannot open, cannot read) otherwise.
std::optional<std::string> read_text(const std::string& path, std::string& error);

}  // namespace dnngraph_cli
