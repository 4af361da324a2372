// GPU test harness: builds the same graph twice (a factory is called twice), runs one on the
// cuDNN engine (CUDA handle) and one on the reference engine (CPU handle) with the same fresh
// random inputs, poisons every output (all bits set: NaN for floating types) before running,
// and compares with a per-dtype tolerance. Skips with the reason when no GPU/cuDNN is usable.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dnngraph/dnngraph.hpp"

namespace dnngraph::gpu_test {

// Empty when a GPU and cuDNN are usable, else why not.
std::string gpu_unavailable_reason();

#define DNNGRAPH_REQUIRE_GPU()                                                   \
  do {                                                                           \
    std::string why_ = ::dnngraph::gpu_test::gpu_unavailable_reason();            \
    if (!why_.empty()) GTEST_SKIP() << "no usable GPU/cuDNN: " << why_;          \
  } while (0)

struct Tolerance {
  double rel = 0, abs = 0;
};
// Default per data type of the output: fp32 1e-5 (rel), bf16 2e-2, fp16 1e-2; callers widen it
// for reductions over many terms or TF32 math.
Tolerance default_tolerance(DataType t);

struct CompareOptions {
  double tol_scale = 1.0;       // multiplies the default tolerances
  double min_abs = 0.0;         // absolute floor added to the tolerance
  float input_lo = -1.0f, input_hi = 1.0f;
  uint32_t seed = 1234;
  std::vector<HeurMode> modes{HeurMode::A, HeurMode::B, HeurMode::Fallback};
};

struct RunReport {
  Status status;                  // Ok or the first failure (build or execute)
  std::string plan_name;          // cuDNN plan used
  int64_t compared = 0;           // elements compared
  int64_t mismatches = 0;
  std::string first_mismatch;     // readable
};

// Builds `make(g)` on both engines, runs both on the same inputs and compares every output.
RunReport run_and_compare(const std::function<void(Graph&)>& make, const CompareOptions& o = {});

// Convenience for tests: EXPECT the run to succeed and match.
void expect_matches_reference(const std::function<void(Graph&)>& make,
                              const CompareOptions& o = {});

// Packed strides, row-major (NCHW) or channels-last (NHWC, NDHWC) for rank >= 3.
std::vector<int64_t> strides_for(const std::vector<int64_t>& dim, bool channels_last);

// Host conversions used by the harness and the benches.
uint16_t to_half(float f);
uint16_t to_bf16(float f);
float from_half(uint16_t h);
float from_bf16(uint16_t b);

}  // namespace dnngraph::gpu_test
