// Normalization inference and checks: layernorm, rmsnorm, batchnorm and their backwards.
#include <gtest/gtest.h>

#include "ir/test_util.hpp"

namespace dnngraph::ir {
namespace {

using testing::expect_invalid;
using testing::make_input;

TEST(NormInfer, LayernormTraining) {
  Graph g;
  g.set_io_data_type(DataType::BFloat16);
  Tensor x = make_input(g, "x", {6, 16, 1, 1}, DataType::BFloat16);
  Tensor scale = make_input(g, "scale", {1, 16, 1, 1}, DataType::Float);
  Tensor bias = make_input(g, "bias", {1, 16, 1, 1}, DataType::Float);
  Tensor eps = g.scalar(Scalar::of_float(1e-5), "eps");
  auto [y, mean, inv] = g.layernorm(x, scale, bias, eps, NormForwardPhase::Training, {"ln"});
  y->set_output(true);
  mean->set_output(true);
  inv->set_output(true);
  ASSERT_TRUE(g.validate().is_ok()) << g.validate().to_string();
  EXPECT_EQ(y->dim, x->dim);
  EXPECT_EQ(y->data_type, DataType::BFloat16);
  EXPECT_EQ(mean->dim, (std::vector<int64_t>{6, 1, 1, 1}));
  EXPECT_EQ(inv->dim, (std::vector<int64_t>{6, 1, 1, 1}));
  EXPECT_EQ(mean->data_type, DataType::Float);
  EXPECT_EQ(inv->data_type, DataType::Float);
}

TEST(NormInfer, RmsnormInferenceWithoutBias) {
  Graph g;
  g.set_io_data_type(DataType::Half);
  Tensor x = make_input(g, "x", {4, 3, 8});
  Tensor scale = make_input(g, "scale", {1, 3, 8});
  Tensor eps = g.scalar(Scalar::of_float(1e-6), "eps");
  auto [y, inv] = g.rmsnorm(x, scale, nullptr, eps, NormForwardPhase::Inference, {"rms"});
  y->set_output(true);
  EXPECT_EQ(inv, nullptr);
  ASSERT_TRUE(g.validate().is_ok()) << g.validate().to_string();
  EXPECT_EQ(y->dim, (std::vector<int64_t>{4, 3, 8}));
  EXPECT_EQ(y->stride, (std::vector<int64_t>{24, 8, 1}));
}

TEST(NormInfer, BatchnormTrainingNhwcWithRunningStats) {
  Graph g;
  g.set_io_data_type(DataType::Half);
  const int64_t n = 2, c = 5, h = 3, w = 4;
  Tensor x = make_input(g, "x", {n, c, h, w}, DataType::Half, {h * w * c, 1, w * c, c});
  auto param = [&](const char* name) { return make_input(g, name, {1, c, 1, 1}, DataType::Float); };
  Tensor scale = param("scale"), bias = param("bias"), rm = param("rm"), rv = param("rv");
  Tensor eps = g.scalar(Scalar::of_float(1e-5), "eps");
  Tensor mom = g.scalar(Scalar::of_float(0.1), "momentum");
  auto out = g.batchnorm(x, scale, bias, rm, rv, eps, mom, {"bn"});
  for (auto& t : out) t->set_output(true);
  ASSERT_TRUE(g.validate().is_ok()) << g.validate().to_string();
  EXPECT_EQ(out[0]->stride, x->stride);  // Y follows NHWC
  for (int i = 1; i < 5; ++i) {
    EXPECT_EQ(out[i]->dim, (std::vector<int64_t>{1, c, 1, 1})) << i;
    EXPECT_EQ(out[i]->data_type, DataType::Float) << i;
  }
}

TEST(NormInfer, BatchnormInference) {
  Graph g;
  g.set_io_data_type(DataType::Float);
  Tensor x = make_input(g, "x", {2, 5, 3, 3}, DataType::Float);
  auto param = [&](const char* name) { return make_input(g, name, {1, 5, 1, 1}, DataType::Float); };
  Tensor y = g.batchnorm_inference(x, param("mean"), param("inv"), param("scale"), param("bias"));
  y->set_output(true);
  ASSERT_TRUE(g.validate().is_ok()) << g.validate().to_string();
  EXPECT_EQ(y->dim, x->dim);

  Graph g2;
  Tensor x2 = make_input(g2, "x", {2, 5, 3, 3});
  Tensor good = make_input(g2, "good", {1, 5, 1, 1});
  Tensor bad = make_input(g2, "per_row_mean", {2, 1, 1, 1});
  g2.batchnorm_inference(x2, bad, good, good, good, {"bni"})->set_output(true);
  expect_invalid(g2, {"norm_forward 'bni'", "MEAN 'per_row_mean'", "[2,1,1,1]", "[1,5,1,1]"});
}

TEST(NormInfer, EpsilonMustBePassByValue) {
  Graph g;
  Tensor x = make_input(g, "x", {4, 8});
  Tensor scale = make_input(g, "scale", {1, 8});
  Tensor bias = make_input(g, "bias", {1, 8});
  Tensor eps = make_input(g, "eps_device", {1, 1});  // a device tensor
  auto out = g.layernorm(x, scale, bias, eps, NormForwardPhase::Inference, {"ln"});
  out[0]->set_output(true);
  expect_invalid(g, {"norm_forward 'ln'", "EPSILON 'eps_device'", "pass-by-value"});
}

TEST(NormInfer, NonScalarEpsilon) {
  Graph g;
  Tensor x = make_input(g, "x", {4, 8});
  Tensor scale = make_input(g, "scale", {1, 8});
  Tensor bias = make_input(g, "bias", {1, 8});
  TensorAttrs e;
  e.set_name("eps_vec").set_dim({1, 8}).set_data_type(DataType::Float).set_is_pass_by_value(true);
  Tensor eps = g.tensor(e);
  g.layernorm(x, scale, bias, eps, NormForwardPhase::Inference, {"ln"})[0]->set_output(true);
  expect_invalid(g, {"'eps_vec'", "'ln'", "one element", "[1,8]"});
}

TEST(NormInfer, ScaleShapeChecked) {
  Graph g;
  Tensor x = make_input(g, "x", {4, 8});
  Tensor scale = make_input(g, "gamma", {8});
  Tensor bias = make_input(g, "beta", {1, 8});
  Tensor eps = g.scalar(Scalar::of_float(1e-5));
  g.layernorm(x, scale, bias, eps, NormForwardPhase::Inference, {"ln"})[0]->set_output(true);
  expect_invalid(g, {"norm_forward 'ln'", "SCALE 'gamma'", "[8]", "[1,8]"});
}

TEST(NormInfer, RunningStatsNeedMomentum) {
  Graph g;
  Tensor x = make_input(g, "x", {2, 3, 4, 4});
  auto param = [&](const char* name) { return make_input(g, name, {1, 3, 1, 1}); };
  Tensor eps = g.scalar(Scalar::of_float(1e-5));
  auto out = g.batchnorm(x, param("s"), param("b"), param("rm"), param("rv"), eps, nullptr, {"bn"});
  for (auto& t : out) t->set_output(true);
  expect_invalid(g, {"norm_forward 'bn'", "missing input MOMENTUM"});
}

TEST(NormInfer, Backwards) {
  Graph g;
  g.set_io_data_type(DataType::Half);
  Tensor x = make_input(g, "x", {6, 16});
  Tensor dy = make_input(g, "dy", {6, 16});
  Tensor scale = make_input(g, "scale", {1, 16}, DataType::Float);
  Tensor mean = make_input(g, "mean", {6, 1}, DataType::Float);
  Tensor inv = make_input(g, "inv", {6, 1}, DataType::Float);
  auto ln = g.layernorm_backward(dy, x, scale, mean, inv, {"lnb"});
  auto rms = g.rmsnorm_backward(dy, x, scale, inv, false, {"rmsb"});
  for (auto& t : ln) t->set_output(true);
  for (int i = 0; i < 2; ++i) rms[i]->set_output(true);
  EXPECT_EQ(rms[2], nullptr);
  ASSERT_TRUE(g.validate().is_ok()) << g.validate().to_string();
  EXPECT_EQ(ln[0]->dim, x->dim);
  EXPECT_EQ(ln[1]->dim, scale->dim);
  EXPECT_EQ(ln[2]->dim, scale->dim);
  EXPECT_EQ(rms[0]->dim, x->dim);
  EXPECT_EQ(rms[1]->dim, scale->dim);

  Graph g2;
  Tensor x2 = make_input(g2, "x", {2, 3, 4, 4});
  Tensor dy2 = make_input(g2, "dy", {2, 3, 4, 4});
  Tensor per_channel = make_input(g2, "pc", {1, 3, 1, 1});
  Tensor bad_inv = make_input(g2, "inv_row", {2, 1, 1, 1});
  auto bn = g2.batchnorm_backward(dy2, x2, per_channel, per_channel, bad_inv, {"bnb"});
  for (auto& t : bn) t->set_output(true);
  expect_invalid(g2, {"norm_backward 'bnb'", "INV_VARIANCE 'inv_row'", "[1,3,1,1]"});

  Graph g3;
  Tensor x3 = make_input(g3, "x", {2, 8});
  Tensor dy3 = make_input(g3, "grad", {2, 9});
  Tensor s3 = make_input(g3, "s", {1, 8});
  Tensor st3 = make_input(g3, "st", {2, 1});
  auto r3 = g3.rmsnorm_backward(dy3, x3, s3, st3, true, {"rb"});
  for (auto& t : r3) t->set_output(true);
  expect_invalid(g3, {"norm_backward 'rb'", "DY 'grad'", "[2,9]", "[2,8]"});
}

}  // namespace
}  // namespace dnngraph::ir
