// Sample: conv -> bias -> relu in NHWC bf16 on the cuDNN engine, checked against the reference
// engine on the same random inputs. (The timed full-size version is bench/gpu.)
#include <cstdio>

#ifdef DNNGRAPH_WITH_CUDA
#include "../tests/gpu/compare.hpp"
#include "seed_graphs.hpp"

int main() {
  using namespace dnngraph;
  if (auto why = gpu_test::gpu_unavailable_reason(); !why.empty()) {
    std::printf("conv_bias_relu: skipped, %s\n", why.c_str());
    return 0;
  }
  const int64_t n = 4, c = 64, hw = 28, k = 128;
  auto make = seed::conv_bias_relu(n, c, hw, k);
  gpu_test::CompareOptions o;
  o.min_abs = 3e-2;
  gpu_test::RunReport r = gpu_test::run_and_compare(make, o);
  if (!r.status) {
    std::printf("conv_bias_relu: ERROR %s\n", r.status.to_string().c_str());
    return 1;
  }
  std::printf(
      "conv_bias_relu N%lld C%lld %lldx%lld K%lld bf16 NHWC on plan %s: %lld outputs, "
      "%lld differ from the reference (max abs err %.3g): %s\n",
      (long long)n, (long long)c, (long long)hw, (long long)hw, (long long)k, r.plan_name.c_str(),
      (long long)r.compared, (long long)r.mismatches, r.max_abs_err,
      r.mismatches ? "FAIL" : "PASS");
  return r.mismatches ? 1 : 0;
}
#else
int main() {
  std::printf("conv_bias_relu: dnngraph was built without CUDA\n");
  return 0;
}
#endif
