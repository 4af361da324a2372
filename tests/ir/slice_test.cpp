// Shape rules of slice (src/ir/ops/slice.cpp).
#include <gtest/gtest.h>

#include "dnngraph/ir/graph.hpp"
#include "ir/test_util.hpp"

namespace dnngraph::ir {
namespace {

using testing::expect_invalid;
using testing::make_input;
using testing::named;

TEST(SliceInfer, DimsAreCeilOfExtentOverStrideLayoutAndTypeFollowX) {
  Graph g;
  g.set_io_data_type(DataType::Float);
  // X [2, 8, 5] channels-last (dim 1 innermost).
  Tensor x = make_input(g, "x", {2, 8, 5}, DataType::Half, {40, 1, 8});
  Tensor y = g.slice(x, SliceAttrs{{0, 1, 0}, {2, 8, 5}, {1, 3, 2}}, named("s"));
  y->set_output(true);
  ASSERT_TRUE(g.validate().is_ok()) << g.validate().to_string();
  EXPECT_EQ(y->dim, (std::vector<int64_t>{2, 3, 3}));  // 2, ceil(7/3), ceil(5/2)
  EXPECT_EQ(y->stride, (std::vector<int64_t>{9, 1, 3}));
  EXPECT_EQ(y->data_type, DataType::Half);  // X's, not the graph's io type
}

TEST(SliceInfer, StrideDefaultsToOne) {
  Graph g;
  Tensor x = make_input(g, "x", {4, 6});
  Tensor y = g.slice(x, SliceAttrs{{1, 2}, {3, 6}, {}});
  y->set_output(true);
  ASSERT_TRUE(g.validate().is_ok()) << g.validate().to_string();
  EXPECT_EQ(y->dim, (std::vector<int64_t>{2, 4}));
}

TEST(SliceInfer, RefusesBadSlices) {
  struct Case {
    SliceAttrs a;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {SliceAttrs{{0}, {4}, {}}, {"slice 's'", "one entry per dim", "x' (dims [4,6])"}},
      {SliceAttrs{{0, 0}, {4, 6}, {1}}, {"stride [1]", "one entry per dim"}},
      {SliceAttrs{{0, 0}, {4, 6}, {1, 0}}, {"stride of dim 1 is 0"}},
      {SliceAttrs{{0, 3}, {4, 3}, {}}, {"dim 1 slice [3:3]", "0 <= start < end <= 6"}},
      {SliceAttrs{{0, 0}, {5, 6}, {}}, {"dim 0 slice [0:5]", "<= 4", "'x'"}},
      {SliceAttrs{{-1, 0}, {4, 6}, {}}, {"dim 0 slice [-1:4]"}},
  };
  for (const Case& c : cases) {
    Graph g;
    Tensor x = make_input(g, "x", {4, 6});
    g.slice(x, c.a, named("s"))->set_output(true);
    expect_invalid(g, c.parts);
  }
}

TEST(SliceInfer, OutputTypeMustBeTheInputs) {
  Graph g;
  Tensor x = make_input(g, "x", {4, 6}, DataType::Half);
  g.slice(x, SliceAttrs{{0, 0}, {2, 2}, {}}, named("s"))
      ->set_output(true)
      .set_data_type(DataType::Float);
  expect_invalid(g, {"slice 's'", "Y 's::Y'", "FLOAT", "HALF"});
}

}  // namespace
}  // namespace dnngraph::ir
