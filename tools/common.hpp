// What the `dnngraph` subcommands share: the exit codes and one-line errors, reading graph
// descriptions, the default device and opening a handle on it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "dnngraph/engines/handle.hpp"
#include "dnngraph/ir/graph.hpp"

namespace dnngraph_cli {

// The exit codes of every subcommand: 0 success, 1 the graph is invalid (or does not run),
// 2 usage or file errors.
inline constexpr int kOk = 0;
inline constexpr int kInvalid = 1;
inline constexpr int kUsage = 2;

// The whole text of the file at `path` ("-": standard input); nullopt with `error` set to a
// one-line reason (a directory, cannot open, cannot read) otherwise.
std::optional<std::string> read_text(const std::string& path, std::string& error);

// Prints "dnngraph <command>: <what>" ("dnngraph: <what>" for an empty command) as one line
// on stderr and returns `rc`.
int fail(std::string_view command, int rc, const std::string& what);

// Reads the graph description at `path` ("-": standard input) into `g` and, when `validate`,
// validates it. Returns kOk, or after one line on stderr (fail(), naming `path`): kUsage when
// the file cannot be read, kInvalid when it is not a valid graph (`hint` is appended to a
// validation error).
int load_graph(const std::string& path, dnngraph::ir::Graph& g, std::string_view command,
               bool validate, std::string_view hint = {});

// "cuda" when a GPU and cuDNN are present, else "cpu": the default of --engine / --device.
std::string default_device();

// A handle on `dev`. When it is a GPU that cannot be used, the error says why and to use
// `cpu_flag` (e.g. "--engine cpu") for the reference engine, without the C++ API's hints.
dnngraph::Result<dnngraph::HandlePtr> open_handle(const dnngraph::Device& dev,
                                                  std::string_view cpu_flag);

}  // namespace dnngraph_cli
