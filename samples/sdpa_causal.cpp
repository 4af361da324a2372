// Sample: causal scaled dot-product attention (bf16, inference) on the cuDNN engine, checked
// against the reference engine.
#include <cmath>
#include <cstdio>

#ifdef DNNGRAPH_WITH_CUDA
#include "../tests/gpu/compare.hpp"
#include "seed_graphs.hpp"

int main() {
  using namespace dnngraph;
  if (auto why = gpu_test::gpu_unavailable_reason(); !why.empty()) {
    std::printf("sdpa_causal: skipped, %s\n", why.c_str());
    return 0;
  }
  const int64_t b = 2, h = 4, s = 256, d = 64;
  auto make = seed::sdpa_causal(b, h, s, d);
  gpu_test::CompareOptions o;
  o.min_abs = 2e-2;
  gpu_test::RunReport r = gpu_test::run_and_compare(make, o);
  if (!r.status) {
    std::printf("sdpa_causal: ERROR %s\n", r.status.to_string().c_str());
    return 1;
  }
  std::printf(
      "sdpa_causal b%lld h%lld s%lld d%lld bf16 on plan %s: %lld outputs, %lld differ from "
      "the reference (max abs err %.3g): %s\n",
      (long long)b, (long long)h, (long long)s, (long long)d, r.plan_name.c_str(),
      (long long)r.compared, (long long)r.mismatches, r.max_abs_err,
      r.mismatches ? "FAIL" : "PASS");
  return r.mismatches ? 1 : 0;
}
#else
int main() {
  std::printf("sdpa_causal: dnngraph was built without CUDA\n");
  return 0;
}
#endif
