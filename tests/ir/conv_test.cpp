// Convolution inference and checks (fprop, dgrad, wgrad; 2-D and 3-D).
#include <gtest/gtest.h>

#include "ir/test_util.hpp"

namespace dnngraph::ir {
namespace {

using testing::expect_invalid;
using testing::make_input;

// out = floor((in + pre + post - dil*(f-1) - 1) / stride) + 1, written independently of the
// library as the count of valid window positions.
int64_t count_windows(int64_t in, int64_t pre, int64_t post, int64_t f, int64_t stride,
                      int64_t dil) {
  int64_t n = 0;
  for (int64_t start = -pre; start + dil * (f - 1) <= in - 1 + post; start += stride) ++n;
  return n;
}

TEST(ConvInfer, FpropNchw2d) {
  Graph g;
  g.set_io_data_type(DataType::Half);
  Tensor x = make_input(g, "x", {2, 8, 11, 13});
  Tensor w = make_input(g, "w", {6, 8, 3, 5});
  ConvFpropAttrs a;
  a.set_pre_padding({1, 2}).set_post_padding({0, 2}).set_stride({2, 3}).set_dilation({1, 2});
  Tensor y = g.conv_fprop(x, w, a, {"conv"});
  y->set_output(true);
  ASSERT_TRUE(g.validate().is_ok()) << g.validate().to_string();
  const int64_t oh = count_windows(11, 1, 0, 3, 2, 1), ow = count_windows(13, 2, 2, 5, 3, 2);
  EXPECT_EQ(y->dim, (std::vector<int64_t>{2, 6, oh, ow}));
  EXPECT_EQ(y->stride, (std::vector<int64_t>{6 * oh * ow, oh * ow, ow, 1}));
  EXPECT_EQ(y->data_type, DataType::Half);
}

TEST(ConvInfer, FpropNhwcFollowsInputLayoutAndFillsDefaults) {
  Graph g;
  g.set_io_data_type(DataType::BFloat16);
  const int64_t n = 3, c = 4, h = 7, wd = 9;
  Tensor x = make_input(g, "x", {n, c, h, wd}, DataType::BFloat16, {h * wd * c, 1, wd * c, c});
  Tensor w = make_input(g, "w", {5, c, 3, 3}, DataType::BFloat16, {9 * c, 1, 3 * c, c});
  Tensor y = g.conv_fprop(x, w, {}, {"conv"});
  g.relu(y)->set_output(true);  // y stays virtual; a graph needs an output
  ASSERT_TRUE(g.validate().is_ok());
  const int64_t oh = count_windows(h, 0, 0, 3, 1, 1), ow = count_windows(wd, 0, 0, 3, 1, 1);
  EXPECT_EQ(y->dim, (std::vector<int64_t>{n, 5, oh, ow}));
  // NHWC: channel fastest, then W, then H, then N.
  EXPECT_EQ(y->stride, (std::vector<int64_t>{oh * ow * 5, 1, ow * 5, 5}));
  EXPECT_EQ(y->data_type, DataType::Float);  // virtual: intermediate type
  const auto& attrs = g.nodes()[0].as<ConvFpropAttrs>();
  EXPECT_EQ(attrs.pre_padding, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(attrs.stride, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(attrs.dilation, (std::vector<int64_t>{1, 1}));
}

TEST(ConvInfer, Fprop3dGrouped) {
  Graph g;
  g.set_io_data_type(DataType::Float);
  Tensor x = make_input(g, "x", {1, 6, 5, 6, 7}, DataType::Float);
  Tensor w = make_input(g, "w", {9, 2, 3, 3, 3}, DataType::Float);  // 3 groups
  ConvFpropAttrs a;
  a.set_padding({1, 1, 1}).set_stride({1, 2, 2}).set_group_count(3);
  Tensor y = g.conv_fprop(x, w, a);
  y->set_output(true);
  ASSERT_TRUE(g.validate().is_ok());
  EXPECT_EQ(y->dim, (std::vector<int64_t>{1, 9, count_windows(5, 1, 1, 3, 1, 1),
                                          count_windows(6, 1, 1, 3, 2, 1),
                                          count_windows(7, 1, 1, 3, 2, 1)}));
}

TEST(ConvInfer, UserSetOutputDimsMustMatchFormula) {
  Graph g;
  Tensor x = make_input(g, "x", {1, 4, 8, 8});
  Tensor w = make_input(g, "w", {4, 4, 3, 3});
  Tensor y = g.conv_fprop(x, w, {}, {"conv"});
  y->set_output(true).set_dim({1, 4, 8, 8});  // needs padding 1 for that
  expect_invalid(g, {"conv_fprop 'conv'", "'conv::Y'", "[1,4,8,8]", "[1,4,6,6]"});
}

TEST(ConvInfer, ChannelMismatch) {
  Graph g;
  Tensor x = make_input(g, "img", {1, 6, 8, 8});
  Tensor w = make_input(g, "filt", {4, 4, 3, 3});
  g.conv_fprop(x, w, {}, {"conv"})->set_output(true);
  expect_invalid(g, {"conv_fprop 'conv'", "'img'", "'filt'", "C=6", "4"});
}

TEST(ConvInfer, GroupCountMismatch) {
  Graph g;
  Tensor x = make_input(g, "img", {1, 8, 8, 8});
  Tensor w = make_input(g, "filt", {4, 4, 3, 3});  // shapes say 2 groups
  ConvFpropAttrs a;
  a.set_group_count(4);
  g.conv_fprop(x, w, a, {"conv"})->set_output(true);
  expect_invalid(g, {"conv_fprop 'conv'", "group_count is 4", "give 2", "'img'", "'filt'"});
}

TEST(ConvInfer, KNotDivisibleByGroups) {
  Graph g;
  Tensor x = make_input(g, "img", {1, 8, 8, 8});
  Tensor w = make_input(g, "filt", {3, 4, 3, 3});  // 2 groups, K=3
  g.conv_fprop(x, w, {}, {"conv"})->set_output(true);
  expect_invalid(g, {"conv_fprop 'conv'", "'filt'", "K=3", "group count 2"});
}

TEST(ConvInfer, WrongAttributeLengthAndRank) {
  {
    Graph g;
    Tensor x = make_input(g, "img", {1, 4, 8, 8});
    Tensor w = make_input(g, "filt", {4, 4, 3, 3});
    ConvFpropAttrs a;
    a.set_stride({1, 1, 1});
    g.conv_fprop(x, w, a, {"conv"})->set_output(true);
    expect_invalid(g, {"conv_fprop 'conv'", "stride has 3 values", "2 spatial dims"});
  }
  {
    Graph g;
    Tensor x = make_input(g, "img", {4, 8, 8, 8, 8, 8});
    Tensor w = make_input(g, "filt", {4, 4, 3, 3, 3, 3});
    g.conv_fprop(x, w, {}, {"conv"})->set_output(true);
    expect_invalid(g, {"conv_fprop 'conv'", "X 'img'", "rank 3 to 5", "rank 6"});
  }
  {
    Graph g;
    Tensor x = make_input(g, "img", {1, 4, 2, 2});
    Tensor w = make_input(g, "filt", {4, 4, 3, 3});
    g.conv_fprop(x, w, {}, {"conv"})->set_output(true);
    expect_invalid(g, {"conv_fprop 'conv'", "'filt'", "larger than", "'img'"});
  }
}

TEST(ConvInfer, DgradChecksUserDims) {
  Graph g;
  g.set_io_data_type(DataType::Half);
  const int64_t c = 4, k = 6, h = 9;
  Tensor w = make_input(g, "w", {k, c, 3, 3});
  ConvDgradAttrs a;
  a.set_padding({1, 1}).set_stride({2, 2});
  const int64_t oh = count_windows(h, 1, 1, 3, 2, 1);
  // NHWC gradient: DX follows DY's layout.
  Tensor dy = make_input(g, "dy", {2, k, oh, oh}, DataType::Half, {oh * oh * k, 1, oh * k, k});
  Tensor dx = g.conv_dgrad(dy, w, a, {"dgrad"});
  dx->set_output(true).set_dim({2, c, h, h});
  ASSERT_TRUE(g.validate().is_ok()) << g.validate().to_string();
  EXPECT_EQ(dx->stride, (std::vector<int64_t>{h * h * c, 1, h * c, c}));
  EXPECT_EQ(dx->data_type, DataType::Half);
}

TEST(ConvInfer, DgradNeedsDims) {
  Graph g;
  Tensor w = make_input(g, "w", {6, 4, 3, 3});
  Tensor dy = make_input(g, "dy", {2, 6, 5, 5});
  g.conv_dgrad(dy, w, {}, {"dgrad"})->set_output(true);
  expect_invalid(g, {"conv_dgrad 'dgrad'", "'dgrad::DX'", "no dims"});
}

TEST(ConvInfer, DgradInconsistentDims) {
  Graph g;
  Tensor w = make_input(g, "w", {6, 4, 3, 3});
  Tensor dy = make_input(g, "grad_out", {2, 6, 5, 5});
  Tensor dx = g.conv_dgrad(dy, w, {}, {"dgrad"});
  dx->set_output(true).set_dim({2, 4, 9, 9});  // gives 7x7, not 5x5
  expect_invalid(g, {"conv_dgrad 'dgrad'", "'grad_out'", "[2,6,5,5]", "[2,6,7,7]"});
}

TEST(ConvInfer, WgradChecksUserDims) {
  Graph g;
  g.set_io_data_type(DataType::Float);
  Tensor x = make_input(g, "x", {2, 4, 8, 8}, DataType::Float);
  Tensor dy = make_input(g, "dy", {2, 6, 6, 6}, DataType::Float);
  Tensor dw = g.conv_wgrad(dy, x, {}, {"wgrad"});
  dw->set_output(true).set_dim({6, 4, 3, 3});
  ASSERT_TRUE(g.validate().is_ok());
  EXPECT_EQ(dw->stride, (std::vector<int64_t>{36, 9, 3, 1}));

  Graph g2;
  Tensor x2 = make_input(g2, "x", {2, 4, 8, 8});
  Tensor dy2 = make_input(g2, "dy", {2, 6, 6, 6});
  g2.conv_wgrad(dy2, x2, {}, {"wgrad"})->set_output(true);
  expect_invalid(g2, {"conv_wgrad 'wgrad'", "'wgrad::DW'", "no dims"});

  Graph g3;
  Tensor x3 = make_input(g3, "x", {2, 4, 8, 8});
  Tensor dy3 = make_input(g3, "dy", {2, 6, 6, 6});
  g3.conv_wgrad(dy3, x3, {}, {"wgrad"})->set_output(true).set_dim({6, 4, 5, 5});
  expect_invalid(g3, {"conv_wgrad 'wgrad'", "'dy'", "[2,6,4,4]"});
}

}  // namespace
}  // namespace dnngraph::ir
