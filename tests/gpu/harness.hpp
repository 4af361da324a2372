// GPU test harness (GoogleTest side of compare.hpp): skip with the reason when no GPU/cuDNN is
// usable, and EXPECT a graph to match the reference engine.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>

#include "compare.hpp"
#include "dnngraph/plan_cache.hpp"

namespace dnngraph::gpu_test {

#define DNNGRAPH_REQUIRE_GPU()                                          \
  do {                                                                  \
    std::string why_ = ::dnngraph::gpu_test::gpu_unavailable_reason();  \
    if (!why_.empty()) GTEST_SKIP() << "no usable GPU/cuDNN: " << why_; \
  } while (0)

// The plan cache kept in memory for a test (nothing on disk, nothing from earlier runs), the
// default again when it ends.
struct MemoryCache {
  MemoryCache() {
    setenv("DNNGRAPH_CACHE", "memory", 1);
    PlanCache::reset_global();
  }
  ~MemoryCache() {
    unsetenv("DNNGRAPH_CACHE");
    PlanCache::reset_global();
  }
};

// ASSERTs that the run succeeded and EXPECTs it compared elements and found no mismatch.
void expect_report_ok(const RunReport& r);

// Runs `make` on both engines and EXPECTs every output element to match.
void expect_matches_reference(const std::function<void(Graph&)>& make,
                              const CompareOptions& o = {});

// Output bytes of `run` after `launch` (outputs poisoned first), EXPECTing it to succeed.
inline std::vector<std::vector<unsigned char>> outputs_after(
    GpuRun& run, const std::function<Status()>& launch) {
  for (size_t i = 0; i < run.bufs.size(); ++i)
    if (run.bufs[i].is_output) cudaMemset(run.dev.ptrs[i], 0xff, run.bufs[i].bytes);
  std::vector<std::vector<unsigned char>> out;
  Status s = launch();
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (size_t i = 0; i < run.bufs.size(); ++i)
    if (run.bufs[i].is_output) {
      out.emplace_back(run.bufs[i].bytes);
      cudaMemcpy(out.back().data(), run.dev.ptrs[i], run.bufs[i].bytes, cudaMemcpyDeviceToHost);
    }
  return out;
}

// Populates a new CUDA graph `graph` with run's graph and instantiates it as `exec`,
// ASSERTing each step (call it through ASSERT_NO_FATAL_FAILURE).
inline void make_cuda_graph(GpuRun& run, cudaGraph_t& graph, cudaGraphExec_t& exec) {
  ASSERT_EQ(cudaGraphCreate(&graph, 0), cudaSuccess);
  Status s = run.g.populate_cuda_graph(*run.handle, run.pack, run.dev.ws, graph);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
}

// Output bytes of `run` after one launch of the executable CUDA graph `exec`.
inline std::vector<std::vector<unsigned char>> outputs_after_launch(GpuRun& run,
                                                                    cudaGraphExec_t exec) {
  return outputs_after(run, [&] {
    return cudaGraphLaunch(exec, nullptr) == cudaSuccess
               ? Status::ok()
               : make_error(ErrorCode::BackendError, "cudaGraphLaunch");
  });
}

}  // namespace dnngraph::gpu_test
