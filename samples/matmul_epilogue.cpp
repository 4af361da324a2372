// Sample: batched bf16 matmul with a fused epilogue (x alpha -> + bias -> gelu) and an AMAX of
// the result, on the cuDNN engine, checked against the reference engine.
#include <cstdio>

#ifdef DNNGRAPH_WITH_CUDA
#include "../tests/gpu/compare.hpp"
#include "seed_graphs.hpp"

int main() {
  using namespace dnngraph;
  if (auto why = gpu_test::gpu_unavailable_reason(); !why.empty()) {
    std::printf("matmul_epilogue: skipped, %s\n", why.c_str());
    return 0;
  }
  const int64_t b = 4, m = 128, k = 256, n = 128;
  auto make = seed::matmul_epilogue(b, m, k, n, /*alpha_constant=*/0.5);
  gpu_test::CompareOptions o;
  o.min_abs = 3e-2;
  o.tol_scale = 2;
  gpu_test::RunReport r = gpu_test::run_and_compare(make, o);
  if (!r.status) {
    std::printf("matmul_epilogue: ERROR %s\n", r.status.to_string().c_str());
    return 1;
  }
  std::printf(
      "matmul_epilogue %lldx%lldx%lldx%lld bf16 on plan %s: %lld outputs, %lld differ from "
      "the reference (max abs err %.3g): %s\n",
      (long long)b, (long long)m, (long long)k, (long long)n, r.plan_name.c_str(),
      (long long)r.compared, (long long)r.mismatches, r.max_abs_err,
      r.mismatches ? "FAIL" : "PASS");
  return r.mismatches ? 1 : 0;
}
#else
int main() {
  std::printf("matmul_epilogue: dnngraph was built without CUDA\n");
  return 0;
}
#endif
