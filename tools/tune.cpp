// `dnngraph tune GRAPH.json`: builds every candidate, times each (Graph::autotune on buffers it
// allocates), prints a table (median and min ms, TFLOP/s or GB/s, workspace) and, with --svg, a
// bar chart. Progress goes to stderr.
#include "tune.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "common.hpp"
#include "dnngraph/graph.hpp"
#include "dnngraph/plan_cache.hpp"
#include "progress.hpp"

namespace dnngraph::tools {
namespace {

double product(const std::vector<int64_t>& v, size_t from = 0) {
  double p = 1;
  for (size_t i = from; i < v.size(); ++i) p *= static_cast<double>(v[i]);
  return p;
}

// Floating-point operations of the graph's matmuls, forward convolutions and attention (0 when
// it has none): what TFLOP/s is reported against.
double flops(const ir::ValidatedGraph& g) {
  double f = 0;
  for (const ir::Node& n : g.nodes()) {
    if (n.kind() == ir::OpKind::Matmul) {
      auto a = n.input(ir::Role::A), c = n.output(ir::Role::C);
      if (a && c && !a->dim.empty()) f += 2 * product(c->dim) * static_cast<double>(a->dim.back());
    } else if (n.kind() == ir::OpKind::ConvFprop) {
      auto w = n.input(ir::Role::W), y = n.output(ir::Role::Y);
      if (w && y) f += 2 * product(y->dim) * product(w->dim, 1);
    } else if (n.kind() == ir::OpKind::SdpaFwd) {
      auto q = n.input(ir::Role::Q), k = n.input(ir::Role::K), v = n.input(ir::Role::V);
      if (q && k && v && q->dim.size() == 4 && k->dim.size() == 4 && v->dim.size() == 4) {
        double x = 2 * product(q->dim, 0) / static_cast<double>(q->dim[3]) *
                   static_cast<double>(k->dim[2]) * static_cast<double>(q->dim[3] + v->dim[3]);
        if (n.as<ir::SdpaAttrs>().causal) x /= 2;
        f += x;
      }
    }
  }
  return f;
}

// Bytes of the graph's inputs and outputs: what GB/s is reported against.
double io_bytes(const ir::ValidatedGraph& g) {
  double b = 0;
  for (const ir::Tensor& t : g.io_tensors())
    if (!t->is_pass_by_value)
      b += product(t->dim) * static_cast<double>(data_type_bits(t->data_type)) / 8.0;
  return b;
}

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

std::string svg_chart(const std::string& title, const AutotuneReport& r) {
  std::vector<const AutotuneCandidate*> timed;
  for (const auto& c : r.candidates)
    if (c.median_ms >= 0) timed.push_back(&c);
  std::sort(timed.begin(), timed.end(),
            [](auto* a, auto* b) { return a->median_ms < b->median_ms; });
  double most = 0;
  for (auto* c : timed) most = std::max(most, c->median_ms);
  const int row = 22, left = 300, width = 420, top = 36;
  const int height = top + row * static_cast<int>(timed.size()) + 12;
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << left + width + 110 << "\" height=\""
    << height << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<text x=\"8\" y=\"20\" font-size=\"14\">" << xml_escape(title)
    << ": median ms per candidate (shorter is faster)</text>\n";
  for (size_t i = 0; i < timed.size(); ++i) {
    const auto& c = *timed[i];
    const int y = top + row * static_cast<int>(i);
    const double w = most > 0 ? width * c.median_ms / most : 0;
    const bool chosen = c.plan_index == r.selected;
    o << "<text x=\"" << left - 6 << "\" y=\"" << y + 14 << "\" text-anchor=\"end\">"
      << xml_escape(c.name) << "</text>\n"
      << "<rect x=\"" << left << "\" y=\"" << y + 3 << "\" width=\"" << std::max(w, 1.0)
      << "\" height=\"" << row - 6 << "\" fill=\"" << (chosen ? "#2a9d55" : "#5b7fb8") << "\"/>\n"
      << "<text x=\"" << left + std::max(w, 1.0) + 4 << "\" y=\"" << y + 14 << "\">" << c.median_ms
      << (chosen ? " (chosen)" : "") << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

Result<Device> parse_device(const std::string& s) {
  if (s == "cpu") return Device::cpu();
  if (s == "cuda") return Device::cuda(0);
  if (s.rfind("cuda:", 0) == 0) {
    try {
      size_t used = 0;
      const int i = std::stoi(s.substr(5), &used);
      if (used == s.size() - 5 && i >= 0) return Device::cuda(i);
    } catch (const std::exception&) {
    }
  }
  return make_error(ErrorCode::InvalidArgument, "--device: expected cpu, cuda or cuda:N, got '", s,
                    "'");
}

Result<HeurMode> parse_mode(const std::string& s) {
  if (s == "A" || s == "a") return HeurMode::A;
  if (s == "B" || s == "b") return HeurMode::B;
  if (s == "FALLBACK" || s == "fallback") return HeurMode::Fallback;
  return make_error(ErrorCode::InvalidArgument, "--heuristics: expected A, B or FALLBACK, got '", s,
                    "'");
}

}  // namespace

CLI::App* add_tune_command(CLI::App& app, TuneArgs& a) {
  auto* t = app.add_subcommand(
      "tune",
      "Build every candidate plan of a graph, time each on buffers dnngraph allocates (inputs "
      "filled with values in [-1, 1]), select the fastest and record it in the plan cache, so "
      "that later builds of the graph on this device reuse it. Prints a progress bar on stderr "
      "and a table on stdout: candidate, median and min ms, TFLOP/s (graphs with matmuls, "
      "convolutions or attention) or GB/s of the graph's inputs and outputs (others), "
      "workspace, status. Exit 1 when the graph is invalid or no candidate could be timed.\n"
      "Example: dnngraph tune --device cuda --budget-ms 5000 --svg conv.svg conv.json");
  t->add_option("GRAPH", a.graph, "graph description (JSON)")->required();
  t->add_option("--device", a.device,
                "cpu, cuda or cuda:N (default: cuda when a GPU and cuDNN are present, else cpu)");
  t->add_option("--budget-ms", a.budget_ms,
                "wall-clock limit in ms; candidates left when it is spent are not timed "
                "(default 0: none)")
      ->check(CLI::NonNegativeNumber);
  t->add_option("--warmup", a.warmup, "untimed runs per candidate (default 2)")
      ->check(CLI::NonNegativeNumber);
  t->add_option("--iterations", a.iterations,
                "timed runs per candidate; up to 4x more while the median moves (default 10)")
      ->check(CLI::PositiveNumber);
  t->add_option("--rotate", a.rotate,
                "copies of the inputs that successive runs rotate through (default 0)")
      ->check(CLI::NonNegativeNumber);
  t->add_flag("--no-flush", a.no_flush, "do not flush the L2 cache before each timed run");
  t->add_flag("--no-cache", a.no_cache,
              "neither reuse a recorded choice nor record this one in the plan cache");
  t->add_option("--heuristics", a.heuristics,
                "heuristic modes proposing candidates, in order (default: A FALLBACK)");
  t->add_option("--deselect", a.deselect,
                "skip candidates by name, engine id (eng0) or engine (repeatable)");
  t->add_option("--max-workspace", a.max_workspace,
                "skip candidates needing more workspace bytes than this")
      ->check(CLI::NonNegativeNumber);
  t->add_option("--svg", a.svg, "write a bar chart of the median times to FILE (SVG)")
      ->option_text("FILE");
  t->add_flag("-q,--quiet", a.quiet, "no progress bar");
  return t;
}

int cmd_tune(const TuneArgs& a) {
  auto fail = [](int rc, const std::string& what) { return dnngraph_cli::fail("tune", rc, what); };
  Graph g;
  if (int rc = dnngraph_cli::load_graph(a.graph, g, "tune", false)) return rc;
  const std::string device = a.device.empty() ? dnngraph_cli::default_device() : a.device;
  auto dev = parse_device(device);
  if (!dev) return fail(2, dev.status().message());
  std::vector<HeurMode> modes;
  for (const auto& m : a.heuristics) {
    auto mode = parse_mode(m);
    if (!mode) return fail(2, mode.status().message());
    modes.push_back(*mode);
  }
  auto handle = dnngraph_cli::open_handle(*dev, "--device cpu");
  if (!handle) return fail(1, handle.status().to_string());
  if (!a.deselect.empty()) g.deselect_engines(a.deselect);
  if (a.max_workspace >= 0) g.deselect_workspace_greater_than(a.max_workspace);
  for (Status s :
       {g.build_operation_graph(*handle), g.create_execution_plans(modes), g.check_support()})
    if (!s) return fail(1, a.graph + ": " + s.to_string());

  AutotuneOptions o;
  o.warmup = a.warmup;
  o.iterations = a.iterations;
  o.budget_ms = a.budget_ms;
  o.rotate_inputs = a.rotate;
  o.flush_cache = !a.no_flush;
  o.use_cache = !a.no_cache;
  // Before candidate i the bar shows the i finished; at the end all n.
  int64_t total = 0;
  if (!a.quiet)
    o.progress = [&total](int64_t i, int64_t n, const std::string& name) {
      total = n;
      progress_bar(i, n, name);
    };
  auto r = g.autotune(**handle, o);
  if (!a.quiet) {
    if (r && total > 0) progress_bar(total, total, "done");
    std::fprintf(stderr, "\n");
  }
  if (!r) return fail(1, a.graph + ": " + r.status().to_string());

  const double f = flops(*g.validated()), bytes = io_bytes(*g.validated());
  const bool tflops = f > 0;
  std::printf("graph '%s' on %s: %zu candidate(s)%s\n", g.name().c_str(), device.c_str(),
              r->candidates.size(), r->from_cache ? ", choice reused from the plan cache" : "");
  if (r->from_cache) {
    std::printf("selected: %s (%.4f ms when it was tuned; --no-cache times again)\n",
                r->selected_name.c_str(), r->selected_ms);
    return 0;
  }
  int width = 9;
  for (const auto& c : r->candidates) width = std::max(width, static_cast<int>(c.name.size()));
  std::printf("%-*s %10s %10s %10s %12s  %s\n", width, "candidate", "median ms", "min ms",
              tflops ? "TFLOP/s" : "GB/s", "workspace", "status");
  for (const auto& c : r->candidates) {
    const bool timed = c.median_ms >= 0;
    const double rate =
        timed && c.median_ms > 0 ? (tflops ? f / c.median_ms / 1e9 : bytes / c.median_ms / 1e6) : 0;
    std::printf(
        "%-*s %10s %10s %10s %12lld  %s%s\n", width, c.name.c_str(),
        timed ? fixed(c.median_ms, 4).c_str() : "-", timed ? fixed(c.min_ms, 4).c_str() : "-",
        timed ? fixed(rate, rate < 10 ? 4 : 1).c_str() : "-",
        static_cast<long long>(c.workspace_size), c.status ? "ok" : c.status.message().c_str(),
        c.plan_index == r->selected ? "  <- selected" : "");
  }
  std::printf(
      "selected: %s, %.4f ms; %lld timed runs in %.0f ms; L2 flush %lld bytes; %d input "
      "copies%s\n",
      r->selected_name.c_str(), r->selected_ms, static_cast<long long>(r->timed_runs), r->wall_ms,
      static_cast<long long>(r->flush_bytes), r->rotated_copies,
      r->budget_spent ? "; the budget was spent" : "");
  if (!a.svg.empty()) {
    std::ofstream out(a.svg, std::ios::binary);
    out << svg_chart(g.name(), *r);
    out.close();
    if (!out) return fail(2, "cannot write '" + a.svg + "'");
  }
  return 0;
}

}  // namespace dnngraph::tools
