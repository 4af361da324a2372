// Shape rules of moe_grouped_matmul (src/ir/ops/moe.cpp).
#include <gtest/gtest.h>

#include "dnngraph/ir/graph.hpp"
#include "dnngraph/ir/json.hpp"
#include "ir/test_util.hpp"

namespace dnngraph::ir {
namespace {

using testing::expect_inferred;
using testing::expect_invalid;
using testing::make_input;
using testing::named;

TEST(MoeInfer, OutputIsOneBySByNRowMajorInTheIoType) {
  Graph g;
  g.set_io_data_type(DataType::BFloat16);
  Tensor token = make_input(g, "token", {1, 10, 6}, DataType::BFloat16);
  Tensor weight = make_input(g, "weight", {3, 6, 4}, DataType::BFloat16, {24, 1, 6});
  Tensor offset = make_input(g, "offset", {3, 1, 1}, DataType::Int32);
  Tensor y = g.moe_grouped_matmul(token, weight, offset, {}, named("moe"));
  y->set_output(true);
  expect_inferred(g, y, {1, 10, 4}, {40, 4, 1}, DataType::BFloat16);
}

TEST(MoeInfer, Int64OffsetsAndAVirtualOutputInTheIntermediateType) {
  Graph g;
  g.set_io_data_type(DataType::Half).set_intermediate_data_type(DataType::Float);
  Tensor token = make_input(g, "token", {1, 5, 2});
  Tensor weight = make_input(g, "weight", {2, 2, 3});
  Tensor offset = make_input(g, "offset", {2, 1, 1}, DataType::Int64);
  Tensor y = g.moe_grouped_matmul(token, weight, offset);
  Tensor z = g.relu(y);
  z->set_output(true);
  ASSERT_TRUE(g.validate().is_ok()) << g.validate().to_string();
  EXPECT_EQ(y->data_type, DataType::Float);
  EXPECT_EQ(y->dim, (std::vector<int64_t>{1, 5, 3}));
}

TEST(MoeInfer, GroupsMayBeAMultipleOfTheExperts) {
  Graph g;
  Tensor token = make_input(g, "token", {1, 12, 2});
  Tensor weight = make_input(g, "weight", {3, 2, 4});
  Tensor offset = make_input(g, "offset", {6, 1, 1}, DataType::Int32);  // B=2 batches of E=3
  Tensor y = g.moe_grouped_matmul(token, weight, offset);
  y->set_output(true);
  ASSERT_TRUE(g.validate().is_ok()) << g.validate().to_string();
  EXPECT_EQ(y->dim, (std::vector<int64_t>{1, 12, 4}));
}

TEST(MoeInfer, JsonRoundTripKeepsThePortsAndValidates) {
  Graph g;
  g.set_io_data_type(DataType::Half);
  Tensor token = make_input(g, "token", {1, 7, 3});
  Tensor weight = make_input(g, "weight", {2, 3, 5}, DataType::Half, {15, 1, 3});
  Tensor offset = make_input(g, "offset", {2, 1, 1}, DataType::Int64);
  g.moe_grouped_matmul(token, weight, offset, {}, named("moe"))->set_output(true);
  const std::string text = to_json(g);
  EXPECT_NE(text.find("\"moe_grouped_matmul\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"FIRST_TOKEN_OFFSET\""), std::string::npos) << text;
  Graph loaded;
  ASSERT_TRUE(from_json(text, loaded).is_ok());
  EXPECT_EQ(to_json(loaded), text);
  ASSERT_TRUE(loaded.validate().is_ok()) << loaded.validate().to_string();
  ASSERT_EQ(loaded.nodes().size(), 1u);
  const Node& n = loaded.nodes()[0];
  EXPECT_EQ(n.kind(), OpKind::MoeGroupedMatmul);
  EXPECT_EQ(n.output(Role::OUTPUT)->dim, (std::vector<int64_t>{1, 7, 5}));
  EXPECT_EQ(n.input(Role::WEIGHT)->stride, (std::vector<int64_t>{15, 1, 3}));
}

TEST(MoeInfer, RefusesBadShapesAndTypes) {
  struct Case {
    std::vector<int64_t> token, weight, offset;
    DataType offset_type;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {{10, 6},
       {3, 6, 4},
       {3, 1, 1},
       DataType::Int32,
       {"moe_grouped_matmul 'moe'", "TOKEN 't'", "rank 3"}},
      {{2, 10, 6}, {3, 6, 4}, {3, 1, 1}, DataType::Int32, {"TOKEN 't'", "expected [1,S,K]"}},
      {{1, 10, 6}, {3, 5, 4}, {3, 1, 1}, DataType::Int32, {"WEIGHT 'w'", "K=6", "[E,6,N]"}},
      {{1, 10, 6},
       {3, 6, 4},
       {4, 1, 1},
       DataType::Int32,
       {"FIRST_TOKEN_OFFSET 'o'", "[4,1,1]", "[G,1,1]", "multiple of E=3"}},
      {{1, 10, 6},
       {3, 6, 4},
       {3, 2, 1},
       DataType::Int32,
       {"FIRST_TOKEN_OFFSET 'o'", "[3,2,1]", "[G,1,1]"}},
      {{1, 10, 6},
       {3, 6, 4},
       {3, 1, 1},
       DataType::Float,
       {"FIRST_TOKEN_OFFSET 'o'", "INT32 or INT64", "FLOAT"}},
  };
  for (const Case& c : cases) {
    Graph g;
    Tensor t = make_input(g, "t", c.token);
    Tensor w = make_input(g, "w", c.weight);
    Tensor o = make_input(g, "o", c.offset, c.offset_type);
    g.moe_grouped_matmul(t, w, o, {}, named("moe"))->set_output(true);
    expect_invalid(g, c.parts);
  }
}

TEST(MoeInfer, RefusesIntegerTokensOtherThanInt8) {
  Graph g;
  Tensor t = make_input(g, "t", {1, 4, 2}, DataType::Int32);
  Tensor w = make_input(g, "w", {1, 2, 2});
  Tensor o = make_input(g, "o", {1, 1, 1}, DataType::Int32);
  g.moe_grouped_matmul(t, w, o, {}, named("moe"))->set_output(true);
  expect_invalid(g, {"TOKEN 't'", "INT32", "floating-point"});
}

}  // namespace
}  // namespace dnngraph::ir
