// Sample: batched bf16 matmul with a fused epilogue (x alpha -> + bias -> gelu) and an AMAX of
// the result, on the cuDNN engine, checked against the reference engine.
#include <cstdio>

#ifdef DNNGRAPH_WITH_CUDA
#include "../tests/gpu/compare.hpp"

int main() {
  using namespace dnngraph;
  if (auto why = gpu_test::gpu_unavailable_reason(); !why.empty()) {
    std::printf("matmul_epilogue: skipped, %s\n", why.c_str());
    return 0;
  }
  const int64_t b = 4, m = 128, k = 256, n = 128;
  auto make = [&](Graph& g) {
    const DataType t = DataType::BFloat16;
    g.set_name("matmul_epilogue").set_io_data_type(t);
    auto mk = [&](const char* name, std::vector<int64_t> d) {
      auto s = ir::packed_strides(d);
      return g.tensor(
          ir::TensorAttrs().set_name(name).set_dim(std::move(d)).set_stride(s).set_data_type(t));
    };
    auto alpha = g.scalar(ir::Scalar::of_float(0.5), "alpha");  // pass-by-value constant
    auto y = g.gelu(g.bias(g.scale(g.matmul(mk("A", {b, m, k}), mk("B", {b, k, n})), alpha),
                           mk("bias", {1, 1, n})));
    y->set_output(true).set_name("Y").set_data_type(t).set_dim({b, m, n}).set_stride(
        ir::packed_strides({b, m, n}));
    auto amax = g.reduction(y, {ReductionMode::Amax});
    amax->set_output(true)
        .set_name("AMAX")
        .set_data_type(DataType::Float)
        .set_dim({1, 1, 1})
        .set_stride({1, 1, 1});
  };
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
