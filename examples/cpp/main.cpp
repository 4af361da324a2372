// Y = GELU(A @ B + bias) on the CPU reference engine, checked element by element against a
// computation by hand. Build: see CMakeLists.txt.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include <dnngraph/dnngraph.hpp>

using namespace dnngraph;

int main() {
  const int64_t M = 16, K = 32, N = 8;
  Graph g;
  g.set_name("matmul_gelu").set_io_data_type(DataType::Float);
  auto A = g.tensor(ir::TensorAttrs().set_name("A").set_dim({1, M, K}));  // packed row-major
  auto B = g.tensor(ir::TensorAttrs().set_name("B").set_dim({1, K, N}));
  auto bias = g.tensor(ir::TensorAttrs().set_name("bias").set_dim({1, 1, N}));
  auto Y = g.gelu(g.bias(g.matmul(A, B), bias));
  Y->set_output(true).set_name("Y");

  auto handle = Handle::create(Device::cpu());
  Status s = handle ? g.build(handle.value()) : handle.status();
  if (!s) return std::fprintf(stderr, "%s\n", s.to_string().c_str()), 1;

  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> a(M * K), b(K * N), c(N), y(M * N, NAN);
  for (auto* v : {&a, &b, &c}) std::generate(v->begin(), v->end(), [&] { return normal(rng); });
  std::vector<char> ws(g.get_workspace_size().value());
  s = g.execute(*handle.value(),
                {{A->uid, a.data()}, {B->uid, b.data()}, {bias->uid, c.data()}, {Y->uid, y.data()}},
                ws.data());
  if (!s) return std::fprintf(stderr, "%s\n", s.to_string().c_str()), 1;

  double worst = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double z = c[j];
      for (int64_t k = 0; k < K; ++k) z += double(a[i * K + k]) * b[k * N + j];
      const double want = 0.5 * z * (1 + std::erf(z / std::sqrt(2.0)));
      worst = std::max(worst, std::fabs(y[i * N + j] - want) / (1 + std::fabs(want)));
    }
  std::printf("matmul_gelu [%lld,%lld] on the CPU: max error %.2g against the hand computation\n",
              (long long)M, (long long)N, worst);
  return worst <= 1e-5 ? 0 : 1;
}
