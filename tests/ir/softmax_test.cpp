// Softmax inference and checks.
#include <gtest/gtest.h>

#include "ir/test_util.hpp"

namespace dnngraph::ir {
namespace {

using testing::expect_invalid;
using testing::make_input;

TEST(SoftmaxInfer, OutputAndStats) {
  Graph g;
  g.set_io_data_type(DataType::Half);
  Tensor x = make_input(g, "x", {2, 3, 7}, DataType::Half, {7, 14, 1});  // dims 0,1 swapped
  auto [y, stats] = g.softmax(x, true, {"sm"});
  y->set_output(true);
  stats->set_output(true);
  ASSERT_TRUE(g.validate().is_ok()) << g.validate().to_string();
  EXPECT_EQ(y->dim, x->dim);
  EXPECT_EQ(y->stride, x->stride);
  EXPECT_EQ(y->data_type, DataType::Half);
  EXPECT_EQ(stats->dim, (std::vector<int64_t>{2, 3, 1}));
  EXPECT_EQ(stats->stride, (std::vector<int64_t>{1, 2, 1}));
  EXPECT_EQ(stats->data_type, DataType::Float);
}

TEST(SoftmaxInfer, UserSetStatsDimsChecked) {
  Graph g;
  Tensor x = make_input(g, "x", {2, 3, 7});
  auto [y, stats] = g.softmax(x, true, {"sm"});
  y->set_output(true);
  stats->set_output(true).set_dim({2, 3, 7});
  expect_invalid(g, {"softmax 'sm'", "'sm::STATS'", "[2,3,7]", "[2,3,1]"});
}

}  // namespace
}  // namespace dnngraph::ir
