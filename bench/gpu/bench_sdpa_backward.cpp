// Causal SDPA backward, b4 h16 s1024 d64 bf16, next to the training forward (with STATS) of
// the same shape, each also with dropout (p = 0.1, cuDNN's Philox RNG; timed only: the dropout
// results are checked in tests/gpu/sdpa_dropout_test.cpp through the dumped mask). Each graph is
// checked against the reference engine on a reduced shape first (b1 h2 s128). Backward STATS are
// drawn in [0.5, 1.5] so that exp(S - STATS) stays in the range of a real softmax row.
#include <cmath>

#include "../../tests/gpu/sdpa_cases.hpp"
#include "bench_util.hpp"

using namespace dnngraph;

namespace {

constexpr double kDropout = 0.1;

ir::SdpaOptions attrs(int64_t d, bool dropout) {
  ir::SdpaOptions a;
  a.causal = true;
  a.right_bound = 0;
  a.attn_scale = 1.0 / std::sqrt(static_cast<double>(d));
  if (dropout) a.dropout_probability = kDropout;
  return a;
}

ir::SdpaInputs extra(Graph& g, bool dropout) {
  ir::SdpaInputs e;
  if (dropout) {
    e.seed = g.scalar(ir::Scalar::of_int(1234), "seed");
    e.offset = g.scalar(ir::Scalar::of_int(0), "offset");
  }
  return e;
}

std::function<void(Graph&)> forward(int64_t b, int64_t h, int64_t s, int64_t d,
                                    bool dropout = false) {
  return [=](Graph& g) {
    const DataType t = DataType::BFloat16;
    g.set_name("sdpa_forward_training").set_io_data_type(t);
    auto o =
        g.sdpa(gpu_test::input(g, "Q", {b, h, s, d}, t), gpu_test::input(g, "K", {b, h, s, d}, t),
               gpu_test::input(g, "V", {b, h, s, d}, t),
               ir::SdpaAttrs{attrs(d, dropout), false, {}}, extra(g, dropout));
    gpu_test::finish(o[0], "O", {b, h, s, d}, t);
    gpu_test::finish(o[1], "STATS", {b, h, s, 1}, DataType::Float);
  };
}

std::function<void(Graph&)> backward(int64_t b, int64_t h, int64_t s, int64_t d,
                                     bool dropout = false) {
  return [=](Graph& g) {
    const DataType t = DataType::BFloat16;
    g.set_name("sdpa_backward").set_io_data_type(t);
    auto r = g.sdpa_backward(
        gpu_test::input(g, "Q", {b, h, s, d}, t), gpu_test::input(g, "K", {b, h, s, d}, t),
        gpu_test::input(g, "V", {b, h, s, d}, t), gpu_test::input(g, "O", {b, h, s, d}, t),
        gpu_test::input(g, "DO", {b, h, s, d}, t),
        gpu_test::input(g, "STATS", {b, h, s, 1}, DataType::Float),
        ir::SdpaBwdAttrs{attrs(d, dropout)}, extra(g, dropout));
    gpu_test::finish(r[0], "DQ", {b, h, s, d}, t);
    gpu_test::finish(r[1], "DK", {b, h, s, d}, t);
    gpu_test::finish(r[2], "DV", {b, h, s, d}, t);
  };
}

gpu_test::CompareOptions options(bool bwd) { return gpu_test::sdpa_options(bwd); }

// Median ms of the full-size graph, or a negative value after printing the error.
double time_graph(const char* what, const std::function<void(Graph&)>& make,
                  const gpu_test::CompareOptions& o) {
  gpu_test::GpuRun run;
  bench::Timing t;
  t.status = run.prepare(make, o);
  if (t.status) t = bench::time_execute(run, 20, 200);
  if (!t.status) {
    std::printf("ERROR %s: %s\n", what, t.status.to_string().c_str());
    return -1;
  }
  std::printf("RESULT %s plan %s: %.4f ms (min %.4f), workspace %lld bytes\n", what,
              run.plan_name.c_str(), t.median_ms, t.min_ms, static_cast<long long>(run.ws));
  return t.median_ms;
}

}  // namespace

int main() {
  if (bench::skipped("sdpa_backward")) return 0;
  bench::print_check("sdpa fwd (training) b1 h2 s128 d64",
                     gpu_test::run_and_compare(forward(1, 2, 128, 64), options(false)));
  bench::print_check("sdpa bwd b1 h2 s128 d64",
                     gpu_test::run_and_compare(backward(1, 2, 128, 64), options(true)));
  const double fwd = time_graph("sdpa fwd causal training b4 h16 s1024 d64 bf16",
                                forward(4, 16, 1024, 64), options(false));
  const double bwd =
      time_graph("sdpa bwd causal b4 h16 s1024 d64 bf16", backward(4, 16, 1024, 64), options(true));
  const double fwd_drop = time_graph("sdpa fwd causal training dropout 0.1 b4 h16 s1024 d64 bf16",
                                     forward(4, 16, 1024, 64, true), options(false));
  const double bwd_drop = time_graph("sdpa bwd causal dropout 0.1 b4 h16 s1024 d64 bf16",
                                     backward(4, 16, 1024, 64, true), options(true));
  if (fwd > 0 && bwd > 0 && fwd_drop > 0 && bwd_drop > 0)
    std::printf("RESULT dropout costs: fwd %.2fx, bwd %.2fx the time without\n", fwd_drop / fwd,
                bwd_drop / bwd);
  if (fwd <= 0 || bwd <= 0 || fwd_drop <= 0 || bwd_drop <= 0) return 1;
  // Causal: about half of the multiply-adds; forward 2 matmuls, backward 5.
  const double mm = 2.0 * 4 * 16 * 1024.0 * 1024 * 64 / 2;
  std::printf("RESULT fwd %.1f TFLOP/s, bwd %.1f TFLOP/s, bwd/fwd time %.2f\n", 2 * mm / fwd / 1e9,
              5 * mm / bwd / 1e9, bwd / fwd);
  return 0;
}
