// Shape rules of concatenate (src/ir/ops/concat.cpp).
#include <gtest/gtest.h>

#include "dnngraph/ir/graph.hpp"
#include "ir/test_util.hpp"

namespace dnngraph::ir {
namespace {

using testing::expect_inferred;
using testing::expect_invalid;
using testing::make_input;
using testing::named;

ConcatAttrs along(int64_t axis, std::optional<int64_t> in_place = std::nullopt) {
  ConcatAttrs a;
  a.axis = axis;
  a.in_place_index = in_place;
  return a;
}

TEST(ConcatInfer, DimsAddUpAlongTheAxisLayoutFollowsTheFirstInput) {
  Graph g;
  g.set_io_data_type(DataType::Float);
  // Channels-last inputs [2, C, 3]: C = 4, 1, 5.
  Tensor a = make_input(g, "a", {2, 4, 3}, DataType::Half, {12, 1, 4});
  Tensor b = make_input(g, "b", {2, 1, 3}, DataType::Half, {3, 1, 1});
  Tensor c = make_input(g, "c", {2, 5, 3}, DataType::Half, {15, 3, 1});
  Tensor y = g.concatenate({a, b, c}, along(1, 2), named("cat"));
  y->set_output(true);
  expect_inferred(g, y, {2, 10, 3}, {30, 1, 10}, DataType::Half);
}

TEST(ConcatInfer, RefusesMismatchesAndBadAttributes) {
  struct Case {
    std::vector<int64_t> b_dims;
    DataType b_type;
    ConcatAttrs a;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {{2, 5}, DataType::Half, along(1), {}},  // valid
      {{3, 5}, DataType::Half, along(1), {"IN_1 'b'", "[3,5]", "IN_0 'a'", "but axis 1"}},
      {{2, 5, 1}, DataType::Half, along(1), {"IN_1 'b'", "[2,5,1]"}},
      {{2, 5}, DataType::Float, along(1), {"IN_1 'b'", "FLOAT", "HALF", "one data type"}},
      {{2, 5}, DataType::Half, along(2), {"axis 2", "IN_0 'a'", "0 to 1"}},
      {{2, 5}, DataType::Half, along(-1), {"axis -1"}},
      {{2, 5}, DataType::Half, along(1, 2), {"in_place_index 2", "0 to 1"}},
  };
  for (const Case& c : cases) {
    Graph g;
    Tensor a = make_input(g, "a", {2, 3});
    Tensor b = make_input(g, "b", c.b_dims, c.b_type);
    g.concatenate({a, b}, c.a, named("cat"))->set_output(true);
    if (c.parts.empty()) {
      EXPECT_TRUE(g.validate().is_ok()) << g.validate().to_string();
    } else {
      SCOPED_TRACE(c.parts[0]);
      std::vector<std::string> parts = c.parts;
      parts.push_back("concatenate 'cat'");
      expect_invalid(g, parts);
    }
  }
}

TEST(ConcatInfer, RefusesMoreInputsThanItHasPorts) {
  Graph g;
  std::vector<Tensor> in;
  for (int i = 0; i < 9; ++i) in.push_back(make_input(g, "x" + std::to_string(i), {1, 2}));
  g.concatenate(in, along(0), named("cat"))->set_output(true);
  expect_invalid(g, {"concatenate 'cat'"});
}

}  // namespace
}  // namespace dnngraph::ir
