// FP8 attention (sdpa_fp8, sdpa_fp8_backward): inference of the outputs and the checks, each
// failure naming the op, the tensor and what was expected.
#include <gtest/gtest.h>

#include <array>

#include "ir/test_util.hpp"

namespace dnngraph::ir {
namespace {

using testing::expect_invalid;
using testing::make_input;

constexpr DataType kE4 = DataType::FP8_E4M3;
constexpr int64_t b = 2, hq = 4, hk = 2, sq = 8, skv = 16, d = 32;

Tensor factor(Graph& g, const std::string& name, DataType t = DataType::Float,
              std::vector<int64_t> dims = {1, 1, 1, 1}) {
  return make_input(g, name, std::move(dims), t);
}

// The factors, each made when first needed; `swap` replaces one (by role) before it is made.
SdpaFp8Scales scales(Graph& g, bool backward, Role swap = Role::X, Tensor with = nullptr) {
  auto f = [&](Role r, const char* name) { return r == swap ? with : factor(g, name); };
  SdpaFp8Scales sc;
  sc.descale_q = f(Role::DESCALE_Q, "dq"), sc.descale_k = f(Role::DESCALE_K, "dk");
  sc.descale_v = f(Role::DESCALE_V, "dv"), sc.descale_s = f(Role::DESCALE_S, "ds");
  sc.scale_s = f(Role::SCALE_S, "ss");
  if (!backward) {
    sc.scale_o = f(Role::SCALE_O, "so");
    return sc;
  }
  sc.descale_o = f(Role::DESCALE_O, "d_o"), sc.descale_do = f(Role::DESCALE_DO, "d_do");
  sc.descale_dp = f(Role::DESCALE_DP, "d_dp"), sc.scale_dq = f(Role::SCALE_DQ, "s_dq");
  sc.scale_dk = f(Role::SCALE_DK, "s_dk"), sc.scale_dv = f(Role::SCALE_DV, "s_dv");
  sc.scale_dp = f(Role::SCALE_DP, "s_dp");
  return sc;
}
SdpaFp8Scales forward_scales(Graph& g) { return scales(g, false); }
SdpaFp8Scales backward_scales(Graph& g) { return scales(g, true); }

struct Qkv {
  Tensor q, k, v;
};
Qkv qkv(Graph& g, DataType t = kE4) {
  return {make_input(g, "q", {b, hq, sq, d}, t), make_input(g, "k", {b, hk, skv, d}, t),
          make_input(g, "v", {b, hk, skv, d}, t)};
}

// sdpa_fp8_backward `name` of qkv(g), O (E4M3), dO of do_type and stats of stats_type; its first
// `outputs` outputs marked as outputs.
struct Bwd {
  Qkv in;
  std::array<Tensor, 7> out;
};
Bwd backward(Graph& g, DataType do_type, DataType stats_type, const char* name, int outputs) {
  Qkv in = qkv(g);
  Tensor o = make_input(g, "o", {b, hq, sq, d}, kE4);
  Tensor d_o = make_input(g, "dO", {b, hq, sq, d}, do_type);
  Tensor stats = make_input(g, "stats", {b, hq, sq, 1}, stats_type);
  auto r = g.sdpa_fp8_backward(in.q, in.k, in.v, o, d_o, stats, backward_scales(g),
                               SdpaFp8BwdAttrs{}, {}, {name});
  for (int i = 0; i < outputs; ++i) r[static_cast<size_t>(i)]->set_output(true);
  return {in, r};
}

TEST(SdpaFp8Infer, ForwardOutputs) {
  Graph g;
  auto [q, k, v] = qkv(g);
  SdpaFp8Attrs a;
  a.is_inference = false;
  a.causal = true;
  auto [o, stats, amax_s, amax_o] = g.sdpa_fp8(q, k, v, forward_scales(g), a, {}, {"attn"});
  o->set_output(true);
  stats->set_output(true);
  amax_o->set_output(true);
  Status s = g.validate();
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(o->dim, (std::vector<int64_t>{b, hq, sq, d}));
  EXPECT_EQ(o->data_type, kE4);  // Q's type unless set
  EXPECT_EQ(stats->dim, (std::vector<int64_t>{b, hq, sq, 1}));
  EXPECT_EQ(stats->data_type, DataType::Float);
  for (const Tensor& t : {amax_s, amax_o}) {
    EXPECT_EQ(t->dim, (std::vector<int64_t>{1, 1, 1, 1}));
    EXPECT_EQ(t->data_type, DataType::Float);
  }
  EXPECT_TRUE(amax_s->is_virtual);  // made by the builder, not read by the user
}

TEST(SdpaFp8Infer, InferenceHasNoStats) {
  Graph g;
  auto [q, k, v] = qkv(g);
  auto r = g.sdpa_fp8(q, k, v, forward_scales(g), SdpaFp8Attrs{}, {}, {"attn"});
  EXPECT_EQ(r[1], nullptr);
  r[0]->set_output(true);
  EXPECT_TRUE(g.validate().is_ok());
}

TEST(SdpaFp8Infer, BackwardOutputs) {
  Graph g;
  auto [in, r] = backward(g, DataType::FP8_E5M2, DataType::Float, "attn_bwd", 7);
  Status s = g.validate();
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(r[0]->dim, in.q->dim);
  EXPECT_EQ(r[1]->dim, in.k->dim);  // dK / dV keep the K / V head count (GQA)
  EXPECT_EQ(r[2]->dim, in.v->dim);
  for (int i = 3; i < 7; ++i) EXPECT_EQ(r[i]->dim, (std::vector<int64_t>{1, 1, 1, 1}));
}

TEST(SdpaFp8Check, InputsMustBeFp8) {
  Graph g;
  auto [q, k, v] = qkv(g, DataType::Half);
  g.sdpa_fp8(q, k, v, forward_scales(g), SdpaFp8Attrs{}, {}, {"attn"})[0]->set_output(true);
  expect_invalid(g, {"sdpa_fp8 'attn'", "Q 'q'", "FP8_E4M3 or FP8_E5M2", "HALF"});
}

TEST(SdpaFp8Check, FactorsAreOneFloat) {
  {
    Graph g;
    auto [q, k, v] = qkv(g);
    SdpaFp8Scales sc = scales(g, false, Role::DESCALE_K, factor(g, "dk_half", DataType::Half));
    g.sdpa_fp8(q, k, v, sc, SdpaFp8Attrs{}, {}, {"attn"})[0]->set_output(true);
    expect_invalid(g, {"sdpa_fp8 'attn'", "DESCALE_K 'dk_half'", "must be FLOAT"});
  }
  {
    Graph g;
    auto [q, k, v] = qkv(g);
    SdpaFp8Scales sc =
        scales(g, false, Role::SCALE_O, factor(g, "so_wide", DataType::Float, {1, 1, 1, 2}));
    g.sdpa_fp8(q, k, v, sc, SdpaFp8Attrs{}, {}, {"attn"})[0]->set_output(true);
    expect_invalid(g, {"SCALE_O 'so_wide'"});
  }
  {
    Graph g;
    auto [q, k, v] = qkv(g);
    SdpaFp8Scales sc = scales(g, false, Role::DESCALE_S, nullptr);
    g.sdpa_fp8(q, k, v, sc, SdpaFp8Attrs{}, {}, {"attn"})[0]->set_output(true);
    expect_invalid(g, {"sdpa_fp8 'attn'", "DESCALE_S"});
  }
}

TEST(SdpaFp8Check, AmaxIsFloat) {
  Graph g;
  auto [q, k, v] = qkv(g);
  auto r = g.sdpa_fp8(q, k, v, forward_scales(g), SdpaFp8Attrs{}, {}, {"attn"});
  r[0]->set_output(true);
  r[3]->set_output(true).set_data_type(DataType::Half);
  expect_invalid(g, {"sdpa_fp8 'attn'", "AMAX_O", "must be FLOAT", "HALF"});
}

TEST(SdpaFp8Check, NoBiasNoDropout) {
  {
    Graph g;
    auto [q, k, v] = qkv(g);
    SdpaInputs extra;
    extra.bias = make_input(g, "bias", {1, 1, sq, skv}, DataType::Float);
    g.sdpa_fp8(q, k, v, forward_scales(g), SdpaFp8Attrs{}, extra, {"attn"})[0]->set_output(true);
    expect_invalid(g, {"sdpa_fp8 'attn'", "BIAS"});
  }
  {
    Graph g;
    auto [q, k, v] = qkv(g);
    SdpaFp8Attrs a;
    a.dropout_probability = 0.1;
    g.sdpa_fp8(q, k, v, forward_scales(g), a, {}, {"attn"})[0]->set_output(true);
    expect_invalid(g, {"sdpa_fp8 'attn'", "dropout"}, ErrorCode::NotSupported);
  }
}

TEST(SdpaFp8Check, SharesSdpaShapeRules) {
  Graph g;
  Tensor q = make_input(g, "q", {b, 3, sq, d}, kE4);  // 3 heads: not a multiple of K's 2
  Tensor k = make_input(g, "k", {b, hk, skv, d}, kE4);
  Tensor v = make_input(g, "v", {b, hk, skv, d}, kE4);
  g.sdpa_fp8(q, k, v, forward_scales(g), SdpaFp8Attrs{}, {}, {"attn"})[0]->set_output(true);
  expect_invalid(g, {"sdpa_fp8 'attn'", "head count mismatch", "K 'k'"});
}

TEST(SdpaFp8Check, BackwardStatsAndGradientType) {
  {
    Graph g;
    backward(g, DataType::BFloat16, DataType::Float, "bwd", 3);
    expect_invalid(g, {"sdpa_fp8_backward 'bwd'", "DO 'dO'", "FP8", "BFLOAT16"});
  }
  {
    Graph g;
    backward(g, kE4, DataType::Half, "bwd", 3);
    expect_invalid(g, {"sdpa_fp8_backward 'bwd'", "STATS 'stats'", "FLOAT"});
  }
}

}  // namespace
}  // namespace dnngraph::ir
