// The reference engine on hostile values and geometries: the relu family exact at +-inf (no
// 0 * inf = NaN), and a convolution whose padding and stride dwarf its input computed in
// memory that follows the work, not the padding.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "dnngraph/dnngraph.hpp"
#include "engines/reference/kernel.hpp"

namespace dnngraph {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double relu(double x, std::optional<double> lower = {}, std::optional<double> upper = {},
            std::optional<double> slope = {}) {
  ir::PointwiseAttrs a;
  a.mode = PointwiseMode::Relu;
  a.relu_lower_clip = lower;
  a.relu_upper_clip = upper;
  a.relu_lower_clip_slope = slope;
  return reference::pointwise_value(a, x, 0.0, 0.0);
}

TEST(ReferenceHostileValues, ReluIsExactAtInfinity) {
  EXPECT_EQ(relu(-kInf), 0.0);
  EXPECT_EQ(relu(kInf), kInf);
  EXPECT_EQ(relu(-1e308), 0.0);
  EXPECT_TRUE(std::isnan(relu(std::nan(""))));  // NaN stays NaN, as torch.relu
  // Clipped: [lower, upper].
  EXPECT_EQ(relu(-kInf, -1.0, 6.0), -1.0);
  EXPECT_EQ(relu(kInf, -1.0, 6.0), 6.0);
  // Leaky (a slope below the clip): -inf stays -inf, +inf stays +inf.
  EXPECT_EQ(relu(-kInf, 0.0, {}, 0.01), -kInf);
  EXPECT_EQ(relu(kInf, 0.0, {}, 0.01), kInf);
  EXPECT_DOUBLE_EQ(relu(-2.0, 0.0, {}, 0.01), -0.02);
  // An infinite lower clip with a slope: x at the clip is the clip.
  EXPECT_EQ(relu(-kInf, -kInf, {}, 0.5), -kInf);
}

TEST(ReferenceHostileValues, ReluBackwardIsFiniteAtInfinity) {
  ir::PointwiseAttrs a;
  a.mode = PointwiseMode::ReluBwd;
  EXPECT_EQ(reference::pointwise_value(a, 3.0, -kInf, 0.0), 0.0);
  EXPECT_EQ(reference::pointwise_value(a, 3.0, kInf, 0.0), 3.0);
}

// A 1x1 convolution of an 8x8 image with padding 7000 and stride 7000 (a 3x3 output): the old
// zero-padded copy was 14008^2 doubles (1.5 GiB); now it holds only the 9 positions read.
TEST(ReferenceHostileValues, HugePaddingAndStrideConvUsesLittleMemory) {
  Graph g;
  g.set_name("sparse").set_io_data_type(DataType::Float).set_compute_data_type(DataType::Float);
  auto x =
      g.tensor(ir::TensorAttrs().set_name("X").set_dim({1, 1, 8, 8}).set_stride({64, 64, 8, 1}));
  auto w = g.tensor(ir::TensorAttrs().set_name("W").set_dim({1, 1, 1, 1}).set_stride({1, 1, 1, 1}));
  auto y =
      g.conv_fprop(x, w, ir::ConvFpropAttrs().set_padding({7000, 7000}).set_stride({7000, 7000}));
  y->set_output(true).set_name("Y");
  ASSERT_TRUE(g.validate().is_ok());
  ASSERT_EQ(y->dim, (std::vector<int64_t>{1, 1, 3, 3}));
  // The graph's estimate of the working memory (checked against a 64 KiB limit) is small.
  setenv("DNNGRAPH_REFERENCE_MAX_BYTES", "65536", 1);
  HandlePtr h = Handle::create(Device::cpu()).value();
  Status s = g.build(h);
  unsetenv("DNNGRAPH_REFERENCE_MAX_BYTES");
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  std::vector<float> xv(64), wv{2.5f}, yv(9, std::nanf(""));
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = 0.25f * static_cast<float>(i) - 3.0f;
  VariantPack vp{{x->uid, xv.data()}, {w->uid, wv.data()}, {y->uid, yv.data()}};
  auto ws = g.get_workspace_size();
  ASSERT_TRUE(ws.is_ok());
  std::vector<unsigned char> workspace(static_cast<size_t>(ws.value()) + 1);
  ASSERT_TRUE(g.execute(*h, vp, workspace.data(), ws.value()).is_ok());
  // Output (i, j) reads padded position (7000 i, 7000 j): input (7000 i - 7000, ...), which is
  // inside the image only for i = j = 1, at (0, 0).
  for (size_t i = 0; i < 9; ++i) EXPECT_EQ(yv[i], i == 4 ? 2.5f * xv[0] : 0.0f) << i;
}

}  // namespace
}  // namespace dnngraph
