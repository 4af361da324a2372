// Scaled dot-product attention inference and checks (forward and backward).
#include <gtest/gtest.h>

#include <cmath>

#include "ir/test_util.hpp"

namespace dnngraph::ir {
namespace {

using testing::expect_invalid;
using testing::make_input;

// [b, s, h, d] storage viewed as [b, h, s, d] (the usual BSHD layout).
std::vector<int64_t> bshd_strides(int64_t h, int64_t s, int64_t d) {
  return {s * h * d, d, h * d, 1};
}

TEST(SdpaInfer, GqaTrainingFollowsQLayout) {
  Graph g;
  g.set_io_data_type(DataType::BFloat16);
  const int64_t b = 2, hq = 8, hk = 2, sq = 5, skv = 7, d = 16, dv = 32;
  Tensor q = make_input(g, "q", {b, hq, sq, d}, DataType::BFloat16, bshd_strides(hq, sq, d));
  Tensor k = make_input(g, "k", {b, hk, skv, d}, DataType::BFloat16);
  Tensor v = make_input(g, "v", {b, 1, skv, dv}, DataType::BFloat16);  // MQA for V
  SdpaAttrs a;
  a.is_inference = false;
  a.causal = true;
  a.diagonal_alignment = DiagonalAlignment::BottomRight;
  auto [o, stats] = g.sdpa(q, k, v, a, {}, {"attn"});
  o->set_output(true);
  stats->set_output(true);
  ASSERT_TRUE(g.validate().is_ok()) << g.validate().to_string();
  EXPECT_EQ(o->dim, (std::vector<int64_t>{b, hq, sq, dv}));
  EXPECT_EQ(o->stride, bshd_strides(hq, sq, dv));
  EXPECT_EQ(o->data_type, DataType::BFloat16);
  EXPECT_EQ(stats->dim, (std::vector<int64_t>{b, hq, sq, 1}));
  // STATS does not follow Q's layout: packed [b, h, s_q, 1], as the frontend fills it and as
  // users allocate it.
  EXPECT_EQ(stats->stride, (std::vector<int64_t>{hq * sq, sq, 1, 1}));
  EXPECT_EQ(stats->data_type, DataType::Float);
}

TEST(SdpaInfer, StatsKeepsTheStridesTheUserSet) {
  Graph g;
  const int64_t b = 2, h = 3, s = 4, d = 8;
  Tensor q = make_input(g, "q", {b, h, s, d}, DataType::Float, bshd_strides(h, s, d));
  Tensor k = make_input(g, "k", {b, h, s, d}, DataType::Float);
  Tensor v = make_input(g, "v", {b, h, s, d}, DataType::Float);
  SdpaAttrs a;
  a.is_inference = false;
  auto [o, stats] = g.sdpa(q, k, v, a, {}, {"attn"});
  o->set_output(true);
  // [b, s, h, 1] in memory (token-major), set by the user: kept as given.
  stats->set_output(true).set_dim({b, h, s, 1}).set_stride({s * h, 1, h, 1});
  ASSERT_TRUE(g.validate().is_ok()) << g.validate().to_string();
  EXPECT_EQ(stats->stride, (std::vector<int64_t>{s * h, 1, h, 1}));
}

TEST(SdpaInfer, OptionalInputs) {
  Graph g;
  g.set_io_data_type(DataType::Half);
  Tensor q = make_input(g, "q", {2, 4, 5, 8});
  Tensor k = make_input(g, "k", {2, 4, 6, 8});
  Tensor v = make_input(g, "v", {2, 4, 6, 8});
  SdpaInputs extra;
  extra.bias = make_input(g, "bias", {1, 4, 5, 6});
  extra.seq_len_q = make_input(g, "slq", {2, 1, 1, 1}, DataType::Int32);
  extra.seq_len_kv = make_input(g, "slkv", {2, 1, 1, 1}, DataType::Int32);
  extra.seed = g.scalar(Scalar::of_int(42), "seed");
  extra.offset = g.scalar(Scalar::of_int(0), "offset");
  extra.attn_scale = g.scalar(Scalar::of_float(0.125), "scale");
  SdpaAttrs a;
  a.dropout_probability = 0.1;
  a.left_bound = 3;
  auto [o, stats] = g.sdpa(q, k, v, a, extra, {"attn"});
  o->set_output(true);
  EXPECT_EQ(stats, nullptr);
  ASSERT_TRUE(g.validate().is_ok()) << g.validate().to_string();
  EXPECT_TRUE(g.nodes()[0].as<SdpaAttrs>().padding_mask);
}

TEST(SdpaInfer, HeadMismatch) {
  Graph g;
  Tensor q = make_input(g, "query", {2, 6, 5, 8});
  Tensor k = make_input(g, "key", {2, 4, 5, 8});
  Tensor v = make_input(g, "value", {2, 4, 5, 8});
  g.sdpa(q, k, v, {}, {}, {"attn"})[0]->set_output(true);
  expect_invalid(g, {"sdpa 'attn'", "head count", "Q 'query' has 6", "K 'key'", "4 heads"});
}

TEST(SdpaInfer, ShapeMismatches) {
  struct Case {
    std::vector<int64_t> q, k, v;
    std::vector<int64_t> bias;  // none when empty
    std::vector<std::string> parts;
  };
  const Case cases[] = {
      {{2, 4, 5, 8},
       {2, 4, 5, 16},
       {2, 4, 5, 8},
       {},
       {"sdpa 'attn'", "head dim", "'query' has d=8", "'key' has d=16"}},
      {{2, 4, 5, 8},
       {3, 4, 5, 8},
       {2, 4, 5, 8},
       {},
       {"sdpa 'attn'", "batch", "'query' has b=2", "'key' has b=3"}},
      {{2, 4, 5, 8},
       {2, 4, 5, 8},
       {2, 4, 6, 8},
       {},
       {"sdpa 'attn'", "'key' has s_kv=5", "'value' has 6"}},
      {{2, 4, 5, 8},
       {2, 4, 6, 8},
       {2, 4, 6, 8},
       {1, 4, 5, 5},
       {"sdpa 'attn'", "BIAS 'bad_bias'", "[1,4,5,5]", "[2,4,5,6]"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.parts[1]);
    Graph g;
    Tensor q = make_input(g, "query", c.q);
    Tensor k = make_input(g, "key", c.k);
    Tensor v = make_input(g, "value", c.v);
    SdpaInputs extra;
    if (!c.bias.empty()) extra.bias = make_input(g, "bad_bias", c.bias);
    g.sdpa(q, k, v, {}, extra, {"attn"})[0]->set_output(true);
    expect_invalid(g, c.parts);
  }
}

TEST(SdpaInfer, OptionChecks) {
  auto build = [](Graph& g, SdpaAttrs a, SdpaInputs extra) {
    Tensor q = make_input(g, "q", {2, 4, 5, 8});
    Tensor k = make_input(g, "k", {2, 4, 5, 8});
    Tensor v = make_input(g, "v", {2, 4, 5, 8});
    g.sdpa(q, k, v, a, extra, {"attn"})[0]->set_output(true);
  };
  {
    Graph g;
    SdpaAttrs a;
    a.dropout_probability = 0.2;
    build(g, a, {});
    expect_invalid(g, {"sdpa 'attn'", "dropout needs inputs SEED", "missing SEED"});
  }
  {
    Graph g;
    SdpaAttrs a;
    a.dropout_probability = 1.0;
    build(g, a, {});
    expect_invalid(g, {"sdpa 'attn'", "dropout_probability 1", "[0, 1)"});
  }
  {
    Graph g;
    SdpaAttrs a;
    a.padding_mask = true;
    build(g, a, {});
    expect_invalid(g, {"sdpa 'attn'", "padding_mask needs input SEQ_LEN_Q"});
  }
  {
    Graph g;
    SdpaInputs extra;
    extra.seq_len_q = make_input(g, "lens_q", {2, 1, 1, 1}, DataType::Half);
    extra.seq_len_kv = make_input(g, "lens_kv", {2, 1, 1, 1}, DataType::Int32);
    build(g, {}, extra);
    expect_invalid(g, {"sdpa 'attn'", "SEQ_LEN_Q 'lens_q'", "integer", "HALF"});
  }
  {
    Graph g;
    SdpaAttrs a;
    a.left_bound = -1;
    build(g, a, {});
    expect_invalid(g, {"sdpa 'attn'", "left_bound -1"});
  }
  {
    Graph g;
    SdpaAttrs a;
    a.causal = true;
    a.right_bound = 2;
    build(g, a, {});
    expect_invalid(g, {"sdpa 'attn'", "right_bound is 2"});
  }
}

TEST(SdpaInfer, AlibiRules) {
  auto build = [](Graph& g, SdpaAttrs a) {
    Tensor q = make_input(g, "q", {2, 4, 5, 8});
    Tensor k = make_input(g, "k", {2, 4, 5, 8});
    Tensor v = make_input(g, "v", {2, 4, 5, 8});
    g.sdpa(q, k, v, a, {}, {"attn"})[0]->set_output(true);
  };
  SdpaAttrs a;
  a.alibi_mask = true;
  {
    Graph g;
    build(g, a);
    expect_invalid(g, {"sdpa 'attn'", "use_alibi_mask needs causal", "no causal mask is set"},
                   ErrorCode::NotSupported);
  }
  {
    Graph g;
    SdpaAttrs b = a;
    b.right_bound = 3;
    build(g, b);
    expect_invalid(g, {"sdpa 'attn'", "use_alibi_mask", "right_bound is 3"},
                   ErrorCode::NotSupported);
  }
  {
    Graph g;
    SdpaAttrs b = a;
    b.causal = true;
    b.diagonal_alignment = DiagonalAlignment::BottomRight;
    build(g, b);
    expect_invalid(g, {"sdpa 'attn'", "use_alibi_mask needs the top-left", "BOTTOM_RIGHT"},
                   ErrorCode::NotSupported);
  }
  for (auto causal : {true, false}) {
    Graph g;
    SdpaAttrs b = a;
    if (causal)
      b.causal = true;
    else
      b.right_bound = 0;  // the frontend's other spelling
    b.left_bound = 2;
    build(g, b);
    EXPECT_TRUE(g.validate().is_ok()) << g.validate().to_string();
  }
}

TEST(SdpaInfer, AlibiSlopesAsTheFrontendDefinesThem) {
  // n = largest power of two <= heads; 2^(-8 i / n), i = 1..n; then 2^(-8 (i - 1/2) / n).
  EXPECT_EQ(sdpa_alibi_slopes(1), (std::vector<double>{0x1p-8}));
  EXPECT_EQ(sdpa_alibi_slopes(4), (std::vector<double>{0x1p-2, 0x1p-4, 0x1p-6, 0x1p-8}));
  EXPECT_EQ(sdpa_alibi_slopes(6),
            (std::vector<double>{0x1p-2, 0x1p-4, 0x1p-6, 0x1p-8, 0x1p-1, 0x1p-3}));
  const std::vector<double> s12 = sdpa_alibi_slopes(12);  // n = 8: 2^-i then 2^-(2i-1)/2
  ASSERT_EQ(s12.size(), 12u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(s12[static_cast<size_t>(i)], std::ldexp(1.0, -(i + 1)));
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(s12[static_cast<size_t>(8 + i)], std::pow(2.0, -(i + 0.5)), 1e-7);
  EXPECT_TRUE(sdpa_alibi_slopes(0).empty());
}

TEST(SdpaInfer, Backward) {
  Graph g;
  g.set_io_data_type(DataType::Half);
  const int64_t b = 2, hq = 4, hk = 2, s = 6, d = 8;
  Tensor q = make_input(g, "q", {b, hq, s, d}, DataType::Half, bshd_strides(hq, s, d));
  Tensor k = make_input(g, "k", {b, hk, s, d}, DataType::Half, bshd_strides(hk, s, d));
  Tensor v = make_input(g, "v", {b, hk, s, d});
  Tensor o = make_input(g, "o", {b, hq, s, d});
  Tensor d_o = make_input(g, "do", {b, hq, s, d});
  Tensor stats = make_input(g, "stats", {b, hq, s, 1}, DataType::Float);
  SdpaInputs extra;
  extra.bias = make_input(g, "bias", {1, hq, s, s});
  SdpaBwdAttrs a;
  a.causal = true;
  auto grads = g.sdpa_backward(q, k, v, o, d_o, stats, a, extra, {"attn_bwd"});
  for (auto& t : grads) t->set_output(true);
  ASSERT_TRUE(g.validate().is_ok()) << g.validate().to_string();
  EXPECT_EQ(grads[0]->dim, q->dim);
  EXPECT_EQ(grads[0]->stride, q->stride);
  EXPECT_EQ(grads[1]->dim, k->dim);
  EXPECT_EQ(grads[1]->stride, k->stride);
  EXPECT_EQ(grads[2]->dim, v->dim);
  EXPECT_EQ(grads[2]->stride, (std::vector<int64_t>{hk * s * d, s * d, d, 1}));
  EXPECT_EQ(grads[3]->dim, extra.bias->dim);

  Graph g2;
  Tensor q2 = make_input(g2, "q", {2, 4, 6, 8});
  Tensor k2 = make_input(g2, "k", {2, 4, 6, 8});
  Tensor v2 = make_input(g2, "v", {2, 4, 6, 8});
  Tensor o2 = make_input(g2, "o", {2, 4, 6, 8});
  Tensor do2 = make_input(g2, "dO", {2, 4, 6, 8});
  Tensor st2 = make_input(g2, "lse", {2, 4, 6, 8});
  auto g2s = g2.sdpa_backward(q2, k2, v2, o2, do2, st2, {}, {}, {"bwd"});
  for (int i = 0; i < 3; ++i) g2s[i]->set_output(true);
  expect_invalid(g2, {"sdpa_backward 'bwd'", "STATS 'lse'", "[2,4,6,8]", "[2,4,6,1]"});
}

}  // namespace
}  // namespace dnngraph::ir
