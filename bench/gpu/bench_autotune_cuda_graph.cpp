// Graph-backed execute and the autotuner on the H200:
//  1. host time per call of execute() on a small plan (bf16 matmul 1x64x64x64) with
//     set_cuda_graph_execute(true) (a replayed CUDA graph) against plain execute(), results
//     checked identical; target (issue 12) <= 4.5 us per call.
//  2. Graph::autotune on the tutorial's conv (NHWC bf16 N32 C128 56x56 K256 3x3): candidates,
//     wall time, the choice against the best of an independent re-timing (target <= 1.02x),
//     and a second autotune reusing the recorded choice (nothing timed).
#include <chrono>
#include <cstdlib>

#include "../../samples/seed_graphs.hpp"
#include "bench_util.hpp"
#include "dnngraph/plan_cache.hpp"

using namespace dnngraph;

namespace {

std::vector<unsigned char> output(gpu_test::GpuRun& run) {
  cudaDeviceSynchronize();
  for (size_t i = 0; i < run.bufs.size(); ++i)
    if (run.bufs[i].is_output) {
      std::vector<unsigned char> v(run.bufs[i].bytes);
      cudaMemcpy(v.data(), run.dev.ptrs[i], v.size(), cudaMemcpyDeviceToHost);
      return v;
    }
  return {};
}

void matmul64(Graph& g) {
  const DataType t = DataType::BFloat16;
  g.set_name("matmul64").set_io_data_type(t);
  auto a = g.tensor(ir::TensorAttrs()
                        .set_name("A")
                        .set_dim({1, 64, 64})
                        .set_stride({4096, 64, 1})
                        .set_data_type(t));
  auto b = g.tensor(ir::TensorAttrs()
                        .set_name("B")
                        .set_dim({1, 64, 64})
                        .set_stride({4096, 64, 1})
                        .set_data_type(t));
  g.matmul(a, b)->set_output(true).set_name("C").set_data_type(t);
}

}  // namespace

int main() {
  if (bench::skipped("autotune_cuda_graph")) return 0;
  setenv("DNNGRAPH_CACHE", "memory", 1);
  PlanCache::reset_global();

  // ---- 1. graph-backed execute
  {
    gpu_test::GpuRun run;
    if (bench::failed(run.prepare(matmul64, gpu_test::CompareOptions{}))) return 1;
    (void)run.run_once();
    const auto want = output(run);
    const int calls = 20000;
    for (int i = 0; i < 2000; ++i) (void)run.g.execute(*run.handle, run.pack, run.dev.ws);
    const double plain =
        bench::us_per_call([&] { (void)run.g.execute(*run.handle, run.pack, run.dev.ws); }, calls);
    run.g.set_cuda_graph_execute(true);
    for (size_t i = 0; i < run.bufs.size(); ++i)
      if (run.bufs[i].is_output) cudaMemset(run.dev.ptrs[i], 0xff, run.bufs[i].bytes);
    Status first = run.g.execute(*run.handle, run.pack, run.dev.ws);  // records
    const bool same = first.is_ok() && output(run) == want;
    for (int i = 0; i < 2000; ++i) (void)run.g.execute(*run.handle, run.pack, run.dev.ws);
    const double replay =
        bench::us_per_call([&] { (void)run.g.execute(*run.handle, run.pack, run.dev.ws); }, calls);
    std::printf("CHECK graph-backed execute identical to execute: %s%s\n", same ? "PASS" : "FAIL",
                first ? "" : (" " + first.to_string()).c_str());
    std::printf(
        "RESULT host us per call, bf16 matmul 1x64x64x64: execute %.2f, graph-backed %.2f\n", plain,
        replay);
    std::printf("TARGET graph-backed execute <= 4.5 us: %s\n", bench::verdict(replay <= 4.5));
  }

  // ---- 2. autotune on the tutorial's conv
  gpu_test::GpuRun run;
  gpu_test::CompareOptions o;
  if (bench::failed(run.prepare(seed::conv_bias_relu(32, 128, 56, 256), o))) return 1;
  auto ws = run.g.get_autotune_workspace_size();
  void* w = nullptr;
  if (!ws || cudaMalloc(&w, static_cast<size_t>(std::max<int64_t>(*ws, 1))) != cudaSuccess) {
    std::printf("ERROR autotune workspace\n");
    return 1;
  }
  AutotuneOptions opts;
  opts.budget_ms = 20000;
  auto r = run.g.autotune(*run.handle, run.pack, w, *ws, opts);
  if (!r) {
    std::printf("ERROR %s\n", r.status().to_string().c_str());
    return 1;
  }
  int timed = 0;
  for (const auto& c : r->candidates) {
    if (c.median_ms >= 0) ++timed;
    std::printf("  %-44s %9.4f ms  ws %lld  %s\n", c.name.c_str(), c.median_ms,
                static_cast<long long>(c.workspace_size),
                c.status ? "" : c.status.message().substr(0, 60).c_str());
  }
  std::printf(
      "RESULT autotune conv: %d of %zu candidates timed in %.0f ms (%lld runs, L2 flush "
      "%lld B), chose '%s' %.4f ms\n",
      timed, r->candidates.size(), r->wall_ms, static_cast<long long>(r->timed_runs),
      static_cast<long long>(r->flush_bytes), r->selected_name.c_str(), r->selected_ms);
  opts.use_cache = false;
  opts.iterations = 30;
  auto again = run.g.autotune(*run.handle, run.pack, w, *ws, opts);
  double chosen = -1;
  if (again)
    for (const auto& c : again->candidates)
      if (c.name == r->selected_name) chosen = c.median_ms;
  const double best = again ? again->selected_ms : -1;
  std::printf("RESULT re-timed: chosen %.4f ms, best '%s' %.4f ms, ratio %.4f\n", chosen,
              again ? again->selected_name.c_str() : "?", best, chosen / best);
  std::printf("TARGET autotune choice <= 1.02x the best: %s\n",
              bench::verdict(chosen > 0 && chosen <= 1.02 * best));
  gpu_test::GpuRun second;
  (void)second.prepare(seed::conv_bias_relu(32, 128, 56, 256), o);
  auto reused = second.g.autotune(*second.handle, second.pack, w, *ws, AutotuneOptions{});
  std::printf("RESULT second autotune: from_cache %d, timed runs %lld, %.2f ms\n",
              reused ? reused->from_cache : -1,
              reused ? static_cast<long long>(reused->timed_runs) : -1LL,
              reused ? reused->wall_ms : -1.0);
  cudaFree(w);
  return 0;
}
