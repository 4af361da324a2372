// The C++ example of README.md, kept identical to it (tests/readme_test.sh checks).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <dnngraph/dnngraph.hpp>
#include <random>
#include <vector>
using namespace dnngraph;

int main() {
  const int64_t N = 2, C = 8, H = 8, W = 8, K = 16;
  Graph g;
  g.set_name("conv_bias_relu").set_io_data_type(DataType::Float);
  // NHWC is only strides: dims stay [N,C,H,W].
  auto X = g.tensor(
      ir::TensorAttrs().set_name("X").set_dim({N, C, H, W}).set_stride({C * H * W, 1, W * C, C}));
  auto F = g.tensor(
      ir::TensorAttrs().set_name("F").set_dim({K, C, 3, 3}).set_stride({C * 9, 1, 3 * C, C}));
  auto B =
      g.tensor(ir::TensorAttrs().set_name("bias").set_dim({1, K, 1, 1}).set_stride({K, 1, K, K}));
  auto conv = g.conv_fprop(X, F, ir::ConvFpropAttrs().set_padding({1, 1}));
  auto Y = g.relu(g.bias(conv, B));
  Y->set_output(true).set_name("Y");  // not virtual: execute writes it to your buffer

  auto handle = Handle::create(Device::cpu());  // Device::cuda(): the same graph on cuDNN
  Status s = handle ? g.build(handle.value()) : handle.status();
  if (!s) return std::puts(s.to_string().c_str()), 1;
  std::puts(g.to_table().c_str());  // ops and tensors with inferred dims, strides, types, uids

  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> x(N * C * H * W), f(K * C * 9), b(K), y(N * K * H * W, NAN);
  for (auto* v : {&x, &f, &b}) std::generate(v->begin(), v->end(), [&] { return u(rng); });
  std::vector<char> ws(g.get_workspace_size().value());
  s = g.execute(*handle.value(),
                {{X->uid, x.data()}, {F->uid, f.data()}, {B->uid, b.data()}, {Y->uid, y.data()}},
                ws.data());
  if (!s) return std::puts(s.to_string().c_str()), 1;

  // Y[0,k,1,1] by hand for every k: the 3x3 window at rows/cols 0..2, every channel, the
  // bias, then ReLU.
  double max_err = 0;
  for (int64_t k = 0; k < K; ++k) {
    double acc = b[k];
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t q = 0; q < 3; ++q)
        for (int64_t c = 0; c < C; ++c)
          acc += double(x[(r * W + q) * C + c]) * f[((k * 3 + r) * 3 + q) * C + c];
    max_err = std::max(max_err, std::fabs(y[(1 * W + 1) * K + k] - std::max(acc, 0.0)));
  }
  std::printf("Y[0,:,1,1] against a hand computation: max error %.2g\n", max_err);
  return max_err <= 1e-5 ? 0 : 1;
}
