// Convolution (fprop/dgrad/wgrad, NCHW and NHWC, fused bias+relu) and matmul (2-D, batched,
// broadcast batch, epilogues) on cuDNN against the reference engine.
#include "dnngraph/partition.hpp"
#include "harness.hpp"

namespace dnngraph::gpu_test {
namespace {

// fp32 convolutions and matmuls may run on TF32 tensor cores: ~1e-3 relative.
constexpr double kFp32Scale = 300;

TEST(GpuConv, FpropBiasReluBothLayouts) {
  DNNGRAPH_REQUIRE_GPU();
  for (DataType t : {DataType::Float, DataType::BFloat16, DataType::Half})
    for (bool cl : {false, true}) {
      SCOPED_TRACE(::testing::Message() << data_type_name(t) << (cl ? " NHWC" : " NCHW"));
      expect_matches_reference(
          [&](Graph& g) {
            g.set_io_data_type(t);
            auto x = input(g, "X", {2, 16, 10, 12}, t, cl);
            auto w = input(g, "W", {32, 16, 3, 3}, t, cl);
            auto b = input(g, "B", {1, 32, 1, 1}, t, cl);
            ir::ConvFpropAttrs a;
            a.set_padding({1, 1}).set_stride({1, 1}).set_dilation({1, 1});
            auto y = g.relu(g.bias(g.conv_fprop(x, w, a), b));
            finish(y, "Y", {2, 32, 10, 12}, t, cl);
          },
          {.tol_scale = t == DataType::Float ? kFp32Scale : 1.0, .min_abs = 2e-2});
    }
}

TEST(GpuConv, StridedFpropDgradWgrad) {
  DNNGRAPH_REQUIRE_GPU();
  for (bool cl : {false, true}) {
    SCOPED_TRACE(cl ? "NHWC" : "NCHW");
    ir::ConvFpropAttrs f;
    f.set_padding({1, 1}).set_stride({2, 2}).set_dilation({1, 1});
    expect_matches_reference(
        [&](Graph& g) {
          g.set_io_data_type(DataType::Half);
          auto y = g.conv_fprop(input(g, "X", {2, 8, 9, 9}, DataType::Half, cl),
                                input(g, "W", {16, 8, 3, 3}, DataType::Half, cl), f);
          finish(y, "Y", {2, 16, 5, 5}, DataType::Half, cl);
        },
        {.min_abs = 2e-2});
    ir::ConvDgradAttrs d;
    d.set_padding({1, 1}).set_stride({2, 2}).set_dilation({1, 1});
    expect_matches_reference(
        [&](Graph& g) {
          g.set_io_data_type(DataType::Half);
          auto dx = g.conv_dgrad(input(g, "DY", {2, 16, 5, 5}, DataType::Half, cl),
                                 input(g, "W", {16, 8, 3, 3}, DataType::Half, cl), d);
          finish(dx, "DX", {2, 8, 9, 9}, DataType::Half, cl);
        },
        {.min_abs = 2e-2});
    ir::ConvWgradAttrs w;
    w.set_padding({1, 1}).set_stride({2, 2}).set_dilation({1, 1});
    expect_matches_reference(
        [&](Graph& g) {
          g.set_io_data_type(DataType::Half);
          auto dw = g.conv_wgrad(input(g, "DY", {2, 16, 5, 5}, DataType::Half, cl),
                                 input(g, "X", {2, 8, 9, 9}, DataType::Half, cl), w);
          finish(dw, "DW", {16, 8, 3, 3}, DataType::Half, cl);
        },
        {.tol_scale = 2, .min_abs = 5e-2});
  }
}

TEST(GpuMatmul, RanksAndTypes) {
  DNNGRAPH_REQUIRE_GPU();
  struct Case {
    std::vector<int64_t> a, b, c;
  };
  const Case cases[] = {{{32, 48}, {48, 40}, {32, 40}},
                        {{3, 32, 64}, {3, 64, 24}, {3, 32, 24}},
                        {{4, 32, 64}, {1, 64, 16}, {4, 32, 16}},
                        {{2, 3, 16, 32}, {2, 3, 32, 8}, {2, 3, 16, 8}}};
  for (const auto& c : cases)
    for (DataType t : {DataType::Float, DataType::BFloat16, DataType::Half}) {
      SCOPED_TRACE(::testing::Message() << "rank " << c.a.size() << " " << data_type_name(t));
      expect_matches_reference(
          [&](Graph& g) {
            g.set_io_data_type(t);
            auto y = g.matmul(input(g, "A", c.a, t, false), input(g, "B", c.b, t, false));
            finish(y, "C", c.c, t, false);
          },
          {.tol_scale = t == DataType::Float ? kFp32Scale : 1.0, .min_abs = 2e-2});
    }
}

TEST(GpuMatmul, ScaleBiasGeluAmaxEpilogue) {
  DNNGRAPH_REQUIRE_GPU();
  expect_matches_reference(
      [&](Graph& g) {
        const DataType t = DataType::BFloat16;
        g.set_io_data_type(t);
        auto a = input(g, "A", {2, 64, 128}, t, false);
        auto b = input(g, "B", {2, 128, 64}, t, false);
        auto bias = input(g, "bias", {1, 1, 64}, t, false);
        auto alpha = g.scalar(ir::Scalar::of_float(0.5), "alpha");
        auto y = g.gelu(g.bias(g.scale(g.matmul(a, b), alpha), bias));
        finish(y, "Y", {2, 64, 64}, t, false);
        auto amax = g.reduction(y, {ReductionMode::Amax});
        finish(amax, "AMAX", {1, 1, 1}, DataType::Float, false);
      },
      {.tol_scale = 2, .min_abs = 3e-2});
}

// matmul -> GELU -> matmul (a transformer MLP): cuDNN built such graphs and returned wrong values,
// so the engine refuses them, naming the op; partition() splits one into pieces it builds.
TEST(GpuMatmul, ChainedMatmulsAreRefusedAndSplit) {
  DNNGRAPH_REQUIRE_GPU();
  auto h = Handle::create(Device::cuda(0)).value();
  const DataType t = DataType::BFloat16;
  Graph g;
  g.set_name("mlp");
  g.set_io_data_type(t);
  auto x = input(g, "X", {1, 256, 64}, t, false);
  auto w1 = input(g, "W1", {1, 64, 128}, t, false);
  auto w2 = input(g, "W2", {1, 128, 64}, t, false);
  auto act = g.gelu(g.matmul(x, w1));
  act->set_data_type(t);  // where partition() cuts, the GELU's output is written in bf16
  finish(g.matmul(act, w2), "Y", {1, 256, 64}, t, false);
  ASSERT_TRUE(g.validate().is_ok());
  Status s = g.build(h);
  EXPECT_EQ(s.code(), ErrorCode::NotSupported) << s.to_string();
  EXPECT_NE(s.message().find("reads the result of another matmul"), std::string::npos)
      << s.message();
  auto parts = partition(g, h);
  ASSERT_TRUE(parts) << parts.status().to_string();
  ASSERT_GE(parts->size(), 2u);
  for (const Partition& p : *parts) EXPECT_TRUE(p.supported) << p.reason;
}

}  // namespace
}  // namespace dnngraph::gpu_test
