// Reference reduction kernel: every mode over various sets of reduced dims, against a naive
// loop, with strided inputs, reduced-precision storage, and a graph.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "common/ref_harness.hpp"

namespace {

using dnngraph::DataType;
using dnngraph::ReductionMode;
using dnngraph::ir::Role;
using RM = ReductionMode;

dnngraph::ir::Node reduction_node(RM mode, const dnngraph::ir::Tensor& x,
                                  const dnngraph::ir::Tensor& y) {
  dnngraph::ir::Node n;
  n.name = "red";
  n.compute_data_type = DataType::Float;
  dnngraph::ir::ReductionAttrs a;
  a.mode = mode;
  n.attrs = a;
  n.inputs = {{Role::X, x}};
  n.outputs = {{Role::Y, y}};
  return n;
}

// Naive: gather every X element into its Y bucket, then reduce each bucket by the
// mode's definition.
std::vector<double> naive(RM mode, const std::vector<double>& x, const std::vector<int64_t>& xd,
                          const std::vector<int64_t>& yd) {
  int64_t ny = 1;
  for (int64_t d : yd) ny *= d;
  std::vector<std::vector<double>> bucket(static_cast<size_t>(ny));
  for (size_t i = 0; i < x.size(); ++i) {
    auto idx = ref_test::unravel(static_cast<int64_t>(i), xd);
    for (size_t k = 0; k < idx.size(); ++k)
      if (yd[k] == 1) idx[k] = 0;
    bucket[static_cast<size_t>(ref_test::ravel(idx, yd))].push_back(x[i]);
  }
  std::vector<double> y;
  for (const auto& b : bucket) {
    double v = 0;
    switch (mode) {
      case RM::Add:
        for (double e : b) v += e;
        break;
      case RM::Mul:
        v = 1;
        for (double e : b) v *= e;
        break;
      case RM::Min:
        v = *std::min_element(b.begin(), b.end());
        break;
      case RM::Max:
        v = *std::max_element(b.begin(), b.end());
        break;
      case RM::Amax:
        for (double e : b) v = std::max(v, std::fabs(e));
        break;
      case RM::Avg:
        for (double e : b) v += e / static_cast<double>(b.size());
        break;
      case RM::Norm1:
        for (double e : b) v += std::fabs(e);
        break;
      case RM::Norm2:
        for (double e : b) v += e * e;
        v = std::sqrt(v);
        break;
    }
    y.push_back(v);
  }
  return y;
}

const RM kModes[] = {RM::Add, RM::Mul, RM::Min, RM::Max, RM::Amax, RM::Avg, RM::Norm1, RM::Norm2};

void check(RM mode, const std::vector<int64_t>& xd, const std::vector<int64_t>& yd,
           const std::vector<int64_t>& xstride, DataType io, uint64_t seed) {
  SCOPED_TRACE(std::string(dnngraph::reduction_mode_name(mode)));
  auto x = ref_test::make_tensor("X", xd, io, xstride);
  auto y = ref_test::make_tensor("Y", yd, io);
  const auto n = reduction_node(mode, x, y);
  ASSERT_OK(ref_test::validate_node(n));
  ref_test::Rng rng(seed);
  ref_test::Buffers b;
  // Products stay in range with factors near 1 in magnitude.
  const auto xv = mode == RM::Mul ? b.random(x, rng, 0.5, 1.5) : b.random(x, rng, -2, 2);
  ASSERT_OK(b.run_kernel(n));
  EXPECT_TRUE(ref_test::all_close(b.values(y), naive(mode, xv, xd, yd), ref_test::tol(io)));
}

TEST(RefReduction, HandWorked) {
  auto x = ref_test::make_tensor("X", {2, 3}, DataType::Float);
  auto y = ref_test::make_tensor("Y", {2, 1}, DataType::Float);
  const std::vector<std::pair<RM, std::vector<double>>> cases = {
      {RM::Add, {2, -9}},   {RM::Mul, {-6, 60}},
      {RM::Min, {-2, -6}},  {RM::Max, {3, 2}},
      {RM::Amax, {3, 6}},   {RM::Avg, {2.0 / 3, -3}},
      {RM::Norm1, {6, 13}}, {RM::Norm2, {std::sqrt(14.0), std::sqrt(65.0)}},
  };
  for (const auto& [mode, want] : cases) {
    SCOPED_TRACE(std::string(dnngraph::reduction_mode_name(mode)));
    ref_test::Buffers b;
    b.set(x, {1, -2, 3, -5, 2, -6});
    ASSERT_OK(b.run_kernel(reduction_node(mode, x, y)));
    EXPECT_TRUE(ref_test::all_close(b.values(y), ref_test::rounded(DataType::Float, want),
                                    ref_test::tol(DataType::Float)));
  }
}

TEST(RefReduction, EveryModeOverInnerOuterAndAllDims) {
  uint64_t seed = 1;
  for (RM mode : kModes) {
    check(mode, {3, 4, 5}, {3, 4, 1}, {}, DataType::Float, seed++);  // last dim
    check(mode, {3, 4, 5}, {1, 4, 1}, {}, DataType::Float, seed++);  // outer and inner
    check(mode, {3, 4, 5}, {1, 1, 1}, {}, DataType::Float, seed++);  // everything
    check(mode, {3, 4, 5}, {3, 1, 5}, {}, DataType::Float, seed++);  // a middle dim
    check(mode, {3, 4, 5}, {3, 4, 5}, {}, DataType::Float, seed++);  // nothing
  }
}

TEST(RefReduction, ChannelsLastInputAndReducedPrecision) {
  uint64_t seed = 100;
  const std::vector<int64_t> xd{2, 6, 3, 4};
  for (RM mode : kModes) {
    // Per-channel reduction of an NHWC tensor (what batchnorm statistics need).
    check(mode, xd, {1, 6, 1, 1}, ref_test::nhwc_strides(xd), DataType::Float, seed++);
    check(mode, xd, {2, 1, 1, 1}, ref_test::nhwc_strides(xd), DataType::BFloat16, seed++);
    check(mode, xd, {2, 6, 1, 1}, {}, DataType::Half, seed++);
  }
}

TEST(RefReduction, NaNPropagatesThroughMinAndMax) {
  auto x = ref_test::make_tensor("X", {1, 4}, DataType::Float);
  auto y = ref_test::make_tensor("Y", {1, 1}, DataType::Float);
  for (RM mode : {RM::Min, RM::Max, RM::Amax, RM::Add}) {
    ref_test::Buffers b;
    b.set(x, {1, std::nan(""), -3, 2});
    ASSERT_OK(b.run_kernel(reduction_node(mode, x, y)));
    EXPECT_TRUE(std::isnan(b.values(y)[0])) << dnngraph::reduction_mode_name(mode);
  }
}

TEST(RefReduction, CheckNamesTheBadTensor) {
  auto x = ref_test::make_tensor("X", {3, 4}, DataType::Float);
  auto y = ref_test::make_tensor("Ybad", {3, 2}, DataType::Float);
  dnngraph::Status s = ref_test::validate_node(reduction_node(RM::Add, x, y));
  EXPECT_EQ(s.code(), dnngraph::ErrorCode::InvalidGraph);
  EXPECT_NE(s.message().find("'Ybad'"), std::string::npos) << s.message();
}

// sum over the last dim of x * x as a graph (the square is a virtual tensor).
TEST(RefReduction, GraphSumOfSquares) {
  dnngraph::Graph g;
  g.set_io_data_type(DataType::Float).set_intermediate_data_type(DataType::Float);
  auto x = g.tensor(dnngraph::ir::TensorAttrs().set_name("x").set_dim({4, 7}).set_stride({7, 1}));
  dnngraph::ir::ReductionAttrs a;
  a.mode = RM::Add;
  auto y = g.reduction(g.mul(x, x), a);
  y->set_output(true).set_name("y").set_dim({4, 1}).set_stride({1, 1});
  ASSERT_OK(g.validate());
  ref_test::Rng rng(7);
  ref_test::Buffers b;
  const auto xv = b.random(x, rng);
  ASSERT_OK(b.run_graph(g));
  std::vector<double> want(4, 0.0);
  for (size_t i = 0; i < xv.size(); ++i)
    want[i / 7] += dnngraph::reference::round_to(DataType::Float, xv[i] * xv[i]);
  EXPECT_TRUE(ref_test::all_close(b.values(y), want, ref_test::tol(DataType::Float)));
}

}  // namespace
