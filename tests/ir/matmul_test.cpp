// Matmul inference and checks.
#include <gtest/gtest.h>

#include "ir/test_util.hpp"

namespace dnngraph::ir {
namespace {

using testing::expect_inferred;
using testing::expect_invalid;
using testing::make_input;

TEST(MatmulInfer, BatchedWithBroadcastAndTransposedB) {
  Graph g;
  g.set_io_data_type(DataType::Half);
  Tensor a = make_input(g, "A", {4, 1, 32, 64});
  // B stored column-major per batch (a transposed view): C stays row-major.
  Tensor b = make_input(g, "B", {1, 3, 64, 16}, DataType::Half, {3 * 64 * 16, 64 * 16, 1, 64});
  Tensor c = g.matmul(a, b, {}, {"mm"});
  c->set_output(true);
  expect_inferred(g, c, {4, 3, 32, 16}, {3 * 32 * 16, 32 * 16, 16, 1}, DataType::Half);
}

TEST(MatmulInfer, VirtualOutputTakesIntermediateType) {
  Graph g;
  g.set_io_data_type(DataType::BFloat16).set_intermediate_data_type(DataType::Float);
  Tensor a = make_input(g, "A", {8, 4}, DataType::BFloat16);
  Tensor b = make_input(g, "B", {4, 2}, DataType::BFloat16);
  Tensor c = g.matmul(a, b);
  Tensor out = g.relu(c);
  out->set_output(true);
  ASSERT_TRUE(g.validate().is_ok());
  EXPECT_EQ(c->data_type, DataType::Float);
  EXPECT_EQ(c->dim, (std::vector<int64_t>{8, 2}));
  EXPECT_EQ(out->dim, (std::vector<int64_t>{8, 2}));
}

TEST(MatmulInfer, InnerDimsDiffer) {
  Graph g;
  Tensor a = make_input(g, "lhs", {2, 16, 64});
  Tensor b = make_input(g, "rhs", {2, 32, 8});
  g.matmul(a, b, {}, {"mm0"})->set_output(true);
  expect_invalid(g, {"matmul 'mm0'", "inner dims differ", "A 'lhs' has K=64 (dim 2)",
                     "B 'rhs' has K=32 (dim 1)"});
}

TEST(MatmulInfer, BatchDimsIncompatible) {
  Graph g;
  Tensor a = make_input(g, "lhs", {2, 16, 8});
  Tensor b = make_input(g, "rhs", {3, 8, 4});
  g.matmul(a, b, {}, {"mm0"})->set_output(true);
  expect_invalid(g, {"matmul 'mm0'", "batch dim 0", "'lhs' has 2", "'rhs' has 3"});
}

TEST(MatmulInfer, RankChecks) {
  {
    Graph g;
    Tensor a = make_input(g, "lhs", {16});
    Tensor b = make_input(g, "rhs", {16});
    g.matmul(a, b, {}, {"mm0"})->set_output(true);
    expect_invalid(g, {"matmul 'mm0'", "A 'lhs'", "rank 2 or more"});
  }
  {
    Graph g;
    Tensor a = make_input(g, "lhs", {2, 16, 8});
    Tensor b = make_input(g, "rhs", {8, 4});
    g.matmul(a, b, {}, {"mm0"})->set_output(true);
    expect_invalid(g, {"matmul 'mm0'", "'lhs' has rank 3", "'rhs' has rank 2"});
  }
}

TEST(MatmulInfer, UserSetOutputChecked) {
  Graph g;
  Tensor a = make_input(g, "lhs", {16, 8});
  Tensor b = make_input(g, "rhs", {8, 4});
  g.matmul(a, b, {}, {"mm0"})->set_output(true).set_dim({16, 8});
  expect_invalid(g, {"matmul 'mm0'", "'mm0::C'", "[16,8]", "[16,4]"});
}

TEST(MatmulInfer, PaddingValueIsReserved) {
  Graph g;
  Tensor a = make_input(g, "lhs", {16, 8});
  Tensor b = make_input(g, "rhs", {8, 4});
  MatmulAttrs m;
  m.padding_value = 0.0;
  g.matmul(a, b, m, {"mm0"})->set_output(true);
  expect_invalid(g, {"matmul 'mm0'", "padding_value"}, ErrorCode::NotSupported);
}

}  // namespace
}  // namespace dnngraph::ir
