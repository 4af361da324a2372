// Reference SDPA forward and backward on hand-made nodes: hand-worked values, naive fp64 loops
// (masks of every kind, padding, GQA/MQA, bias, scale sources, strided layouts, bf16/fp16,
// dropout) and central finite differences for the backward.
// The problem description, the naive loops and the node builders: sdpa_harness.hpp.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <random>

#include "reference/sdpa_harness.hpp"

namespace dnngraph::reference {
namespace {

using namespace sdpa_harness;  // NOLINT(build/namespaces)

// ------------------------------------------------------------------ tests
TEST(RefSdpa, HandWorked) {
  // q = [1, 2], k = [1, -1], v = [1, 3] (d = dv = 1), scale 1.
  auto run = [](ir::SdpaAttrs a, std::vector<double> q, std::vector<double>& o,
                std::vector<double>& lse) {
    const int64_t sq = static_cast<int64_t>(q.size());
    a.attn_scale = 1.0;
    a.is_inference = false;
    Case c(a);
    c.input(Role::Q, make_buf("q", {1, 1, sq, 1}, DataType::Double)).set(q);
    c.input(Role::K, make_buf("k", {1, 1, 2, 1}, DataType::Double)).set({1, -1});
    c.input(Role::V, make_buf("v", {1, 1, 2, 1}, DataType::Double)).set({1, 3});
    c.output(Role::O, make_buf("o", {1, 1, sq, 1}, DataType::Double));
    c.output(Role::STATS, make_buf("stats", {1, 1, sq, 1}, DataType::Double));
    Status s = c.run();
    ASSERT_TRUE(s.is_ok()) << s.message();
    o = c.result(Role::O);
    lse = c.result(Role::STATS);
  };
  const double e = std::exp(1.0), e2 = std::exp(2.0);
  std::vector<double> o, lse;
  run({}, {1, 2}, o, lse);  // row 0 scores [1,-1], row 1 scores [2,-2]
  expect_close(o, {(e + 3 / e) / (e + 1 / e), (e2 + 3 / e2) / (e2 + 1 / e2)}, 1e-14, "O");
  expect_close(lse, {std::log(e + 1 / e), std::log(e2 + 1 / e2)}, 1e-14, "STATS");

  ir::SdpaAttrs causal;
  causal.causal = true;
  run(causal, {1, 2}, o, lse);  // row 0 sees key 0 only
  expect_close(o, {1.0, (e2 + 3 / e2) / (e2 + 1 / e2)}, 1e-14, "O causal");
  expect_close(lse, {1.0, std::log(e2 + 1 / e2)}, 1e-14, "STATS causal");

  run(causal, {2}, o, lse);  // one query, top-left: key 0 only
  expect_close(o, {1.0}, 1e-14, "O causal top-left s_q=1");
  causal.diagonal_alignment = DiagonalAlignment::BottomRight;
  run(causal, {2}, o, lse);  // bottom-right: the query sits on the last key, sees both
  expect_close(o, {(e2 + 3 / e2) / (e2 + 1 / e2)}, 1e-14, "O causal bottom-right s_q=1");

  // The frontend's sliding window with right_bound 0: left_bound 1 keeps one key, the
  // diagonal (row 0: key 0, row 1: key 1); left_bound 2 keeps two (row 1 sees keys 0 and 1).
  ir::SdpaAttrs band;
  band.left_bound = 1;
  band.right_bound = 0;
  run(band, {1, 2}, o, lse);
  expect_close(o, {1.0, 3.0}, 1e-14, "O left_bound 1");
  expect_close(lse, {1.0, -2.0}, 1e-14, "STATS left_bound 1");
  band.left_bound = 2;
  run(band, {1, 2}, o, lse);
  expect_close(o, {1.0, (e2 + 3 / e2) / (e2 + 1 / e2)}, 1e-14, "O left_bound 2");
  band.right_bound.reset();  // left_bound 1 alone: row 1 loses key 0, row 0 keeps both
  band.left_bound = 1;
  run(band, {1, 2}, o, lse);
  expect_close(o, {(e + 3 / e) / (e + 1 / e), 3.0}, 1e-14, "O left_bound 1 alone");
}

TEST(RefSdpa, ForwardUnmasked) {
  Spec s;
  forward_case(s, 1, "plain, default scale");
  s.attr_scale = 0.3;
  forward_case(s, 2, "attribute scale");
  s.tensor_scale = 0.7;  // the tensor wins over the attribute
  forward_case(s, 3, "ATTN_SCALE tensor");
  s.left = s.right = std::numeric_limits<int64_t>::max();  // bounds that mask nothing
  forward_case(s, 4, "huge bounds");
}

TEST(RefSdpa, ForwardMasks) {
  for (bool br : {false, true})
    for (auto [sq, skv] : {std::pair<int64_t, int64_t>{5, 7}, {7, 5}, {6, 6}}) {
      Spec s;
      s.sq = sq, s.skv = skv, s.bottom_right = br;
      const std::string tag = std::string(br ? "bottom-right" : "top-left") + " sq " +
                              std::to_string(sq) + " skv " + std::to_string(skv);
      s.causal = true;
      forward_case(s, 10, "causal " + tag);
      s.causal = false, s.left = 3, s.right = 1;  // 3 keys ending on the diagonal, 1 after
      forward_case(s, 11, "window [-2, +1] " + tag);
      // (The IR refuses a negative right_bound, and causal with a right_bound other than 0.)
      s.left = 1, s.right = 0;  // the diagonal only
      forward_case(s, 12, "diagonal band " + tag);
      s.causal = true, s.right = 0, s.left = 2;  // causal with a sliding window of 2 keys
      forward_case(s, 13, "causal + left bound " + tag);
    }
}

TEST(RefSdpa, ForwardPaddingMask) {
  Spec s;
  s.sq = 6, s.skv = 7;
  s.len_q = {3, 6}, s.len_kv = {4, 7};
  forward_case(s, 20, "padding");
  s.causal = true, s.bottom_right = true;
  forward_case(s, 21, "padding + causal bottom-right");
  s.len_q = {5, 0};  // an empty batch entry
  s.len_kv = {2, 0};
  forward_case(s, 22, "padding with empty sequences");
  s.len_q = {s.sq, s.sq};  // the IR wants both lengths with padding_mask: full query rows
  s.len_kv = {1, 5};
  s.bottom_right = false;
  forward_case(s, 23, "kv padding only, causal top-left");
}

TEST(RefSdpa, ForwardGroupedHeads) {
  Spec s;
  s.hq = 4, s.hk = 2, s.hv = 2;
  forward_case(s, 30, "GQA 4/2");
  s.hk = 1, s.hv = 1;
  forward_case(s, 31, "MQA");
  s.hk = 2, s.hv = 1, s.causal = true;
  forward_case(s, 32, "K 2 heads, V 1 head, causal");
}

TEST(RefSdpa, ForwardBias) {
  Spec s;
  s.hq = 4, s.hk = 2, s.hv = 2;
  s.bias_dims = {1, 4, 5, 7};
  forward_case(s, 40, "bias [1,h,sq,skv]");
  s.bias_dims = {2, 1, 5, 7};
  s.tensor_scale = 0.5;
  s.causal = true;
  forward_case(s, 41, "bias [b,1,sq,skv], causal");
  s.bias_dims = {1, 1, 1, 7};
  forward_case(s, 42, "bias [1,1,1,skv]");
}

TEST(RefSdpa, ForwardStridedAndLowPrecision) {
  Spec s;
  s.bshd = true, s.hq = 4, s.hk = 2, s.hv = 2, s.causal = true;
  forward_case(s, 50, "BSHD strides");
  for (DataType t : {DataType::BFloat16, DataType::Half}) {
    s.io = t;
    s.bias_dims = {1, 4, 5, 7};
    forward_case(s, 51, std::string(data_type_name(t)));
  }
}

TEST(RefSdpa, FullyMaskedRowsGiveZeroAndMinusInfiniteStats) {
  Spec s;
  s.b = 1, s.hq = 1, s.hk = 1, s.hv = 1, s.sq = 4, s.skv = 4;
  s.bottom_right = true, s.right = 0;  // diagonal i + (2 - 3): row 0 has no key
  s.len_q = {3};                       // row 3 is padding
  s.len_kv = {2};
  std::mt19937 gen(60);
  Inputs in;
  Case c = forward_node(s, false, gen, in);
  ASSERT_TRUE(c.run().is_ok());
  const auto o = c.result(Role::O), lse = c.result(Role::STATS);
  for (int64_t row : {0, 3}) {
    EXPECT_EQ(lse[row], -std::numeric_limits<double>::infinity()) << row;  // as cuDNN
    for (int64_t k = 0; k < s.dv; ++k) EXPECT_EQ(o[row * s.dv + k], 0.0) << row;
  }
  for (int64_t row : {1, 2}) EXPECT_TRUE(std::isfinite(lse[row])) << row;
}

TEST(RefSdpa, InferenceWritesOnlyO) {
  Spec s;
  s.causal = true;
  std::mt19937 gen(61);
  Inputs in;
  Case c = forward_node(s, true, gen, in);
  ASSERT_EQ(c.node.outputs.size(), 1u);
  ASSERT_TRUE(c.run().is_ok());
  expect_close(c.result(Role::O), naive_forward(s, in).o, 1e-5, "O");
}

TEST(RefSdpa, DropoutHashIsUniformAndKeyed) {
  const double p = 0.3;
  int dropped = 0, total = 0;
  for (int64_t h = 0; h < 4; ++h)
    for (int64_t i = 0; i < 100; ++i)
      for (int64_t j = 0; j < 100; ++j, ++total)
        dropped += sdpa_dropout_uniform(7, 3, 1, h, i, j) < p;
  EXPECT_NEAR(static_cast<double>(dropped) / total, p, 0.01);
  // Every coordinate changes the draw.
  const double u = sdpa_dropout_uniform(7, 3, 1, 2, 3, 4);
  EXPECT_NE(u, sdpa_dropout_uniform(8, 3, 1, 2, 3, 4));
  EXPECT_NE(u, sdpa_dropout_uniform(7, 4, 1, 2, 3, 4));
  EXPECT_NE(u, sdpa_dropout_uniform(7, 3, 0, 2, 3, 4));
  EXPECT_NE(u, sdpa_dropout_uniform(7, 3, 1, 1, 3, 4));
  EXPECT_NE(u, sdpa_dropout_uniform(7, 3, 1, 2, 4, 4));
  EXPECT_NE(u, sdpa_dropout_uniform(7, 3, 1, 2, 3, 5));
}

TEST(RefSdpa, ForwardDropout) {
  Spec s;
  s.dropout = 0.25, s.seed = 1234, s.offset = 5, s.causal = true;
  forward_case(s, 70, "dropout");
  // Same inputs, other seed: a different output; same seed: the same output.
  auto run_with = [&](int64_t seed) {
    Spec t = s;
    t.seed = seed;
    std::mt19937 gen(71);
    Inputs in;
    Case c = forward_node(t, true, gen, in);
    EXPECT_TRUE(c.run().is_ok());
    return c.result(Role::O);
  };
  EXPECT_EQ(run_with(1), run_with(1));
  EXPECT_NE(run_with(1), run_with(2));
}

TEST(RefSdpa, BackwardMatchesNaive) {
  Spec s;
  backward_case(s, 80, "plain");
  s.hq = 4, s.hk = 2, s.hv = 2, s.causal = true;
  backward_case(s, 81, "GQA, causal top-left");
  s.hk = 1, s.hv = 1, s.bias_dims = {1, 4, 5, 7}, s.tensor_scale = 0.4;
  backward_case(s, 82, "MQA, bias [1,h,sq,skv]");
  s.hk = 2, s.hv = 2, s.causal = false, s.bottom_right = true, s.left = 1, s.right = 0;
  s.len_q = {4, 5}, s.len_kv = {6, 3}, s.bias_dims = {2, 1, 5, 7};
  backward_case(s, 83, "padding, window bottom-right, bias [b,1,sq,skv]");
  s.bshd = true, s.right = 0, s.bias_dims = {1, 1, 5, 1};  // batch 1's rows 0, 1 see no key
  backward_case(s, 84, "BSHD, empty rows, bias [1,1,sq,1]");
  s.bshd = false, s.dropout = 0.2, s.seed = 99, s.offset = 1;
  backward_case(s, 85, "dropout");
}

TEST(RefSdpa, BackwardLowPrecision) {
  Spec s;
  s.hq = 4, s.hk = 2, s.hv = 2, s.causal = true, s.bias_dims = {1, 4, 5, 7};
  s.io = DataType::BFloat16;
  backward_case(s, 90, "bf16");
  s.io = DataType::Half;
  backward_case(s, 91, "fp16");
}

TEST(RefSdpa, BackwardMatchesFiniteDifferences) {
  Spec s;
  s.b = 2, s.hq = 2, s.hk = 1, s.hv = 1, s.sq = 3, s.skv = 4, s.d = 2, s.dv = 2;
  s.causal = true, s.bottom_right = true;
  s.len_q = {3, 2}, s.len_kv = {4, 3};
  s.bias_dims = {1, 2, 3, 4};
  finite_difference_case(s, 100, "GQA, padding, causal bottom-right, bias");
  s.len_q.clear(), s.len_kv.clear();
  s.hk = 2, s.hv = 2, s.causal = false, s.bottom_right = false, s.left = 1;
  s.dropout = 0.3, s.seed = 5, s.offset = 11;
  s.bias_dims = {2, 1, 3, 4};
  finite_difference_case(s, 101, "window, dropout, bias [b,1,sq,skv]");
}

// use_alibi_mask: slope[h] * (j - i) added after the bias, the frontend's slopes written out by
// hand (3 heads: n = 2 gives 2^-4, 2^-8, then 2^-2; 6 heads: n = 4 gives 2^-2 .. 2^-8, then
// 2^-1, 2^-3).
TEST(RefSdpa, AlibiMatchesNaive) {
  Spec s;
  s.hq = 3, s.hk = 3, s.hv = 3, s.causal = true;
  s.alibi = {0x1p-4, 0x1p-8, 0x1p-2};
  forward_case(s, 120, "alibi, 3 heads");
  backward_case(s, 121, "alibi, 3 heads");
  s.hq = 6, s.hk = 2, s.hv = 1, s.left = 3, s.bias_dims = {1, 6, 5, 7}, s.bshd = true;
  s.alibi = {0x1p-2, 0x1p-4, 0x1p-6, 0x1p-8, 0x1p-1, 0x1p-3};
  forward_case(s, 122, "alibi, GQA, window, bias, BSHD");
  backward_case(s, 123, "alibi, GQA, window, bias, BSHD");
  s.bshd = false, s.len_q = {4, 5}, s.len_kv = {6, 3}, s.dropout = 0.2, s.seed = 3, s.offset = 4;
  forward_case(s, 124, "alibi, padding, dropout");
  backward_case(s, 125, "alibi, padding, dropout");
  Spec f;
  f.b = 1, f.hq = 2, f.hk = 2, f.hv = 2, f.sq = 3, f.skv = 4, f.d = 2, f.dv = 2, f.causal = true;
  f.alibi = {0x1p-4, 0x1p-8};
  finite_difference_case(f, 126, "alibi");
}

// The seed tutorial's causal attention at a reduced size, large enough for the threaded path.
TEST(RefSdpa, ThreadedPathMatchesNaive) {
  Spec s;
  s.b = 2, s.hq = 4, s.hk = 2, s.hv = 2, s.sq = 64, s.skv = 64, s.d = 32, s.dv = 32;
  s.causal = true;
  forward_case(s, 120, "b2 h4 s64 d32 causal, GQA");
  s.bias_dims = {1, 4, 64, 64};
  backward_case(s, 121, "b2 h4 s64 d32 causal, GQA, bias");
}

TEST(RefSdpa, Errors) {
  Spec s;
  s.hq = 3, s.hk = 2;
  std::mt19937 gen(110);
  Inputs in;
  Case c = forward_node(s, false, gen, in);
  Status st = ref_test::validate_node(c.node);
  EXPECT_EQ(st.code(), ErrorCode::InvalidGraph);
  EXPECT_NE(st.message().find("sdpa0"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("'q'"), std::string::npos) << st.message();

  Spec p;
  p.len_q = {3, 9};  // longer than s_q = 5
  p.len_kv = {7, 7};
  Case d = forward_node(p, false, gen, in);
  st = d.run();
  EXPECT_EQ(st.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(st.message().find("'seq_q'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("9"), std::string::npos) << st.message();

  Spec q;
  q.dropout = 0.1;  // without SEED / OFFSET tensors
  Case e = forward_node(q, false, gen, in);
  std::erase_if(e.node.inputs, [](const ir::Port& port) { return port.role == Role::SEED; });
  st = ref_test::validate_node(e.node);
  EXPECT_EQ(st.code(), ErrorCode::InvalidGraph);
  EXPECT_NE(st.message().find("SEED"), std::string::npos) << st.message();
}

// ------------------------------------------------------------------ through dnngraph::Graph
// The seed tutorial's causal attention (fp16 io, fp32 compute) at b2 h4 s64 d32, forward in
// training mode, then the backward graph fed with its O and STATS.
TEST(RefSdpaGraph, TutorialCausalForwardAndBackward) {
  Spec s;
  s.b = 2, s.hq = s.hk = s.hv = 4, s.sq = s.skv = 64, s.d = s.dv = 32;
  s.causal = true, s.io = DataType::Half;
  s.attr_scale = 1.0 / std::sqrt(32.0);
  const Shapes sh(s);
  std::mt19937 gen(200);
  Inputs in;
  auto [qb, kb, vb] = qkv_bufs(s, sh, gen, in);

  Graph fwd;
  fwd.set_name("sdpa").set_io_data_type(s.io).set_compute_data_type(DataType::Float);
  ir::Tensor q = graph_tensor(fwd, qb, 1), k = graph_tensor(fwd, kb, 2),
             v = graph_tensor(fwd, vb, 3);
  auto [o, stats] = fwd.sdpa(q, k, v, s.attrs(false), {}, {.name = "sdpa"});
  Buf ob = poisoned("O", sh.o, s.io), sb = poisoned("STATS", sh.stats, DataType::Float);
  mark_output(o, ob, 4);
  mark_output(stats, sb, 5);
  Status st = build_and_run(
      fwd, {{1, qb.data()}, {2, kb.data()}, {3, vb.data()}, {4, ob.data()}, {5, sb.data()}});
  ASSERT_TRUE(st.is_ok()) << st.message();
  const Fwd f = naive_forward(s, in);
  expect_close(ob.get(), f.o, tol_of(s.io), "O");
  expect_close(sb.get(), f.lse, 1e-5, "STATS");

  Graph bwd;
  bwd.set_name("sdpa_backward").set_io_data_type(s.io).set_compute_data_type(DataType::Float);
  Buf dob = make_buf("dO", sh.o, s.io);
  const auto d_o = dob.fill(gen, -1, 1);
  ir::SdpaBwdAttrs a;
  static_cast<ir::SdpaOptions&>(a) = s.attrs(false);
  auto grads = bwd.sdpa_backward(graph_tensor(bwd, qb, 1), graph_tensor(bwd, kb, 2),
                                 graph_tensor(bwd, vb, 3), graph_tensor(bwd, ob, 4),
                                 graph_tensor(bwd, dob, 6), graph_tensor(bwd, sb, 5), a);
  Buf dqb = poisoned("dQ", sh.q, s.io), dkb = poisoned("dK", sh.k, s.io),
      dvb = poisoned("dV", sh.v, s.io);
  mark_output(grads[0], dqb, 7);
  mark_output(grads[1], dkb, 8);
  mark_output(grads[2], dvb, 9);
  st = build_and_run(bwd, {{1, qb.data()},
                           {2, kb.data()},
                           {3, vb.data()},
                           {4, ob.data()},
                           {5, sb.data()},
                           {6, dob.data()},
                           {7, dqb.data()},
                           {8, dkb.data()},
                           {9, dvb.data()}});
  ASSERT_TRUE(st.is_ok()) << st.message();
  const Bwd g = naive_backward(s, in, ob.get(), d_o, sb.get());
  expect_close(dqb.get(), g.dq, tol_of(s.io), "DQ");
  expect_close(dkb.get(), g.dk, tol_of(s.io), "DK");
  expect_close(dvb.get(), g.dv, tol_of(s.io), "DV");
}

// GQA with a padding mask and a bias through the whole pipeline (fp32).
TEST(RefSdpaGraph, GroupedPaddedWithBias) {
  Spec s;
  s.hq = 4, s.hk = 2, s.hv = 2, s.causal = true, s.bottom_right = true;
  s.len_q = {4, 5}, s.len_kv = {6, 7}, s.bias_dims = {1, 4, 5, 7};
  const Shapes sh(s);
  std::mt19937 gen(201);
  Inputs in;
  auto [qb, kb, vb] = qkv_bufs(s, sh, gen, in);
  Buf bb = make_buf("bias", s.bias_dims, s.io);
  Buf lq = make_buf("seq_q", {s.b, 1, 1, 1}, DataType::Int32);
  Buf lkv = make_buf("seq_kv", {s.b, 1, 1, 1}, DataType::Int32);
  lq.set({4, 5});
  lkv.set({6, 7});
  in.bias = bb.fill(gen, -1, 1);

  Graph g;
  g.set_io_data_type(s.io).set_compute_data_type(DataType::Float);
  ir::SdpaInputs extra;
  extra.bias = graph_tensor(g, bb, 4);
  extra.seq_len_q = graph_tensor(g, lq, 5);
  extra.seq_len_kv = graph_tensor(g, lkv, 6);
  auto [o, stats] = g.sdpa(graph_tensor(g, qb, 1), graph_tensor(g, kb, 2), graph_tensor(g, vb, 3),
                           s.attrs(false), extra);
  Buf ob = poisoned("O", sh.o, s.io), sb = poisoned("STATS", sh.stats, DataType::Float);
  mark_output(o, ob, 7);
  mark_output(stats, sb, 8);
  Status st = build_and_run(g, {{1, qb.data()},
                                {2, kb.data()},
                                {3, vb.data()},
                                {4, bb.data()},
                                {5, lq.data()},
                                {6, lkv.data()},
                                {7, ob.data()},
                                {8, sb.data()}});
  ASSERT_TRUE(st.is_ok()) << st.message();
  const Fwd f = naive_forward(s, in);
  expect_close(ob.get(), f.o, 1e-5, "O");
  expect_close(sb.get(), f.lse, 1e-5, "STATS");
}

}  // namespace
}  // namespace dnngraph::reference
