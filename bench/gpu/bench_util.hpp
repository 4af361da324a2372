// Timing for the GPU benchmarks: CUDA events around each launch on the handle's stream,
// warm-up first, median (and min) of many, inputs random (never zeros), outputs poisoned.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "../../tests/gpu/compare.hpp"

namespace dnngraph::bench {

struct Timing {
  double median_ms = 0, min_ms = 0;
  int iters = 0;
  Status status;
};

// Times `launch` (which enqueues work on `stream`) `iters` times after `warmup` calls.
inline Timing time_gpu(const std::function<Status()>& launch, cudaStream_t stream, int warmup,
                       int iters) {
  Timing t;
  for (int i = 0; i < warmup; ++i)
    if (Status s = launch(); !s) return {0, 0, 0, s};
  cudaStreamSynchronize(stream);
  std::vector<cudaEvent_t> ev(static_cast<size_t>(2 * iters));
  for (auto& e : ev) cudaEventCreate(&e);
  for (int i = 0; i < iters; ++i) {
    cudaEventRecord(ev[static_cast<size_t>(2 * i)], stream);
    if (Status s = launch(); !s) {
      t.status = s;
      break;
    }
    cudaEventRecord(ev[static_cast<size_t>(2 * i + 1)], stream);
  }
  cudaStreamSynchronize(stream);
  std::vector<double> ms;
  for (int i = 0; i < iters && t.status.is_ok(); ++i) {
    float m = 0;
    cudaEventElapsedTime(&m, ev[static_cast<size_t>(2 * i)], ev[static_cast<size_t>(2 * i + 1)]);
    ms.push_back(m);
  }
  for (auto& e : ev) cudaEventDestroy(e);
  if (ms.empty()) return t;
  std::sort(ms.begin(), ms.end());
  t.median_ms = ms[ms.size() / 2];
  t.min_ms = ms.front();
  t.iters = static_cast<int>(ms.size());
  return t;
}

// Runs a prepared graph once (the untimed first call), then times execute() of its plan.
inline Timing time_execute(gpu_test::GpuRun& run, int warmup, int iters) {
  if (Status s = run.run_once(); !s) return {0, 0, 0, s};
  return time_gpu([&] { return run.g.execute(*run.handle, run.pack, run.dev.ws, run.ws); }, nullptr,
                  warmup, iters);
}

inline void print_check(const char* what, const gpu_test::RunReport& r) {
  if (!r.status) {
    std::printf("CHECK %-40s ERROR %s\n", what, r.status.to_string().c_str());
    return;
  }
  std::printf("CHECK %-40s %s  (%lld elements, %lld mismatches, max abs err %.3g, plan %s)%s%s\n",
              what, r.mismatches == 0 ? "PASS" : "FAIL", static_cast<long long>(r.compared),
              static_cast<long long>(r.mismatches), r.max_abs_err, r.plan_name.c_str(),
              r.mismatches ? " first: " : "", r.first_mismatch.c_str());
}

// Comparison options with `min_abs`, under which the graph `make` builds (the benchmark's graph
// on a reduced shape) is checked against the reference engine, the verdict printed.
inline gpu_test::CompareOptions check_reduced(const char* what,
                                              const std::function<void(Graph&)>& make,
                                              double min_abs) {
  gpu_test::CompareOptions o;
  o.min_abs = min_abs;
  print_check(what, gpu_test::run_and_compare(make, o));
  return o;
}

inline const char* verdict(bool ok) { return ok ? "MET" : "MISSED"; }

// True (having printed why) when there is no usable GPU: the benchmark `name` skips.
inline bool skipped(const char* name) {
  const std::string why = gpu_test::gpu_unavailable_reason();
  if (why.empty()) return false;
  std::printf("SKIP %s: %s\n", name, why.c_str());
  return true;
}

// True (having printed it) when s is an error.
inline bool failed(const Status& s) {
  if (s) return false;
  std::printf("ERROR %s\n", s.to_string().c_str());
  return true;
}

// Host microseconds per call of f over `calls` calls (the device synchronized after them).
template <class F>
double us_per_call(F&& f, int calls) {
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) f();
  auto t1 = std::chrono::steady_clock::now();
  cudaDeviceSynchronize();
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / calls;
}

}  // namespace dnngraph::bench
