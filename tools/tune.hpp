// `dnngraph tune GRAPH.json`: the autotuner from the shell (tune.cpp).
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace dnngraph::tools {

struct TuneArgs {
  std::string graph, device, svg;
  std::vector<std::string> heuristics{"A", "FALLBACK"}, deselect;
  double budget_ms = 0;
  int warmup = 2, iterations = 10, rotate = 0;
  long long max_workspace = -1;
  bool no_flush = false, no_cache = false, quiet = false;
};

CLI::App* add_tune_command(CLI::App& app, TuneArgs& args);
// Exit codes as the other commands: 0 tuned, 1 the graph is invalid or nothing could be timed,
// 2 a usage or file error.
int cmd_tune(const TuneArgs& args);

}  // namespace dnngraph::tools
