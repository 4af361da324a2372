// Reference convolution kernels (fprop, dgrad, wgrad) against hand-worked values and a naive
// fp64 loop written here: NCHW/NHWC, fp32/bf16/fp16, groups, depthwise, 1-D/2-D/3-D,
// stride, dilation, asymmetric padding and true convolution.
#include <gtest/gtest.h>

#include <array>

#include "common/ref_harness.hpp"

namespace {

using dnngraph::DataType;
using dnngraph::ir::ConvAttrs;
using dnngraph::ir::Node;
using dnngraph::ir::OpKind;
using dnngraph::ir::Role;

struct Problem {
  int64_t N, C, K, G;
  std::vector<int64_t> in, ker, pre, post, str, dil;
  bool true_conv = false;
  bool channels_last = false;
  DataType io = DataType::Float;

  std::vector<int64_t> out() const {
    std::vector<int64_t> o;
    for (size_t i = 0; i < in.size(); ++i)
      o.push_back((in[i] + pre[i] + post[i] - dil[i] * (ker[i] - 1) - 1) / str[i] + 1);
    return o;
  }
  std::vector<int64_t> xdims() const { return cat({N, C}, in); }
  std::vector<int64_t> wdims() const { return cat({K, C / G}, ker); }
  std::vector<int64_t> ydims() const { return cat({N, K}, out()); }
  static std::vector<int64_t> cat(std::vector<int64_t> a, const std::vector<int64_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }
  std::vector<int64_t> strides(const std::vector<int64_t>& d) const {
    return channels_last ? ref_test::nhwc_strides(d) : ref_test::packed(d);
  }
  ConvAttrs attrs() const {
    ConvAttrs a;
    a.set_pre_padding(pre).set_post_padding(post).set_stride(str).set_dilation(dil);
    a.cross_correlation = !true_conv;
    return a;
  }
};

// Calls f(x index, w index, y index) for every multiply-accumulate of the convolution, by
// the definition: y[n,k,o] += x[n, g*Cg + c, o*s + r*d - pre] * w[k, c, r (reversed for a
// true convolution)], skipping taps that fall in the padding.
template <class F>
void for_each_mac(const Problem& p, F&& f) {
  const auto xd = p.xdims(), wd = p.wdims(), yd = p.ydims(), od = p.out();
  const size_t ns = p.in.size();
  const int64_t Cg = p.C / p.G, Kg = p.K / p.G;
  int64_t ovol = 1, kvol = 1;
  for (size_t i = 0; i < ns; ++i) ovol *= od[i], kvol *= p.ker[i];
  // Spatial coordinates of every output position and filter tap, computed once.
  std::vector<std::vector<int64_t>> outs, taps;
  for (int64_t oi = 0; oi < ovol; ++oi) outs.push_back(ref_test::unravel(oi, od));
  for (int64_t ri = 0; ri < kvol; ++ri) taps.push_back(ref_test::unravel(ri, p.ker));
  std::vector<int64_t> xi(ns + 2), wi(ns + 2), yi(ns + 2);
  for (int64_t n = 0; n < p.N; ++n)
    for (int64_t k = 0; k < p.K; ++k)
      for (int64_t c = 0; c < Cg; ++c)
        for (const auto& o : outs)
          for (const auto& r : taps) {
            xi[0] = n, xi[1] = (k / Kg) * Cg + c, wi[0] = k, wi[1] = c, yi[0] = n, yi[1] = k;
            bool inside = true;
            for (size_t j = 0; j < ns; ++j) {
              const int64_t pos = o[j] * p.str[j] + r[j] * p.dil[j] - p.pre[j];
              inside = inside && pos >= 0 && pos < p.in[j];
              xi[j + 2] = pos;
              wi[j + 2] = p.true_conv ? p.ker[j] - 1 - r[j] : r[j];
              yi[j + 2] = o[j];
            }
            if (inside)
              f(ref_test::ravel(xi, xd), ref_test::ravel(wi, wd), ref_test::ravel(yi, yd));
          }
}

struct Tensors {
  dnngraph::ir::Tensor x, w, y;
};
Tensors make(const Problem& p, DataType out_type) {
  (void)out_type;
  return {ref_test::make_tensor("X", p.xdims(), p.io, p.strides(p.xdims())),
          ref_test::make_tensor("W", p.wdims(), p.io, p.strides(p.wdims())),
          ref_test::make_tensor("Y", p.ydims(), p.io, p.strides(p.ydims()))};
}

Node conv_node(OpKind kind, const Problem& p, const Tensors& t) {
  Node n;
  n.name = "conv";
  n.compute_data_type = DataType::Float;
  const ConvAttrs a = p.attrs();
  switch (kind) {
    case OpKind::ConvFprop:
      n.attrs = dnngraph::ir::ConvFpropAttrs{a};
      n.inputs = {{Role::X, t.x}, {Role::W, t.w}};
      n.outputs = {{Role::Y, t.y}};
      break;
    case OpKind::ConvDgrad:
      n.attrs = dnngraph::ir::ConvDgradAttrs{a};
      n.inputs = {{Role::DY, t.y}, {Role::W, t.w}};
      n.outputs = {{Role::DX, t.x}};
      break;
    default:
      n.attrs = dnngraph::ir::ConvWgradAttrs{a};
      n.inputs = {{Role::DY, t.y}, {Role::X, t.x}};
      n.outputs = {{Role::DW, t.w}};
      break;
  }
  return n;
}

// One direction of the convolution on random inputs `in0`, `in1` against the naive loops:
// out[o] += in0[i0] * in1[i1] for every multiply-accumulate, where pick(xi, wi, yi) returns
// {i0, i1, o}.
template <class Pick>
void check_direction(const Problem& p, const Tensors& t, OpKind kind,
                     const dnngraph::ir::Tensor& in0, const dnngraph::ir::Tensor& in1,
                     const dnngraph::ir::Tensor& out, ref_test::Rng& rng, Pick pick) {
  const Node n = conv_node(kind, p, t);
  ASSERT_OK(ref_test::validate_node(n));
  ref_test::Buffers b;
  const auto v0 = b.random(in0, rng), v1 = b.random(in1, rng);
  ASSERT_OK(b.run_kernel(n));
  std::vector<double> want(static_cast<size_t>(out->volume()), 0.0);
  for_each_mac(p, [&](int64_t xi, int64_t wi, int64_t yi) {
    const auto [i0, i1, o] = pick(xi, wi, yi);
    want[static_cast<size_t>(o)] += v0[static_cast<size_t>(i0)] * v1[static_cast<size_t>(i1)];
  });
  EXPECT_TRUE(ref_test::all_close(b.values(out), want, ref_test::tol(p.io)));
}

// Runs all three directions on random inputs and compares with the naive loops.
void check_problem(const Problem& p, uint64_t seed) {
  ref_test::Rng rng(seed);
  const Tensors t = make(p, p.io);
  using Idx = std::array<int64_t, 3>;
  {
    SCOPED_TRACE("fprop");  // Y += X * W
    check_direction(p, t, OpKind::ConvFprop, t.x, t.w, t.y, rng,
                    [](int64_t xi, int64_t wi, int64_t yi) {
                      return Idx{xi, wi, yi};
                    });
  }
  {
    SCOPED_TRACE("dgrad");  // DX += DY * W
    check_direction(p, t, OpKind::ConvDgrad, t.y, t.w, t.x, rng,
                    [](int64_t xi, int64_t wi, int64_t yi) {
                      return Idx{yi, wi, xi};
                    });
  }
  {
    SCOPED_TRACE("wgrad");  // DW += DY * X
    check_direction(p, t, OpKind::ConvWgrad, t.y, t.x, t.w, rng,
                    [](int64_t xi, int64_t wi, int64_t yi) {
                      return Idx{yi, xi, wi};
                    });
  }
}

TEST(RefConv, HandWorked2D) {
  // X = 1..9 as 3x3, W = [[1, 0], [0, -1]]: each output is x[i][j] - x[i+1][j+1] = -4.
  Problem p{1, 1, 1, 1, {3, 3}, {2, 2}, {0, 0}, {0, 0}, {1, 1}, {1, 1}};
  Tensors t = make(p, DataType::Float);
  ref_test::Buffers b;
  b.set(t.x, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  b.set(t.w, {1, 0, 0, -1});
  ASSERT_OK(b.run_kernel(conv_node(OpKind::ConvFprop, p, t)));
  EXPECT_EQ(b.values(t.y), (std::vector<double>{-4, -4, -4, -4}));
  // A true convolution reads the filter reversed: x[i+1][j+1] - x[i][j] = 4.
  p.true_conv = true;
  b.add(t.y).poison();
  ASSERT_OK(b.run_kernel(conv_node(OpKind::ConvFprop, p, t)));
  EXPECT_EQ(b.values(t.y), (std::vector<double>{4, 4, 4, 4}));
}

TEST(RefConv, HandWorkedPaddingAndStride) {
  // 3x3 ones filter over 1..9 with padding 1 and stride 2: the four corners' neighborhoods.
  Problem p{1, 1, 1, 1, {3, 3}, {3, 3}, {1, 1}, {1, 1}, {2, 2}, {1, 1}};
  Tensors t = make(p, DataType::Float);
  ref_test::Buffers b;
  b.set(t.x, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  b.set(t.w, std::vector<double>(9, 1.0));
  ASSERT_OK(b.run_kernel(conv_node(OpKind::ConvFprop, p, t)));
  EXPECT_EQ(b.values(t.y),
            (std::vector<double>{1 + 2 + 4 + 5, 2 + 3 + 5 + 6, 4 + 5 + 7 + 8, 5 + 6 + 8 + 9}));
  // dgrad of all-ones DY: each input counts the windows that cover it.
  ref_test::Buffers d;
  d.set(t.y, {1, 1, 1, 1});
  d.set(t.w, std::vector<double>(9, 1.0));
  ASSERT_OK(d.run_kernel(conv_node(OpKind::ConvDgrad, p, t)));
  EXPECT_EQ(d.values(t.x), (std::vector<double>{1, 2, 1, 2, 4, 2, 1, 2, 1}));
}

TEST(RefConv, Nchw2DFp32) {
  check_problem({2, 4, 6, 1, {7, 6}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}}, 1);
}

TEST(RefConv, Nhwc2DStrideDilationAsymmetricPadding) {
  Problem p{2, 3, 5, 1, {9, 8}, {3, 2}, {1, 0}, {0, 2}, {2, 1}, {2, 3}};
  p.channels_last = true;
  check_problem(p, 2);
}

TEST(RefConv, GroupsBf16Nhwc) {
  Problem p{2, 6, 4, 2, {5, 6}, {3, 3}, {1, 1}, {1, 1}, {1, 2}, {1, 1}};
  p.channels_last = true;
  p.io = DataType::BFloat16;
  check_problem(p, 3);
}

TEST(RefConv, DepthwiseFp16) {
  check_problem(
      {1, 4, 4, 4, {6, 7}, {3, 3}, {2, 1}, {0, 1}, {1, 1}, {1, 1}, false, false, DataType::Half},
      4);
}

TEST(RefConv, ManyOutputChannelsAndTails) {
  // K = 19 spans three 8-channel blocks; 5 output columns leave a partial pixel tile.
  check_problem({1, 3, 19, 1, {4, 5}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, {1, 1}}, 5);
}

TEST(RefConv, ThreeDNdhwc) {
  Problem p{1, 3, 5, 1, {5, 4, 6}, {3, 2, 3}, {1, 0, 1}, {1, 1, 0}, {2, 1, 1}, {1, 2, 1}};
  p.channels_last = true;
  check_problem(p, 6);
}

TEST(RefConv, ThreeDGroupedTrueConvolution) {
  Problem p{2, 4, 6, 2, {4, 3, 5}, {2, 2, 3}, {0, 1, 1}, {1, 0, 1}, {1, 1, 2}, {1, 1, 1}};
  p.true_conv = true;
  check_problem(p, 7);
}

TEST(RefConv, OneD) { check_problem({2, 3, 4, 1, {11}, {3}, {2}, {1}, {2}, {2}}, 8); }

TEST(RefConv, TrueConvolution2DAsymmetricFilter) {
  Problem p{1, 2, 3, 1, {6, 5}, {3, 2}, {1, 1}, {1, 0}, {1, 1}, {1, 1}};
  p.true_conv = true;
  p.channels_last = true;
  check_problem(p, 9);
}

// Large enough (> 2^18 multiply-adds) that the kernels run multi-threaded.
TEST(RefConv, ThreadedSizeNhwc) {
  Problem p{2, 16, 16, 1, {8, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}};
  p.channels_last = true;
  check_problem(p, 11);
}

TEST(RefConv, CheckNamesTheBadTensor) {
  Problem p{1, 4, 6, 1, {5, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}};
  Tensors t = make(p, DataType::Float);
  t.y->set_dim({1, 6, 4, 5}).set_stride(ref_test::packed({1, 6, 4, 5}));
  dnngraph::Status s = ref_test::validate_node(conv_node(OpKind::ConvFprop, p, t));
  EXPECT_EQ(s.code(), dnngraph::ErrorCode::InvalidGraph);
  EXPECT_NE(s.message().find("'Y'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("produces [1,6,5,5]"), std::string::npos) << s.message();
  // 4 channels with a 3-channel filter: no group count fits.
  Tensors t2 = make(p, DataType::Float);
  t2.w->set_dim({6, 3, 3, 3}).set_stride(ref_test::packed({6, 3, 3, 3}));
  s = ref_test::validate_node(conv_node(OpKind::ConvFprop, p, t2));
  EXPECT_EQ(s.code(), dnngraph::ErrorCode::InvalidGraph);
  EXPECT_NE(s.message().find("'W'"), std::string::npos) << s.message();
}

// conv -> bias -> relu as a graph: the conv output is a virtual fp32 tensor in the
// workspace; dims are inferred by validate().
TEST(RefConv, GraphConvBiasRelu) {
  Problem p{2, 3, 4, 1, {6, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}};
  p.channels_last = true;
  dnngraph::Graph g;
  g.set_io_data_type(DataType::Float).set_intermediate_data_type(DataType::Float);
  auto x = g.tensor(dnngraph::ir::TensorAttrs().set_name("x").set_dim(p.xdims()).set_stride(
      p.strides(p.xdims())));
  auto w = g.tensor(dnngraph::ir::TensorAttrs().set_name("w").set_dim(p.wdims()).set_stride(
      p.strides(p.wdims())));
  auto bias = g.tensor(
      dnngraph::ir::TensorAttrs().set_name("bias").set_dim({1, 4, 1, 1}).set_stride({4, 1, 1, 1}));
  dnngraph::ir::ConvFpropAttrs a{p.attrs()};
  auto y = g.relu(g.bias(g.conv_fprop(x, w, a), bias));
  y->set_output(true).set_name("y");
  ASSERT_OK(g.validate());
  ref_test::Rng rng(10);
  ref_test::Buffers b;
  const auto xv = b.random(x, rng), wv = b.random(w, rng), bv = b.random(bias, rng);
  ASSERT_OK(b.run_graph(g));
  std::vector<double> conv(static_cast<size_t>(y->volume()), 0.0);
  for_each_mac(p, [&](int64_t xi, int64_t wi, int64_t yi) {
    conv[static_cast<size_t>(yi)] += xv[static_cast<size_t>(xi)] * wv[static_cast<size_t>(wi)];
  });
  std::vector<double> want(conv.size());
  for (size_t i = 0; i < conv.size(); ++i) {
    const int64_t k = ref_test::unravel(static_cast<int64_t>(i), p.ydims())[1];
    want[i] = std::max(0.0, conv[i] + bv[static_cast<size_t>(k)]);
  }
  EXPECT_TRUE(ref_test::all_close(b.values(y), want, ref_test::tol(DataType::Float)));
}

}  // namespace

// Padding or stride much larger than the filter: the padded copy is laid out by (output
// position, tap) along such dims. All three directions against the naive loops.
TEST(RefConv, HugePaddingAndStrideReadOnlyTheTaps) {
  check_problem({1, 2, 3, 1, {8, 8}, {1, 1}, {700, 700}, {700, 700}, {700, 700}, {1, 1}}, 21);
  // 3x3 dilated filter, stride 9, asymmetric padding; one dim compact, the other not.
  check_problem({2, 3, 4, 1, {10, 9}, {3, 3}, {20, 1}, {13, 1}, {9, 1}, {2, 1}}, 22);
}

TEST(RefConv, CompactLayoutWithOverlappingWindows) {
  // Windows of span 11 every 3 positions overlap, yet out * ker (20) < 40: one input position
  // is read by several (output, tap) pairs, which dgrad must add up.
  check_problem({1, 2, 2, 1, {40, 6}, {2, 2}, {0, 1}, {0, 1}, {3, 1}, {10, 1}}, 23);
}

TEST(RefConv, CompactLayoutThreeDGroupedTrueConvNhwc) {
  Problem p{2, 4, 6, 2, {5, 4, 6}, {2, 1, 2}, {30, 0, 9}, {29, 0, 8}, {25, 1, 7}, {1, 1, 3}};
  p.true_conv = true;
  p.channels_last = true;
  check_problem(p, 24);
}

TEST(RefConv, CompactLayoutOneDBf16) {
  Problem p{2, 3, 5, 1, {9}, {2}, {100}, {57}, {31}, {4}};
  p.io = DataType::BFloat16;
  check_problem(p, 25);
}
