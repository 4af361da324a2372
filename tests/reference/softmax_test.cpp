// Reference softmax on hand-made nodes: hand-worked values, naive loops, stability with large
// inputs, -inf entries, low-precision storage and shape checks.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "common/ref_harness.hpp"
#include "dnngraph/dnngraph.hpp"
#include "engines/reference/kernel.hpp"

namespace dnngraph::reference {
namespace {

// ------------------------------------------------------------------ kernel-level harness
// Ports with host storage, the hand-made node, expect_close and the graph helpers
// (graph_tensor, mark_output, build_and_run, poisoned): tests/common/ref_harness.hpp.
using namespace ref_test::hand_made;  // NOLINT(build/namespaces)

constexpr char kNode[] = "softmax0";
using Case = NamedCase<kNode>;

// ------------------------------------------------------------------ tests
Case softmax_case(const std::vector<int64_t>& dim, DataType io, bool stats,
                  std::vector<int64_t> x_stride = {}) {
  Case c(ir::SoftmaxAttrs{});
  c.input(Role::X, make_buf("x", dim, io, std::move(x_stride)));
  c.output(Role::Y, make_buf("y", dim, io));
  if (stats) {
    std::vector<int64_t> sd = dim;
    sd.back() = 1;
    c.output(Role::STATS, make_buf("stats", sd, io == DataType::Double ? io : DataType::Float));
  }
  return c;
}

// Naive: exp of each entry divided by the row's sum (fine for the small inputs used here).
void naive(const std::vector<double>& x, int64_t cols, std::vector<double>& y,
           std::vector<double>& lse) {
  y.assign(x.size(), 0.0);
  lse.clear();
  for (size_t r = 0; r < x.size() / static_cast<size_t>(cols); ++r) {
    double sum = 0.0;
    for (int64_t j = 0; j < cols; ++j) sum += std::exp(x[r * cols + j]);
    for (int64_t j = 0; j < cols; ++j) y[r * cols + j] = std::exp(x[r * cols + j]) / sum;
    lse.push_back(std::log(sum));
  }
}

TEST(RefSoftmax, HandWorked) {
  Case c = softmax_case({1, 3}, DataType::Double, true);
  c.in.at(Role::X).set({1, 2, 3});
  Status s = c.run();
  ASSERT_TRUE(s.is_ok()) << s.message();
  const double e1 = std::exp(1.0), e2 = std::exp(2.0), e3 = std::exp(3.0), sum = e1 + e2 + e3;
  expect_close(c.result(Role::Y), {e1 / sum, e2 / sum, e3 / sum}, 1e-14, "Y");
  expect_close(c.result(Role::STATS), {std::log(sum)}, 1e-14, "STATS");
}

TEST(RefSoftmax, RandomMatchesNaiveWithStridedInput) {
  std::mt19937 gen(1);
  // X stored as [2,3,7] with its last two dims transposed in memory.
  Case c = softmax_case({2, 3, 7}, DataType::Float, true, {21, 1, 3});
  const auto x = c.in.at(Role::X).fill(gen, -4, 4);
  ASSERT_TRUE(c.run().is_ok());
  std::vector<double> y, lse;
  naive(x, 7, y, lse);
  expect_close(c.result(Role::Y), y, 1e-5, "Y");
  expect_close(c.result(Role::STATS), lse, 1e-5, "STATS");
}

TEST(RefSoftmax, StableForLargeInputs) {
  // softmax(x + 1000) == softmax(x); stats shift by 1000. exp(1000) overflows a naive kernel.
  std::mt19937 gen(2);
  Case c = softmax_case({4, 5}, DataType::Double, true);
  std::uniform_real_distribution<double> d(-3, 3);
  std::vector<double> x(20), shifted(20);
  for (size_t i = 0; i < x.size(); ++i) shifted[i] = (x[i] = d(gen)) + 1000.0;
  c.in.at(Role::X).set(shifted);
  ASSERT_TRUE(c.run().is_ok());
  std::vector<double> y, lse;
  naive(x, 5, y, lse);
  for (double& v : lse) v += 1000.0;
  expect_close(c.result(Role::Y), y, 1e-12, "Y");
  expect_close(c.result(Role::STATS), lse, 1e-12, "STATS");
}

TEST(RefSoftmax, MinusInfinityGetsZeroProbability) {
  Case c = softmax_case({2, 3}, DataType::Float, true);
  const double ninf = -std::numeric_limits<double>::infinity();
  c.in.at(Role::X).set({0.5, ninf, -0.5, ninf, ninf, 2.0});
  ASSERT_TRUE(c.run().is_ok());
  const double a = std::exp(0.5), b = std::exp(-0.5);
  expect_close(c.result(Role::Y), {a / (a + b), 0.0, b / (a + b), 0.0, 0.0, 1.0}, 1e-6, "Y");
  expect_close(c.result(Role::STATS), {std::log(a + b), 2.0}, 1e-6, "STATS");
}

TEST(RefSoftmax, LowPrecisionStorage) {
  for (DataType t : {DataType::BFloat16, DataType::Half}) {
    SCOPED_TRACE(std::string(data_type_name(t)));
    std::mt19937 gen(3);
    Case c = softmax_case({3, 2, 16}, t, true);
    const auto x = c.in.at(Role::X).fill(gen, -3, 3);
    ASSERT_TRUE(c.run().is_ok());
    std::vector<double> y, lse;
    naive(x, 16, y, lse);
    expect_close(c.result(Role::Y), y, tol_of(t), "Y");
    expect_close(c.result(Role::STATS), lse, 1e-5, "STATS");
  }
}

TEST(RefSoftmax, WithoutStatsWritesY) {
  std::mt19937 gen(4);
  Case c = softmax_case({5, 9}, DataType::Float, false);
  const auto x = c.in.at(Role::X).fill(gen, -1, 1);
  ASSERT_TRUE(c.run().is_ok());
  std::vector<double> y, lse;
  naive(x, 9, y, lse);
  expect_close(c.result(Role::Y), y, 1e-5, "Y");
}

TEST(RefSoftmax, CheckRejectsBadStatsDims) {
  Case c(ir::SoftmaxAttrs{});
  c.input(Role::X, make_buf("logits", {2, 3, 7}, DataType::Float));
  c.output(Role::Y, make_buf("probs", {2, 3, 7}, DataType::Float));
  c.output(Role::STATS, make_buf("lse", {2, 3, 7}, DataType::Float));
  Status s = ref_test::validate_node(c.node);
  EXPECT_EQ(s.code(), ErrorCode::InvalidGraph);
  EXPECT_NE(s.message().find("'lse'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("[2,3,1]"), std::string::npos) << s.message();
}

// ------------------------------------------------------------------ through dnngraph::Graph
TEST(RefSoftmaxGraph, SoftmaxWithStats) {
  std::mt19937 gen(400);
  Buf xb = make_buf("x", {2, 4, 33}, DataType::Half);
  const auto x = xb.fill(gen, -5, 5);
  Graph g;
  g.set_io_data_type(DataType::Half).set_compute_data_type(DataType::Float);
  auto out = g.softmax(graph_tensor(g, xb, 1), true);
  Buf yb = poisoned("y", {2, 4, 33}, DataType::Half);
  Buf sb = poisoned("stats", {2, 4, 1}, DataType::Float);
  mark_output(out[0], yb, 2);
  mark_output(out[1], sb, 3);
  Status st = build_and_run(g, {{1, xb.data()}, {2, yb.data()}, {3, sb.data()}});
  ASSERT_TRUE(st.is_ok()) << st.message();
  std::vector<double> y, lse;
  naive(x, 33, y, lse);
  expect_close(yb.get(), y, tol_of(DataType::Half), "Y");
  expect_close(sb.get(), lse, 1e-5, "STATS");
}

}  // namespace
}  // namespace dnngraph::reference
