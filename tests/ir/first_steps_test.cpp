// The messages a first graph meets: no outputs marked, a torch-style norm scale.
#include <gtest/gtest.h>

#include <array>

#include "test_util.hpp"

namespace dnngraph::ir {
namespace {

using testing::expect_invalid;
using testing::make_input;
using testing::named;

TEST(FirstSteps, GraphWithoutOutputsIsRefusedNamingSetOutput) {
  Graph g;
  g.set_name("mlp");
  Tensor a = make_input(g, "a", {1, 4, 8});
  Tensor b = make_input(g, "b", {1, 8, 2});
  Tensor y = g.gelu(g.matmul(a, b, {}, named("mm")), named("act"));
  expect_invalid(g, {"graph 'mlp' has no outputs", "'act::OUT_0'", "pointwise 'act'",
                     "set_output(true)", "before validate() or build()"});
  EXPECT_TRUE(y->is_virtual);  // the failed validate() left the graph as it was

  y->set_output(true);
  EXPECT_TRUE(g.validate().is_ok()) << g.validate().to_string();
  EXPECT_EQ(y->dim, (std::vector<int64_t>{1, 4, 2}));
}

TEST(FirstSteps, OneOutputAmongVirtualsIsEnough) {
  Graph g;
  Tensor a = make_input(g, "a", {1, 4, 8});
  Tensor b = make_input(g, "b", {1, 8, 2});
  Tensor mm = g.matmul(a, b, {}, named("mm"));
  g.relu(mm, named("unused_relu"));  // virtual, read by nobody
  g.gelu(mm, named("act"))->set_output(true);
  EXPECT_TRUE(g.validate().is_ok()) << g.validate().to_string();
}

// Training layernorm of x [2,8,32]; returns {Y, MEAN, INV_VARIANCE}.
std::array<Tensor, 3> layernorm_with_scale(Graph& g, std::vector<int64_t> scale_dims) {
  Tensor x = make_input(g, "x", {2, 8, 32}, DataType::Float);
  Tensor w = make_input(g, "w", scale_dims, DataType::Float);
  Tensor bias = make_input(g, "b", scale_dims, DataType::Float);
  Tensor eps = g.scalar(Scalar::of_float(1e-5), "eps");
  auto out = g.layernorm(x, w, bias, eps, NormForwardPhase::Training, {"ln"});
  for (const Tensor& t : out) t->set_output(true);
  return out;
}

TEST(FirstSteps, TorchStyleNormScaleGetsBothAcceptedShapes) {
  Graph g;
  layernorm_with_scale(g, {32});
  expect_invalid(g,
                 {"'w' has dims [32]", "expected [1,8,32]", "or [1,1,32]", "layer_norm(x, [32])"});
}

TEST(FirstSteps, OfferedPerChannelScaleIsAccepted) {
  Graph g;
  auto [y, mean, inv] = layernorm_with_scale(g, {1, 1, 32});
  ASSERT_TRUE(g.validate().is_ok()) << g.validate().to_string();
  // Normalized over the last dim only: one statistic per [n, s].
  EXPECT_EQ(mean->dim, (std::vector<int64_t>{2, 8, 1}));
  EXPECT_EQ(inv->dim, (std::vector<int64_t>{2, 8, 1}));
  EXPECT_EQ(y->dim, (std::vector<int64_t>{2, 8, 32}));
}

TEST(FirstSteps, RmsnormScaleOfRankTwoOffersOneShape) {
  Graph g;
  Tensor x = make_input(g, "x", {4, 16}, DataType::Float);
  Tensor w = make_input(g, "w", {16}, DataType::Float);
  Tensor eps = g.scalar(Scalar::of_float(1e-5), "eps");
  g.rmsnorm(x, w, nullptr, eps, NormForwardPhase::Inference, {"rms"})[0]->set_output(true);
  Status s = g.validate();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("expected [1,16]"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find(", or "), std::string::npos) << s.message();  // [1,16] only once
}

}  // namespace
}  // namespace dnngraph::ir
