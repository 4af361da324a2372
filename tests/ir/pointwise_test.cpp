// Pointwise inference and checks: arity, broadcasting, layout following, scalars.
#include <gtest/gtest.h>

#include "ir/test_util.hpp"

namespace dnngraph::ir {
namespace {

using testing::expect_invalid;
using testing::make_input;

TEST(PointwiseInfer, BroadcastsAndFollowsFullShapeInputLayout) {
  Graph g;
  g.set_io_data_type(DataType::Half);
  Tensor bias = make_input(g, "bias", {1, 8, 1, 1});
  // NHWC activation as the second input: the output follows it, not the bias.
  Tensor x = make_input(g, "x", {2, 8, 3, 5}, DataType::Half, {120, 1, 40, 8});
  Tensor y = g.add(bias, x, {"add"});
  y->set_output(true);
  ASSERT_TRUE(g.validate().is_ok()) << g.validate().to_string();
  EXPECT_EQ(y->dim, (std::vector<int64_t>{2, 8, 3, 5}));
  EXPECT_EQ(y->stride, (std::vector<int64_t>{120, 1, 40, 8}));
}

TEST(PointwiseInfer, BothInputsBroadcast) {
  Graph g;
  g.set_io_data_type(DataType::Float);
  Tensor col = make_input(g, "col", {4, 1}, DataType::Float);
  Tensor row = make_input(g, "row", {1, 6}, DataType::Float);
  Tensor y = g.mul(col, row);
  y->set_output(true);
  ASSERT_TRUE(g.validate().is_ok());
  EXPECT_EQ(y->dim, (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(y->stride, (std::vector<int64_t>{6, 1}));
}

TEST(PointwiseInfer, PassByValueScalarOfAnyRank) {
  Graph g;
  g.set_io_data_type(DataType::BFloat16);
  Tensor x = make_input(g, "x", {2, 3, 4}, DataType::BFloat16);
  Tensor alpha = g.scalar(Scalar::of_float(0.25), "alpha");  // dims [1]
  Tensor y = g.mul(alpha, x);
  y->set_output(true);
  ASSERT_TRUE(g.validate().is_ok()) << g.validate().to_string();
  EXPECT_EQ(y->dim, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(alpha->data_type, DataType::Float);
  EXPECT_EQ(alpha->stride, (std::vector<int64_t>{1}));
}

TEST(PointwiseInfer, UserSetOutputMayGrowWhereInputsBroadcast) {
  Graph g;
  g.set_io_data_type(DataType::Float);
  Tensor x = make_input(g, "x", {1, 5}, DataType::Float);
  Tensor y = g.unary(PointwiseMode::Identity, x, {"expand"});
  y->set_output(true).set_dim({3, 5});
  ASSERT_TRUE(g.validate().is_ok());
  EXPECT_EQ(y->stride, (std::vector<int64_t>{5, 1}));

  Graph g2;
  Tensor x2 = make_input(g2, "x", {2, 5});
  g2.unary(PointwiseMode::Identity, x2, {"expand"})->set_output(true).set_dim({3, 5});
  expect_invalid(g2, {"pointwise 'expand'", "'expand::OUT_0'", "[3,5]", "[2,5]"});
}

TEST(PointwiseInfer, BroadcastIncompatible) {
  Graph g;
  Tensor a = make_input(g, "a", {2, 3});
  Tensor b = make_input(g, "b", {2, 4});
  g.add(a, b, {"sum"})->set_output(true);
  expect_invalid(g, {"pointwise 'sum'", "IN_1 'b'", "[2,4]", "dim 1 is 4 vs 3"});
}

TEST(PointwiseInfer, RankMismatch) {
  Graph g;
  Tensor a = make_input(g, "a", {2, 3});
  Tensor b = make_input(g, "b", {2, 3, 1});
  g.add(a, b, {"sum"})->set_output(true);
  expect_invalid(g, {"pointwise 'sum'", "rank mismatch", "'a'", "'b'"});
}

TEST(PointwiseInfer, ArityChecked) {
  {
    Graph g;
    Tensor a = make_input(g, "a", {2, 3});
    PointwiseAttrs p;
    p.mode = PointwiseMode::Add;
    g.pointwise(a, p, {"half_add"})->set_output(true);
    expect_invalid(g, {"pointwise 'half_add'", "ADD takes 2", "IN_1 is missing"});
  }
  {
    Graph g;
    Tensor a = make_input(g, "a", {2, 3});
    Tensor b = make_input(g, "extra", {2, 3});
    PointwiseAttrs p;
    p.mode = PointwiseMode::Exp;
    g.pointwise(a, b, p, {"exp2"})->set_output(true);
    expect_invalid(g, {"pointwise 'exp2'", "EXP takes 1", "IN_1 'extra'"});
  }
}

TEST(PointwiseInfer, BinarySelectTakesAMask) {
  Graph g;
  g.set_io_data_type(DataType::Float);
  Tensor a = make_input(g, "a", {4, 4}, DataType::Float);
  Tensor b = make_input(g, "b", {4, 4}, DataType::Float);
  Tensor mask = make_input(g, "mask", {4, 1}, DataType::Boolean);
  PointwiseAttrs p;
  p.mode = PointwiseMode::BinarySelect;
  Tensor y = g.pointwise(a, b, mask, p);
  y->set_output(true);
  ASSERT_TRUE(g.validate().is_ok()) << g.validate().to_string();
  EXPECT_EQ(y->dim, (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(y->data_type, DataType::Float);
}

TEST(PointwiseInfer, ComparisonOutputKeepsDefaultType) {
  Graph g;
  g.set_io_data_type(DataType::Half);
  Tensor a = make_input(g, "a", {4, 4});
  Tensor b = make_input(g, "b", {4, 4});
  Tensor y = g.binary(PointwiseMode::CmpGt, a, b);
  y->set_output(true);
  ASSERT_TRUE(g.validate().is_ok());
  EXPECT_EQ(y->data_type, DataType::Half);
}

TEST(PointwiseInfer, ReluClipOrder) {
  Graph g;
  Tensor a = make_input(g, "a", {4, 4});
  PointwiseAttrs p;
  p.mode = PointwiseMode::Relu;
  p.relu_lower_clip = 2.0;
  p.relu_upper_clip = 1.0;
  g.pointwise(a, p, {"clip"})->set_output(true);
  expect_invalid(g, {"pointwise 'clip'", "relu_lower_clip 2", "relu_upper_clip 1"});
}

}  // namespace
}  // namespace dnngraph::ir
