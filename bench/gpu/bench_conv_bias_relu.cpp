// conv -> bias -> relu, NHWC bf16, N32 C128 56x56 K256 3x3 pad 1. Times the heuristics'
// choice and every candidate of build_plan_policy ALL; checks against the reference engine on a
// reduced shape. Targets (issue 5): <= 0.09 ms and <= 1.03x the best candidate.
#include "../../samples/seed_graphs.hpp"
#include "bench_util.hpp"

using namespace dnngraph;

int main() {
  if (bench::skipped("conv_bias_relu")) return 0;
  gpu_test::CompareOptions o = bench::check_reduced("conv_bias_relu N2 C32 14x14 K64 (reduced)",
                                                    seed::conv_bias_relu(2, 32, 14, 64), 3e-2);

  gpu_test::GpuRun run;
  o.modes = {HeurMode::A, HeurMode::B, HeurMode::Fallback};
  if (bench::failed(run.prepare(seed::conv_bias_relu(32, 128, 56, 256), o, BuildPlanPolicy::All)))
    return 1;
  if (bench::failed(run.run_once())) return 1;
  const double flops = 2.0 * 32 * 256 * 56 * 56 * 128 * 9;
  std::printf("candidates (build_plan_policy ALL):\n");
  double best = 1e30, heur = -1;
  int64_t k = 0;
  for (const auto& c : run.g.candidates()) {
    if (!c.support.is_ok()) {
      std::printf("  --  %-44s unsupported: %.120s\n", c.info.name.c_str(),
                  c.support.message().c_str());
      continue;
    }
    const int64_t idx = k++;
    if (!c.built) {
      std::printf("  %2lld  %-44s not built\n", static_cast<long long>(idx), c.info.name.c_str());
      continue;
    }
    bench::Timing t = bench::time_gpu(
        [&] { return run.g.execute_plan_at_index(*run.handle, run.pack, run.dev.ws, idx, run.ws); },
        nullptr, 5, 30);
    if (!t.status) {
      std::printf("  %2lld  %-44s error %s\n", static_cast<long long>(idx), c.info.name.c_str(),
                  t.status.message().c_str());
      continue;
    }
    std::printf("  %2lld  %-44s %8.4f ms  %7.1f TFLOP/s  ws %lld B\n", static_cast<long long>(idx),
                c.info.name.c_str(), t.median_ms, flops / t.median_ms / 1e9,
                static_cast<long long>(c.workspace_size));
    best = std::min(best, t.median_ms);
    if (idx == 0) heur = t.median_ms;
  }
  // The heuristics' choice, timed again with more iterations through execute().
  bench::Timing t = bench::time_gpu(
      [&] { return run.g.execute_plan_at_index(*run.handle, run.pack, run.dev.ws, 0, run.ws); },
      nullptr, 20, 200);
  if (t.status) heur = t.median_ms;
  std::printf(
      "RESULT conv_bias_relu heuristic %.4f ms (min %.4f), best of ALL %.4f ms, ratio %.3f\n", heur,
      t.min_ms, best, heur / best);
  std::printf("TARGET conv <= 0.09 ms: %s; <= 1.03x best: %s\n", bench::verdict(heur <= 0.09),
              bench::verdict(heur <= 1.03 * best));
  return 0;
}
