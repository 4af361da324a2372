// `dnngraph`: inspect the installation and graph descriptions from the shell.
//
// Exit codes: 0 success, 1 the graph is invalid (one-line error on stderr), 2 usage or file
// errors. Never crashes: every failure ends in one of those codes with a message.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "common.hpp"
#include "dnngraph/engines/cudnn.hpp"
#include "dnngraph/ir/dot.hpp"
#include "dnngraph/ir/fingerprint.hpp"
#include "dnngraph/system.hpp"
#include "dnngraph/version.hpp"
#include "run.hpp"
#include "tune.hpp"

namespace {

using dnngraph_cli::kUsage;
using dnngraph_cli::load_graph;

// Thrown only inside this file, for file errors; turned into exit code 2 in main().
struct FileError {
  std::string message;
};

void write_output(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::cout << text;
    std::cout.flush();
    return;
  }
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw FileError{"cannot write '" + path + "'"};
}

int cmd_info() {
  dnngraph::SystemInfo si = dnngraph::system_info();
  std::cout << "dnngraph " << si.dnngraph_version << "\n";
  for (const dnngraph::EngineSummary& e : si.engines) std::cout << "engine: " << e.name << "\n";
  const dnngraph::CudnnInfo cudnn = dnngraph::cudnn_info();
  std::cout << "cuDNN engine: " << (cudnn.built ? "compiled in" : "not compiled in") << "\n";
  if (cudnn.loaded) {
    std::cout << "cuDNN: loaded, version " << cudnn.version << " from " << cudnn.library_path
              << "\n";
  } else {
    std::cout << "cuDNN: not loaded"
              << (cudnn.error.empty() ? std::string() : " (" + cudnn.error + ")") << "\n";
  }
  if (si.gpus.empty()) {
    std::cout << "GPUs: none" << (si.gpu_error.empty() ? std::string() : " (" + si.gpu_error + ")")
              << "\n";
  } else {
    std::cout << "GPUs: " << si.gpus.size() << "\n";
    for (size_t i = 0; i < si.gpus.size(); ++i)
      std::cout << "  " << i << ": " << si.gpus[i] << "\n";
  }
  return 0;
}

int cmd_validate(const std::string& path) {
  dnngraph::ir::Graph g;
  if (int rc = load_graph(path, g, "", true)) return rc;
  const std::string table = g.to_table();
  std::cout << table;
  if (!table.empty() && table.back() != '\n') std::cout << "\n";
  std::cout << "fingerprint: " << dnngraph::ir::fingerprint(g).hex() << "\n";
  return 0;
}

int cmd_dot(const std::string& path, const std::string& out, bool infer) {
  dnngraph::ir::Graph g;
  if (int rc = load_graph(path, g, "", infer, " (--no-infer draws the graph as written)"))
    return rc;
  write_output(out, dnngraph::ir::to_dot(g));
  return 0;
}

int cmd_fingerprint(const std::string& path, bool no_shapes, bool names) {
  dnngraph::ir::Graph g;
  if (int rc = load_graph(path, g, "", false)) return rc;
  dnngraph::ir::FingerprintOptions opts;
  opts.include_shapes = !no_shapes;
  opts.include_names = names;
  std::cout << dnngraph::ir::fingerprint(g, opts).hex() << "\n";
  return 0;
}

int run(int argc, char** argv) {
  CLI::App app{"dnngraph: deep-learning computation graphs (library " +
                   std::string(dnngraph::version()) +
                   ").\nGraphs are JSON descriptions (see docs/json-format.md).\n\n"
                   "Examples:\n"
                   "  dnngraph info\n"
                   "  dnngraph validate tests/data/conv_bias_relu.json\n"
                   "  cat graph.json | dnngraph validate -\n"
                   "  dnngraph dot tests/data/sdpa_causal.json -o sdpa.dot && dot -Tsvg sdpa.dot "
                   "-o sdpa.svg\n"
                   "  dnngraph run --engine cpu --check tests/data/matmul_epilogue.json\n"
                   "  dnngraph tune --device cpu --iterations 3 tests/data/matmul_epilogue.json\n\n"
                   "Exit codes: 0 ok, 1 invalid graph, 2 usage or file error.",
               "dnngraph"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(dnngraph::version()));

  std::string graph_path, out_path;
  bool no_infer = false, no_shapes = false, names = false;

  auto* info = app.add_subcommand(
      "info",
      "Show the library version, whether the cuDNN engine is compiled in, whether cuDNN is "
      "loaded (version and path, or why not) and the GPUs seen.\n"
      "Example: dnngraph info");

  auto* validate = app.add_subcommand(
      "validate",
      "Load a graph, infer missing shapes/types, check it, and print its nodes and tensors and "
      "its fingerprint. On an invalid graph print a one-line error and exit 1.\n"
      "Example: dnngraph validate tests/data/matmul_epilogue.json");
  validate->add_option("GRAPH", graph_path, "graph description (JSON); - reads standard input")
      ->required();

  auto* dot = app.add_subcommand(
      "dot",
      "Print the graph in Graphviz DOT: tensors as ellipses (virtual ones dashed) with their "
      "inferred dims and types, ops as boxes, edges labelled with the port role. An invalid "
      "graph is an error (exit 1) unless --no-infer.\n"
      "Example: dnngraph dot tests/data/conv_bias_relu.json -o g.dot && dot -Tpng g.dot -o g.png");
  dot->add_option("GRAPH", graph_path, "graph description (JSON); - reads standard input")
      ->required();
  dot->add_option("-o,--output", out_path, "write to FILE instead of stdout");
  dot->add_flag("--no-infer", no_infer,
                "draw the graph as written: no validation, inferred dims and types left out "
                "(by default the graph is validated first and shows them)");
  bool infer_flag = false;  // the default; kept for scripts that pass it
  dot->add_flag("--infer", infer_flag, "the default (kept for scripts that pass it)");

  auto* fp = app.add_subcommand(
      "fingerprint",
      "Print the stable 128-bit fingerprint of a graph as it is written (32 hex digits).\n"
      "Example: dnngraph fingerprint --no-shapes tests/data/sdpa_causal.json");
  fp->add_option("GRAPH", graph_path, "graph description (JSON); - reads standard input")
      ->required();
  fp->add_flag("--no-shapes", no_shapes, "leave dims and strides out (keep ranks)");
  fp->add_flag("--names", names, "include graph, tensor and node names");

  dnngraph::tools::TuneArgs tune_args;
  auto* tune = dnngraph::tools::add_tune_command(app, tune_args);
  dnngraph::tools::RunArgs run_args;
  auto* run_cmd = dnngraph::tools::add_run_command(app, run_args);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);  // prints help/version (rc 0) or the usage error
    return rc == 0 ? 0 : kUsage;
  }

  if (*info) return cmd_info();
  if (*validate) return cmd_validate(graph_path);
  if (*dot) return cmd_dot(graph_path, out_path, !no_infer);
  if (*fp) return cmd_fingerprint(graph_path, no_shapes, names);
  if (*tune) return dnngraph::tools::cmd_tune(tune_args);
  if (*run_cmd) return dnngraph::tools::cmd_run(run_args);
  return kUsage;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const FileError& e) {
    std::cerr << "dnngraph: " << e.message << "\n";
    return kUsage;
  } catch (const std::exception& e) {
    std::cerr << "dnngraph: internal error: " << e.what() << "\n";
    return kUsage;
  } catch (...) {
    std::cerr << "dnngraph: internal error\n";
    return kUsage;
  }
}
