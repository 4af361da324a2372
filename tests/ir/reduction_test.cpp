// Reduction inference and checks.
#include <gtest/gtest.h>

#include "ir/test_util.hpp"

namespace dnngraph::ir {
namespace {

using testing::expect_invalid;
using testing::make_input;

TEST(ReductionInfer, DefaultsToFullReduction) {
  Graph g;
  g.set_io_data_type(DataType::Half);
  Tensor x = make_input(g, "x", {3, 4, 5});
  Tensor y = g.reduction(x, {ReductionMode::Amax});
  y->set_output(true).set_data_type(DataType::Float);
  ASSERT_TRUE(g.validate().is_ok());
  EXPECT_EQ(y->dim, (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(y->stride, (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(y->data_type, DataType::Float);  // user-set type kept
}

TEST(ReductionInfer, KeepsDimsAndFollowsLayout) {
  Graph g;
  g.set_io_data_type(DataType::Float);
  // NHWC input reduced over H and W.
  Tensor x = make_input(g, "x", {2, 8, 4, 4}, DataType::Float, {128, 1, 32, 8});
  Tensor y = g.reduction(x, {ReductionMode::Add});
  y->set_output(true).set_dim({2, 8, 1, 1});
  ASSERT_TRUE(g.validate().is_ok());
  EXPECT_EQ(y->stride, (std::vector<int64_t>{8, 1, 8, 8}));
}

TEST(ReductionInfer, OutputDimMustMatchOrBeOne) {
  Graph g;
  Tensor x = make_input(g, "x", {2, 8, 4});
  g.reduction(x, {ReductionMode::Max}, {"red"})->set_output(true).set_dim({2, 4, 1});
  expect_invalid(g, {"reduction 'red'", "'red::Y'", "dim 1 is 4", "must be 8", "X 'x'"});

  Graph g2;
  Tensor x2 = make_input(g2, "x", {2, 8, 4});
  g2.reduction(x2, {ReductionMode::Max}, {"red"})->set_output(true).set_dim({2, 8});
  expect_invalid(g2, {"reduction 'red'", "'red::Y'", "rank 2", "'x' has rank 3"});
}

}  // namespace
}  // namespace dnngraph::ir
