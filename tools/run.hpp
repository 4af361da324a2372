// `dnngraph run GRAPH.json`: execute a graph once on seeded random inputs, check it against
// the reference engine, time it (run.cpp).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace dnngraph::tools {

struct RunArgs {
  std::string graph, engine;
  std::string against;  // --against: the reference graph's description (default: GRAPH's)
  bool check = false, quiet = false;
  int iters = 10;
  uint32_t seed = 42;
};

CLI::App* add_run_command(CLI::App& app, RunArgs& args);
// Exit codes as the other commands: 0 ran (and matched), 1 the graph is invalid, does not run
// or differs from the reference, 2 a usage or file error.
int cmd_run(const RunArgs& args);

}  // namespace dnngraph::tools
