// Pointwise-only and reduction-only graphs at ranks 2-5, fp32/bf16/fp16, row-major and
// channels-last: the shapes where cuDNN 9.19 silently miscomputes (2-D) or finds no engine
// (4-D) unless dnngraph canonicalizes them.
#include <cstdio>

#include "harness.hpp"

namespace dnngraph::gpu_test {
namespace {

const std::vector<std::vector<int64_t>> kShapes = {
    {64, 64}, {8, 8}, {4, 33, 40}, {2, 16, 12, 10}, {2, 8, 6, 5, 7}};
const DataType kTypes[] = {DataType::Float, DataType::BFloat16, DataType::Half};

// Calls fn(dim, type, channels_last) for every shape and type, row-major and (rank >= 4)
// channels-last, under a trace naming them.
template <class F>
void for_each_shape_type_layout(F fn) {
  for (const auto& dim : kShapes)
    for (DataType t : kTypes)
      for (bool cl : {false, true}) {
        if (cl && dim.size() < 4) continue;
        SCOPED_TRACE(::testing::Message() << "rank " << dim.size() << " " << data_type_name(t)
                                          << (cl ? " channels-last" : " row-major"));
        fn(dim, t, cl);
      }
}

TEST(GpuPointwise, ReluAllRanksAndTypes) {
  DNNGRAPH_REQUIRE_GPU();
  for_each_shape_type_layout([](const std::vector<int64_t>& dim, DataType t, bool cl) {
    expect_matches_reference([&](Graph& g) {
      g.set_io_data_type(t);
      finish(g.relu(input(g, "X", dim, t, cl)), "Y", dim, t, cl);
    });
  });
}

// Rank 1 (canonicalized to [1,1,n]): a unary chain and a binary op of equal shapes.
TEST(GpuPointwise, Rank1) {
  DNNGRAPH_REQUIRE_GPU();
  for (int64_t n : {1, 7, 4096})
    for (DataType t : kTypes) {
      SCOPED_TRACE(::testing::Message() << "[" << n << "] " << data_type_name(t));
      expect_matches_reference([&](Graph& g) {
        g.set_io_data_type(t);
        auto x = input(g, "X", {n}, t, false), y = input(g, "Y", {n}, t, false);
        finish(g.unary(PointwiseMode::Sigmoid, g.mul(g.relu(x), y)), "Y", {n}, t, false);
      });
    }
}

// Bias over dim 1 (the channel dim of NCHW/NHWC). Row-major at rank >= 3 puts the broadcast
// on the innermost dim, which cuDNN 9.19 computes wrongly in pointwise-only graphs (seen on the
// H200): the engine must refuse those (NotSupported, naming the input) and run the others.
TEST(GpuPointwise, BiasScaleGeluChainWithBroadcast) {
  DNNGRAPH_REQUIRE_GPU();
  for_each_shape_type_layout([](const std::vector<int64_t>& dim, DataType t, bool cl) {
    std::vector<int64_t> bdim(dim.size(), 1);
    bdim[1] = dim[1];
    auto make = [&](Graph& g) {
      g.set_io_data_type(t);
      auto x = input(g, "X", dim, t, cl);
      auto b = input(g, "B", bdim, t, cl);
      auto s = input(g, "S", dim, t, cl);
      finish(g.gelu(g.mul(g.add(x, b), s)), "Y", dim, t, cl);
    };
    const bool inner_broadcast = !cl && dim.size() >= 3;
    if (!inner_broadcast) {
      expect_matches_reference(make);
      return;
    }
    RunReport r = run_and_compare(make);
    EXPECT_EQ(r.status.code(), ErrorCode::NotSupported) << r.status.to_string();
    EXPECT_NE(r.status.message().find("innermost"), std::string::npos) << r.status.to_string();
    EXPECT_EQ(r.compared, 0);
  });
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
          finish(g.unary(m, g.mul(x, alpha)), "Y", dim, DataType::Float, false);
        },
        {.tol_scale = 10});
  }
}

TEST(GpuPointwise, BroadcastAlongMiddleDimOnly) {
  DNNGRAPH_REQUIRE_GPU();
  for (DataType t : kTypes) {
    SCOPED_TRACE(std::string(data_type_name(t)));
    expect_matches_reference([&](Graph& g) {
      g.set_io_data_type(t);
      auto x = input(g, "X", {4, 33, 40}, t, false);
      auto b = input(g, "B", {4, 1, 40}, t, false);
      finish(g.relu(g.binary(PointwiseMode::Sub, x, b)), "Y", {4, 33, 40}, t, false);
    });
  }
}

// cuDNN 9.19 has no engine for reduction-only graphs, also not after a pointwise op (seen on the
// H200: heuristics A/B/FALLBACK and every engine of the library refuse them): the engine must
// then say so and why (NotSupported), never return wrong numbers.
void expect_match_or_not_supported(const std::function<void(Graph&)>& make,
                                   const CompareOptions& o) {
  RunReport r = run_and_compare(make, o);
  if (!r.status.is_ok()) std::printf("NOTE %s\n", r.status.to_string().c_str());
  if (!r.status.is_ok() && r.status.message().find("cuDNN build") != std::string::npos) {
    EXPECT_EQ(r.status.code(), ErrorCode::NotSupported) << r.status.to_string();
    // The reason is given: no engine, and why (reductions fuse only after a matmul/conv).
    EXPECT_NE(r.status.message().find("has no engine"), std::string::npos) << r.status.to_string();
    EXPECT_NE(r.status.message().find("epilogue"), std::string::npos) << r.status.to_string();
    return;
  }
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  EXPECT_EQ(r.mismatches, 0) << r.first_mismatch;
}

TEST(GpuReduction, ReductionOnlyGraphsAllRanksMatchOrSayNotSupported) {
  DNNGRAPH_REQUIRE_GPU();
  for (const auto& dim : kShapes)
    for (DataType t : {DataType::Float, DataType::BFloat16})
      for (ReductionMode mode : {ReductionMode::Add, ReductionMode::Max}) {
        SCOPED_TRACE(::testing::Message() << "rank " << dim.size() << " " << data_type_name(t)
                                          << " " << reduction_mode_name(mode));
        std::vector<int64_t> ydim = dim;
        ydim.back() = 1;
        expect_match_or_not_supported(
            [&](Graph& g) {
              g.set_io_data_type(t);
              auto y = g.reduction(input(g, "X", dim, t, false), {mode});
              finish(y, "Y", ydim, DataType::Float, false);
            },
            {.tol_scale = 50, .min_abs = 1e-4});
      }
}

// A reduction after a pointwise op (the runtime fusion pattern without a matmul).
TEST(GpuReduction, AfterPointwiseMatchOrSayNotSupported) {
  DNNGRAPH_REQUIRE_GPU();
  for (const auto& dim : kShapes)
    for (ReductionMode mode : {ReductionMode::Add, ReductionMode::Amax}) {
      SCOPED_TRACE(::testing::Message()
                   << "rank " << dim.size() << " " << reduction_mode_name(mode));
      std::vector<int64_t> ydim = dim;
      ydim.back() = 1;
      expect_match_or_not_supported(
          [&](Graph& g) {
            g.set_io_data_type(DataType::BFloat16);
            auto x = input(g, "X", dim, DataType::BFloat16, false);
            auto y = g.reduction(g.relu(x), {mode});
            finish(y, "Y", ydim, DataType::Float, false);
          },
          {.tol_scale = 50, .min_abs = 1e-4});
    }
}

// Reductions fused after a matmul (the form cuDNN runs): row sums, row maxima, AMAX of all.
TEST(GpuReduction, AfterMatmulRanks3And4) {
  DNNGRAPH_REQUIRE_GPU();
  struct Case {
    std::vector<int64_t> a, b, y;
    ReductionMode mode;
  };
  const Case cases[] = {{{2, 64, 32}, {2, 32, 48}, {2, 64, 1}, ReductionMode::Add},
                        {{2, 64, 32}, {2, 32, 48}, {2, 64, 1}, ReductionMode::Max},
                        {{2, 3, 32, 32}, {2, 3, 32, 16}, {1, 1, 1, 1}, ReductionMode::Amax}};
  for (const auto& c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << "rank " << c.a.size() << " " << reduction_mode_name(c.mode));
    expect_matches_reference(
        [&](Graph& g) {
          const DataType t = DataType::BFloat16;
          g.set_io_data_type(t);
          auto m = g.matmul(input(g, "A", c.a, t, false), input(g, "B", c.b, t, false));
          std::vector<int64_t> cdim = c.a;
          cdim.back() = c.b.back();
          finish(m, "Y", cdim, t, false);
          auto r = g.reduction(m, {c.mode});
          r->set_output(true)
              .set_name("R")
              .set_data_type(DataType::Float)
              .set_dim(c.y)
              .set_stride(ir::packed_strides(c.y));
        },
        {.tol_scale = 2, .min_abs = 5e-2});
  }
}

}  // namespace
}  // namespace dnngraph::gpu_test
