// Reference matmul kernel: hand-worked values, naive fp64 loops for batched and broadcast
// batch dims, transposed (strided) operands, reduced-precision storage, and a graph.
#include <gtest/gtest.h>

#include "common/ref_harness.hpp"

namespace {

using dnngraph::DataType;
using dnngraph::ir::Node;
using dnngraph::ir::Role;
using dnngraph::ir::Tensor;

Node matmul_node(const Tensor& a, const Tensor& b, const Tensor& c,
                 DataType compute = DataType::Float) {
  Node n;
  n.name = "mm";
  n.compute_data_type = compute;
  n.attrs = dnngraph::ir::MatmulAttrs{};
  n.inputs = {{Role::A, a}, {Role::B, b}};
  n.outputs = {{Role::C, c}};
  return n;
}

// C[b..., m, n] = sum_k A[b'..., m, k] B[b''..., k, n] where b', b'' are b aligned from the
// right with size-1 (or missing) dims pinned to 0.
std::vector<double> naive(const std::vector<double>& a, const std::vector<int64_t>& ad,
                          const std::vector<double>& b, const std::vector<int64_t>& bd,
                          const std::vector<int64_t>& cd) {
  const size_t rc = cd.size();
  const int64_t K = ad.back();
  auto operand_index = [&](std::vector<int64_t> cidx, const std::vector<int64_t>& od, int64_t row,
                           int64_t col) {
    std::vector<int64_t> idx(od.size());
    for (size_t k = 0; k + 2 < od.size(); ++k) {
      const int64_t ci = cidx[rc - od.size() + k];
      idx[k] = od[k] == 1 ? 0 : ci;
    }
    idx[od.size() - 2] = row;
    idx[od.size() - 1] = col;
    return ref_test::ravel(idx, od);
  };
  int64_t total = 1;
  for (int64_t d : cd) total *= d;
  std::vector<double> c(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i) {
    const auto ci = ref_test::unravel(i, cd);
    // Dense row-major operands: A's k walks with stride 1, B's with stride N.
    const int64_t a0 = operand_index(ci, ad, ci[rc - 2], 0);
    const int64_t b0 = operand_index(ci, bd, 0, ci[rc - 1]);
    const int64_t n_b = bd.back();
    double s = 0;
    for (int64_t k = 0; k < K; ++k)
      s += a[static_cast<size_t>(a0 + k)] * b[static_cast<size_t>(b0 + k * n_b)];
    c[static_cast<size_t>(i)] = s;
  }
  return c;
}

struct Case {
  std::vector<int64_t> ad, bd, cd;
  DataType in = DataType::Float, out = DataType::Float;
  bool b_transposed = false;  // B stored column-major in its last two dims
};

void check_case(const Case& c, uint64_t seed) {
  std::vector<int64_t> bstride = ref_test::packed(c.bd);
  if (c.b_transposed) {
    const size_t r = c.bd.size();
    std::vector<int64_t> order;
    for (size_t k = 0; k + 2 < r; ++k) order.push_back(static_cast<int64_t>(k));
    order.push_back(static_cast<int64_t>(r - 1));
    order.push_back(static_cast<int64_t>(r - 2));
    bstride = dnngraph::ir::packed_strides(c.bd, order);
  }
  auto a = ref_test::make_tensor("A", c.ad, c.in);
  auto b = ref_test::make_tensor("B", c.bd, c.in, bstride);
  auto out = ref_test::make_tensor("C", c.cd, c.out);
  const Node n = matmul_node(a, b, out);
  ASSERT_OK(ref_test::validate_node(n));
  ref_test::Rng rng(seed);
  ref_test::Buffers bufs;
  const auto av = bufs.random(a, rng), bv = bufs.random(b, rng);
  ASSERT_OK(bufs.run_kernel(n));
  EXPECT_TRUE(
      ref_test::all_close(bufs.values(out), naive(av, c.ad, bv, c.bd, c.cd), ref_test::tol(c.out)));
}

TEST(RefMatmul, HandWorked) {
  auto a = ref_test::make_tensor("A", {2, 3}, DataType::Float);
  auto b = ref_test::make_tensor("B", {3, 2}, DataType::Float);
  auto c = ref_test::make_tensor("C", {2, 2}, DataType::Float);
  ref_test::Buffers bufs;
  bufs.set(a, {1, 2, 3, 4, 5, 6});
  bufs.set(b, {7, 8, 9, 10, 11, 12});
  ASSERT_OK(bufs.run_kernel(matmul_node(a, b, c)));
  // [1 2 3; 4 5 6] x [7 8; 9 10; 11 12] = [58 64; 139 154]
  EXPECT_EQ(bufs.values(c), (std::vector<double>{58, 64, 139, 154}));
}

TEST(RefMatmul, Plain2D) { check_case({{5, 7}, {7, 3}, {5, 3}}, 1); }
TEST(RefMatmul, Batched) { check_case({{3, 4, 5}, {3, 5, 6}, {3, 4, 6}}, 2); }
TEST(RefMatmul, BroadcastBatchDims) { check_case({{2, 1, 4, 5}, {1, 3, 5, 6}, {2, 3, 4, 6}}, 3); }
// One broadcasting rule for every engine (src/ir/ops/matmul.cpp): A and B have the same rank,
// and a batch dim of 1 broadcasts. A lower-rank operand is refused at validate, naming it.
TEST(RefMatmul, BroadcastSingletonBatchAgainstBatched) {
  check_case({{1, 4, 5}, {3, 5, 6}, {3, 4, 6}}, 4);
}
TEST(RefMatmul, LowerRankOperandIsRefused) {
  auto a = ref_test::make_tensor("A", {4, 5}, DataType::Float);
  auto b = ref_test::make_tensor("B", {3, 5, 6}, DataType::Float);
  auto c = ref_test::make_tensor("C", {3, 4, 6}, DataType::Float);
  ref_test::Buffers bufs;
  ref_test::Rng rng(4);
  bufs.random(a, rng), bufs.random(b, rng);
  const dnngraph::Status s = bufs.run_kernel(matmul_node(a, b, c));
  EXPECT_EQ(s.code(), dnngraph::ErrorCode::InvalidGraph);
  EXPECT_NE(s.message().find("A 'A' has rank 2"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("B 'B' has rank 3"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("same rank"), std::string::npos) << s.message();
}
// Large enough (> 2^18 multiply-adds) that the kernel runs multi-threaded.
TEST(RefMatmul, ThreadedSize) { check_case({{2, 3, 40, 50}, {1, 3, 50, 30}, {2, 3, 40, 30}}, 10); }
TEST(RefMatmul, TransposedB) {
  Case c{{2, 3, 8}, {2, 8, 5}, {2, 3, 5}};
  c.b_transposed = true;
  check_case(c, 5);
}
TEST(RefMatmul, Bf16InFp32Out) {
  Case c{{2, 6, 33}, {1, 33, 4}, {2, 6, 4}};
  c.in = DataType::BFloat16;
  check_case(c, 6);
}
TEST(RefMatmul, HalfInHalfOut) {
  Case c{{4, 9}, {9, 7}, {4, 7}};
  c.in = c.out = DataType::Half;
  check_case(c, 7);
}

// Integer-valued inputs make every sum exact, so the result must equal the naive loop
// exactly; a bf16 compute type then rounds each final sum once.
TEST(RefMatmul, ComputeTypeRoundsTheFinalSum) {
  auto a = ref_test::make_tensor("A", {3, 16}, DataType::Float);
  auto b = ref_test::make_tensor("B", {16, 4}, DataType::Float);
  auto c = ref_test::make_tensor("C", {3, 4}, DataType::Float);
  ref_test::Rng rng(8);
  ref_test::Buffers bufs;
  const auto av = bufs.random(a, rng, -9, 9, true), bv = bufs.random(b, rng, -9, 9, true);
  ASSERT_OK(bufs.run_kernel(matmul_node(a, b, c, DataType::BFloat16)));
  const auto exact = naive(av, {3, 16}, bv, {16, 4}, {3, 4});
  EXPECT_TRUE(
      ref_test::all_close(bufs.values(c), ref_test::rounded(DataType::BFloat16, exact), {0, 0}));
}

TEST(RefMatmul, CheckNamesTheBadTensor) {
  auto a = ref_test::make_tensor("A", {2, 4, 64}, DataType::Float);
  auto b = ref_test::make_tensor("B", {2, 32, 8}, DataType::Float);
  auto c = ref_test::make_tensor("C", {2, 4, 8}, DataType::Float);
  dnngraph::Status s = ref_test::validate_node(matmul_node(a, b, c));
  EXPECT_EQ(s.code(), dnngraph::ErrorCode::InvalidGraph);
  EXPECT_NE(s.message().find("A 'A' has K=64"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("B 'B' has K=32"), std::string::npos) << s.message();
  auto b2 = ref_test::make_tensor("B2", {3, 64, 8}, DataType::Float);
  s = ref_test::validate_node(matmul_node(a, b2, c));
  EXPECT_EQ(s.code(), dnngraph::ErrorCode::InvalidGraph);
  EXPECT_NE(s.message().find("'B2'"), std::string::npos) << s.message();
}

// matmul -> bias (broadcast over rows) as a graph, the product a virtual bf16 tensor.
TEST(RefMatmul, GraphMatmulBias) {
  dnngraph::Graph g;
  g.set_io_data_type(DataType::Float).set_intermediate_data_type(DataType::BFloat16);
  auto a =
      g.tensor(dnngraph::ir::TensorAttrs().set_name("a").set_dim({2, 3, 8}).set_stride({24, 8, 1}));
  auto b =
      g.tensor(dnngraph::ir::TensorAttrs().set_name("b").set_dim({2, 8, 5}).set_stride({40, 1, 8}));
  auto bias = g.tensor(
      dnngraph::ir::TensorAttrs().set_name("bias").set_dim({1, 1, 5}).set_stride({5, 5, 1}));
  auto y = g.bias(g.matmul(a, b), bias);
  y->set_output(true).set_name("y");
  ASSERT_OK(g.validate());
  ref_test::Rng rng(9);
  ref_test::Buffers bufs;
  const auto av = bufs.random(a, rng), bv = bufs.random(b, rng), biasv = bufs.random(bias, rng);
  ASSERT_OK(bufs.run_graph(g));
  auto prod = naive(av, {2, 3, 8}, bv, {2, 8, 5}, {2, 3, 5});
  std::vector<double> want(prod.size());
  for (size_t i = 0; i < prod.size(); ++i) {
    // The product is stored as bf16 (after fp32 compute rounding) before the bias add.
    const double p = dnngraph::reference::round_to(
        DataType::BFloat16, dnngraph::reference::round_to(DataType::Float, prod[i]));
    want[i] = p + biasv[i % 5];
  }
  EXPECT_TRUE(ref_test::all_close(bufs.values(y), want, ref_test::tol(DataType::Float)));
}

}  // namespace
