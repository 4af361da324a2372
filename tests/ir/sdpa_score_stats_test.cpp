// SDPA's SCORE_MAX / SCORE_SUM_EXP outputs in the IR: inferred like STATS (packed
// [b, h_q, s_q, 1] FLOAT unless set), the combinations cuDNN's composite softmax refuses (with
// STATS, one without the other), the backward and sdpa_fp8 refusing them, and JSON / fingerprint
// round trips.
#include <gtest/gtest.h>

#include <array>

#include "ir/test_util.hpp"

namespace dnngraph::ir {
namespace {

using testing::expect_invalid;
using testing::make_input;

// Q [2,4,5,8] token-major in memory ([b, s, h, d]), K/V [2,2,6,8] (GQA).
std::array<Tensor, 3> qkv(Graph& g) {
  return {make_input(g, "q", {2, 4, 5, 8}, DataType::Half, {160, 8, 32, 1}),
          make_input(g, "k", {2, 2, 6, 8}), make_input(g, "v", {2, 2, 6, 8})};
}

Tensor row_output(Graph& g, const char* name) {
  TensorAttrs a;
  a.set_name(name);
  Tensor t = g.tensor(a);
  t->set_output(true);
  return t;
}

// sdpa 'attn' with the outputs asked for; returns {O, STATS}.
std::array<Tensor, 2> build(Graph& g, bool inference, SdpaInputs& e, bool max, bool sum) {
  auto [q, k, v] = qkv(g);
  if (max) e.score_max = row_output(g, "mx");
  if (sum) e.score_sum_exp = row_output(g, "se");
  SdpaAttrs a;
  a.is_inference = inference;
  auto out = g.sdpa(q, k, v, a, e, {"attn"});
  out[0]->set_output(true);
  if (out[1]) out[1]->set_output(true);
  return out;
}

TEST(SdpaScoreStats, InferredPackedFloatLikeStats) {
  Graph g;
  g.set_io_data_type(DataType::Half);
  SdpaInputs e;
  build(g, true, e, true, true);
  ASSERT_TRUE(g.validate().is_ok()) << g.validate().to_string();
  for (const Tensor& t : {e.score_max, e.score_sum_exp}) {
    EXPECT_EQ(t->dim, (std::vector<int64_t>{2, 4, 5, 1})) << t->name;
    // Packed whatever Q's layout (Q is token-major here), as the frontend fills them.
    EXPECT_EQ(t->stride, (std::vector<int64_t>{20, 5, 1, 1})) << t->name;
    EXPECT_EQ(t->data_type, DataType::Float) << t->name;  // not the io type
  }
}

TEST(SdpaScoreStats, UserLayoutIsKept) {
  Graph g;
  SdpaInputs e;
  auto [q, k, v] = qkv(g);
  TensorAttrs a;
  a.set_name("mx").set_dim({2, 4, 5, 1}).set_stride({20, 1, 4, 1});  // [b, s, h, 1]
  e.score_max = g.tensor(a);
  e.score_max->set_output(true);
  e.score_sum_exp = row_output(g, "se");
  g.sdpa(q, k, v, SdpaAttrs{}, e, {"attn"})[0]->set_output(true);
  ASSERT_TRUE(g.validate().is_ok()) << g.validate().to_string();
  EXPECT_EQ(e.score_max->stride, (std::vector<int64_t>{20, 1, 4, 1}));
}

TEST(SdpaScoreStats, WrongDimsOrTypeAreRefused) {
  {
    Graph g;
    SdpaInputs e;
    build(g, true, e, true, true);
    e.score_sum_exp->set_dim({2, 4, 5, 6});
    expect_invalid(g, {"sdpa 'attn'", "SCORE_SUM_EXP 'se'", "[2,4,5,6]", "[2,4,5,1]"});
  }
  Graph g;
  SdpaInputs e;
  build(g, true, e, true, true);
  e.score_max->set_data_type(DataType::Int32);
  expect_invalid(g, {"sdpa 'attn'", "SCORE_MAX 'mx'", "floating", "INT32"});
}

TEST(SdpaScoreStats, WithStatsIsRefused) {
  Graph g;
  SdpaInputs e;
  build(g, false, e, true, true);
  expect_invalid(
      g,
      {"sdpa 'attn'", "STATS", "SCORE_MAX 'mx'", "SCORE_SUM_EXP 'se'", "are given together",
       "STATS alone, SCORE_MAX with SCORE_SUM_EXP, or none", "is_inference"},
      ErrorCode::NotSupported);
  Graph h;  // one of them with STATS
  SdpaInputs f;
  build(h, false, f, true, false);
  expect_invalid(h, {"STATS", "SCORE_MAX 'mx'", "are given together"}, ErrorCode::NotSupported);
}

TEST(SdpaScoreStats, OneWithoutTheOtherIsRefused) {
  for (bool max : {true, false}) {
    Graph g;
    SdpaInputs e;
    build(g, true, e, max, !max);
    expect_invalid(g,
                   {"sdpa 'attn'", max ? "SCORE_MAX 'mx'" : "SCORE_SUM_EXP 'se'", "is given alone",
                    "give both score_max and score_sum_exp"},
                   ErrorCode::NotSupported);
  }
}

TEST(SdpaScoreStats, BackwardHasNoSuchOutputs) {
  Graph b;
  auto [q, k, v] = qkv(b);
  SdpaInputs e;
  e.score_max = row_output(b, "mx");
  auto grads =
      b.sdpa_backward(q, k, v, make_input(b, "o", {2, 4, 5, 8}), make_input(b, "do", {2, 4, 5, 8}),
                      make_input(b, "stats", {2, 4, 5, 1}, DataType::Float), {}, e, {"attn_bwd"});
  for (int i = 0; i < 3; ++i) grads[i]->set_output(true);
  expect_invalid(b, {"attn_bwd", "SCORE_MAX"});
}

TEST(SdpaScoreStats, Fp8HasNoSuchOutputs) {
  Graph g;
  Tensor q = make_input(g, "q", {1, 2, 4, 16}, DataType::FP8_E4M3);
  Tensor k = make_input(g, "k", {1, 2, 4, 16}, DataType::FP8_E4M3);
  Tensor v = make_input(g, "v", {1, 2, 4, 16}, DataType::FP8_E4M3);
  SdpaFp8Scales sc;
  for (Tensor* t :
       {&sc.descale_q, &sc.descale_k, &sc.descale_v, &sc.descale_s, &sc.scale_s, &sc.scale_o})
    *t = make_input(g, "f", {1, 1, 1, 1}, DataType::Float);
  SdpaInputs e;
  e.score_sum_exp = row_output(g, "se");
  g.sdpa_fp8(q, k, v, sc, SdpaFp8Attrs{}, e, {"attn_fp8"})[0]->set_output(true);
  expect_invalid(g, {"attn_fp8", "SCORE_SUM_EXP"});
}

TEST(SdpaScoreStats, JsonAndFingerprintRoundTrip) {
  Graph g;
  SdpaInputs e;
  build(g, true, e, true, true);
  ASSERT_TRUE(g.validate().is_ok()) << g.validate().to_string();
  const std::string text = to_json(g);
  EXPECT_NE(text.find("SCORE_MAX"), std::string::npos);
  EXPECT_NE(text.find("SCORE_SUM_EXP"), std::string::npos);
  Graph loaded;
  testing::expect_json_round_trip(g, loaded);
  ASSERT_TRUE(loaded.validate().is_ok()) << loaded.validate().to_string();
  ASSERT_TRUE(loaded.nodes()[0].output(Role::SCORE_SUM_EXP));
  EXPECT_EQ(loaded.nodes()[0].output(Role::SCORE_SUM_EXP)->name, "se");

  Graph without;  // the same graph without the side outputs differs
  SdpaInputs none;
  build(without, true, none, false, false);
  ASSERT_TRUE(without.validate().is_ok());
  EXPECT_NE(fingerprint(without), fingerprint(g));
}

}  // namespace
}  // namespace dnngraph::ir
