// Pointwise-only and reduction-only graphs at ranks 2-5, fp32/bf16/fp16, row-major and
// channels-last: the shapes where cuDNN 9.19 silently miscomputes (2-D) or finds no engine
// (4-D) unless dnngraph canonicalizes them.
#include "harness.hpp"

namespace dnngraph::gpu_test {
namespace {

const std::vector<std::vector<int64_t>> kShapes = {
    {64, 64}, {8, 8}, {4, 33, 40}, {2, 16, 12, 10}, {2, 8, 6, 5, 7}};
const DataType kTypes[] = {DataType::Float, DataType::BFloat16, DataType::Half};

ir::Tensor input(Graph& g, const char* name, std::vector<int64_t> dim, DataType t, bool cl) {
  auto s = strides_for(dim, cl);
  return g.tensor(
      ir::TensorAttrs().set_name(name).set_dim(std::move(dim)).set_stride(s).set_data_type(t));
}

void finish(const ir::Tensor& y, const std::vector<int64_t>& dim, DataType t, bool cl) {
  y->set_output(true).set_name("Y").set_data_type(t).set_dim(dim).set_stride(strides_for(dim, cl));
}

TEST(GpuPointwise, ReluAllRanksAndTypes) {
  DNNGRAPH_REQUIRE_GPU();
  for (const auto& dim : kShapes)
    for (DataType t : kTypes)
      for (bool cl : {false, true}) {
        if (cl && dim.size() < 4) continue;
        SCOPED_TRACE(::testing::Message() << "rank " << dim.size() << " " << data_type_name(t)
                                          << (cl ? " channels-last" : " row-major"));
        expect_matches_reference([&](Graph& g) {
          g.set_io_data_type(t);
          finish(g.relu(input(g, "X", dim, t, cl)), dim, t, cl);
        });
      }
}

TEST(GpuPointwise, BiasScaleGeluChainWithBroadcast) {
  DNNGRAPH_REQUIRE_GPU();
  for (const auto& dim : kShapes)
    for (DataType t : kTypes)
      for (bool cl : {false, true}) {
        if (cl && dim.size() < 4) continue;
        SCOPED_TRACE(::testing::Message() << "rank " << dim.size() << " " << data_type_name(t)
                                          << (cl ? " channels-last" : " row-major"));
        // Bias broadcast over every dim but dim 1 (the channel dim for NCHW/NHWC).
        std::vector<int64_t> bdim(dim.size(), 1);
        bdim[1] = dim[1];
        expect_matches_reference([&](Graph& g) {
          g.set_io_data_type(t);
          auto x = input(g, "X", dim, t, cl);
          auto b = input(g, "B", bdim, t, cl);
          auto s = input(g, "S", dim, t, cl);
          auto y = g.gelu(g.mul(g.add(x, b), s));
          finish(y, dim, t, cl);
        });
      }
}

TEST(GpuPointwise, ScalarByValueAndModes) {
  DNNGRAPH_REQUIRE_GPU();
  const std::vector<int64_t> dim{3, 20, 30};
  for (PointwiseMode m : {PointwiseMode::Tanh, PointwiseMode::Sigmoid, PointwiseMode::Exp,
                          PointwiseMode::Abs, PointwiseMode::Silu, PointwiseMode::Neg}) {
    SCOPED_TRACE(std::string(pointwise_mode_name(m)));
    expect_matches_reference(
        [&](Graph& g) {
          g.set_io_data_type(DataType::Float);
          auto x = input(g, "X", dim, DataType::Float, false);
          auto alpha = g.scalar(ir::Scalar::of_float(0.75), "alpha");
          finish(g.unary(m, g.mul(x, alpha)), dim, DataType::Float, false);
        },
        {.tol_scale = 10});
  }
}

TEST(GpuReduction, SumAndMaxAllRanks) {
  DNNGRAPH_REQUIRE_GPU();
  for (const auto& dim : kShapes)
    for (DataType t : {DataType::Float, DataType::BFloat16})
      for (ReductionMode mode : {ReductionMode::Add, ReductionMode::Max}) {
        SCOPED_TRACE(::testing::Message() << "rank " << dim.size() << " " << data_type_name(t)
                                          << " " << reduction_mode_name(mode));
        // Reduce the last dim, keep the others (Y stays fp32 to keep the sum exact enough).
        std::vector<int64_t> ydim = dim;
        ydim.back() = 1;
        expect_matches_reference(
            [&](Graph& g) {
              g.set_io_data_type(t);
              auto x = input(g, "X", dim, t, false);
              auto y = g.reduction(x, {mode});
              finish(y, ydim, DataType::Float, false);
            },
            {.tol_scale = 50, .min_abs = 1e-4, .modes = {HeurMode::A, HeurMode::Fallback}});
      }
}

TEST(GpuReduction, ReduceAllButChannels) {
  DNNGRAPH_REQUIRE_GPU();
  const std::vector<int64_t> dim{4, 16, 8, 8};
  expect_matches_reference(
      [&](Graph& g) {
        g.set_io_data_type(DataType::Float);
        auto x = input(g, "X", dim, DataType::Float, true);
        auto y = g.reduction(x, {ReductionMode::Add});
        finish(y, {1, 16, 1, 1}, DataType::Float, false);
      },
      {.tol_scale = 100, .min_abs = 1e-4, .modes = {HeurMode::A, HeurMode::Fallback}});
}

}  // namespace
}  // namespace dnngraph::gpu_test
