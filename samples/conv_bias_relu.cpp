// Sample: conv -> bias -> relu in NHWC bf16 on the cuDNN engine, checked against the reference
// engine on the same random inputs. (The timed full-size version is bench/gpu.)
#include <cstdio>

#ifdef DNNGRAPH_WITH_CUDA
#include "../tests/gpu/compare.hpp"

int main() {
  using namespace dnngraph;
  if (auto why = gpu_test::gpu_unavailable_reason(); !why.empty()) {
    std::printf("conv_bias_relu: skipped, %s\n", why.c_str());
    return 0;
  }
  const int64_t n = 4, c = 64, hw = 28, k = 128;
  auto make = [&](Graph& g) {
    const DataType t = DataType::BFloat16;
    g.set_name("conv_bias_relu").set_io_data_type(t);
    auto nhwc = [](std::vector<int64_t> d) { return gpu_test::strides_for(d, true); };
    auto x = g.tensor(ir::TensorAttrs()
                          .set_name("X")
                          .set_dim({n, c, hw, hw})
                          .set_stride(nhwc({n, c, hw, hw}))
                          .set_data_type(t));
    auto w = g.tensor(ir::TensorAttrs()
                          .set_name("W")
                          .set_dim({k, c, 3, 3})
                          .set_stride(nhwc({k, c, 3, 3}))
                          .set_data_type(t));
    auto b = g.tensor(ir::TensorAttrs()
                          .set_name("B")
                          .set_dim({1, k, 1, 1})
                          .set_stride(nhwc({1, k, 1, 1}))
                          .set_data_type(t));
    ir::ConvFpropAttrs a;
    a.set_padding({1, 1}).set_stride({1, 1}).set_dilation({1, 1});
    auto y = g.relu(g.bias(g.conv_fprop(x, w, a), b));
    y->set_output(true)
        .set_name("Y")
        .set_data_type(t)
        .set_dim({n, k, hw, hw})
        .set_stride(nhwc({n, k, hw, hw}));
  };
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
