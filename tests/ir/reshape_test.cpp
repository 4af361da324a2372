// Shape rules of reshape (src/ir/ops/reshape.cpp).
#include <gtest/gtest.h>

#include "dnngraph/ir/graph.hpp"
#include "ir/test_util.hpp"

namespace dnngraph::ir {
namespace {

using testing::expect_invalid;
using testing::make_input;
using testing::named;

TEST(ReshapeInfer, StridesDefaultToChannelsLastAndTypeFollowsX) {
  Graph g;
  g.set_io_data_type(DataType::Float);
  Tensor x = make_input(g, "x", {2, 3, 4}, DataType::Half, {12, 4, 1});
  Tensor y = g.reshape(x, {}, named("r"));
  y->set_output(true).set_dim({2, 4, 3});
  ASSERT_TRUE(g.validate().is_ok()) << g.validate().to_string();
  EXPECT_EQ(y->stride, (std::vector<int64_t>{12, 1, 4}));  // dim 1 innermost, as the frontend
  EXPECT_EQ(y->data_type, DataType::Half);

  Graph g2;  // rank 1: row-major
  Tensor x2 = make_input(g2, "x", {2, 3}, DataType::Float, {3, 1});
  Tensor y2 = g2.reshape(x2);
  y2->set_output(true).set_dim({6});
  ASSERT_TRUE(g2.validate().is_ok()) << g2.validate().to_string();
  EXPECT_EQ(y2->stride, (std::vector<int64_t>{1}));
}

TEST(ReshapeInfer, RefusesMissingOrWrongDims) {
  {
    Graph g;
    Tensor x = make_input(g, "x", {2, 3});
    g.reshape(x, {}, named("r"))->set_output(true);
    expect_invalid(g, {"reshape 'r'", "Y 'r::Y'", "has no dims", "set_dim", "6 elements"});
  }
  {
    Graph g;
    Tensor x = make_input(g, "x", {2, 3});
    g.reshape(x, {}, named("r"))->set_output(true).set_dim({4, 2});
    expect_invalid(g, {"reshape 'r'", "[4,2]", "X 'x'", "[2,3]", "number of elements"});
  }
  {
    Graph g;
    Tensor x = make_input(g, "x", {2, 3}, DataType::Half);
    g.reshape(x, {}, named("r"))->set_output(true).set_dim({6}).set_data_type(DataType::Float);
    expect_invalid(g, {"reshape 'r'", "FLOAT", "HALF"});
  }
}

TEST(ReshapeInfer, ViewOnlyNeedsPackedTensorsLogicalDoesNot) {
  for (bool logical : {false, true}) {
    Graph g;
    // X [2, 3] with a gap after each row: not packed.
    Tensor x = make_input(g, "x", {2, 3}, DataType::Float, {4, 1});
    g.reshape(x, {logical}, named("r"))->set_output(true).set_dim({3, 2});
    if (logical) {
      EXPECT_TRUE(g.validate().is_ok()) << g.validate().to_string();
    } else {
      expect_invalid(g, {"reshape 'r'", "X 'x'", "not packed", "LOGICAL"});
    }
  }
  Graph g;
  Tensor x = make_input(g, "x", {2, 3}, DataType::Float, {3, 1});
  g.reshape(x, {}, named("r"))->set_output(true).set_dim({3, 2}).set_stride({4, 1});
  expect_invalid(g, {"reshape 'r'", "Y 'r::Y'", "not packed"});
}

}  // namespace
}  // namespace dnngraph::ir
