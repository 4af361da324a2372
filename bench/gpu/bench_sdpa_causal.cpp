// Causal SDPA forward (inference), b4 h16 s1024 d64 bf16. Target (issue 5): <= 0.037 ms.
// Checked against the reference engine on a reduced shape.
#include <cmath>

#include "../../samples/seed_graphs.hpp"
#include "bench_util.hpp"

using namespace dnngraph;

int main() {
  if (bench::skipped("sdpa_causal")) return 0;
  gpu_test::CompareOptions o = bench::check_reduced("sdpa_causal b1 h2 s128 d64 (reduced)",
                                                    seed::sdpa_causal(1, 2, 128, 64), 2e-2);
  gpu_test::GpuRun run;
  if (bench::failed(run.prepare(seed::sdpa_causal(4, 16, 1024, 64), o))) return 1;
  bench::Timing t = bench::time_execute(run, 20, 200);
  if (bench::failed(t.status)) return 1;
  // Causal: about half of the 4*b*h*s*s*d multiply-adds.
  const double flops = 4.0 * 4 * 16 * 1024.0 * 1024 * 64 / 2;
  std::printf("RESULT sdpa_causal plan %s: %.4f ms (min %.4f), %.1f TFLOP/s\n",
              run.plan_name.c_str(), t.median_ms, t.min_ms, flops / t.median_ms / 1e9);
  std::printf("TARGET causal sdpa <= 0.037 ms: %s\n", bench::verdict(t.median_ms <= 0.037));
  return 0;
}
