// SDPA cases shared by the GPU tests (tests/gpu/sdpa*_test.cpp) and the GPU benchmarks
// (bench/gpu/bench_sdpa*.cpp): the graph of one case (forward or backward, masks, bias, ALiBi,
// sinks, padding) and the comparison options every bf16/fp16 SDPA check uses. No GoogleTest
// here (the benchmarks include it too).
//
// Inputs are uniform in [-1, 1] except STATS (backward), mapped to [0.5, 1.5] so that
// P = exp(S - STATS) has the magnitude of a real softmax row times a small factor, and the
// sequence lengths, set per batch item. Padded query rows of STATS (i >= SEQ_LEN_Q): cuDNN
// (>= 9.14) writes -inf there, as the reference does since 2026-12-02 (it wrote +inf before);
// the cases here compare them (checked on the H200, cuDNN 9.19), sdpa_options' callers may
// still leave them out.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "compare.hpp"

namespace dnngraph::gpu_test {

// Rewrites every FLOAT of an input's host bytes as f(value).
template <class F>
void map_floats(std::vector<unsigned char>& host, F f) {
  for (size_t off = 0; off + 4 <= host.size(); off += 4) {
    float v;
    std::memcpy(&v, host.data() + off, 4);
    v = f(v);
    std::memcpy(host.data() + off, &v, 4);
  }
}

// Writes `v` at the start of an INT32 input's host bytes.
inline void put_int32(std::vector<unsigned char>& host, const std::vector<int32_t>& v) {
  if (!v.empty()) std::memcpy(host.data(), v.data(), v.size() * sizeof(int32_t));
}

// The bf16/fp16 SDPA comparison: twice the default tolerance plus a floor (larger for the
// backward's gradients), STATS in [0.5, 1.5], and with lengths the SEQ_LEN_Q / SEQ_LEN_KV inputs
// set and, unless compare_padded_stats, the padded query rows of STATS left out.
inline CompareOptions sdpa_options(bool backward, std::vector<int32_t> len_q = {},
                                   std::vector<int32_t> len_kv = {},
                                   bool compare_padded_stats = false) {
  CompareOptions o;
  o.tol_scale = 2;
  o.min_abs = backward ? 0.15 : 2e-2;
  o.adjust_input = [len_q, len_kv](const ir::TensorAttrs& t, std::vector<unsigned char>& host) {
    if (t.name == "SEQ_LEN_Q") put_int32(host, len_q);
    if (t.name == "SEQ_LEN_KV") put_int32(host, len_kv);
    if (t.name == "STATS") map_floats(host, [](float f) { return 1.0f + 0.5f * f; });
  };
  if (!len_q.empty() && !compare_padded_stats) {
    o.skip = [len_q](const ir::TensorAttrs& t, const std::vector<int64_t>& idx) {
      return t.name == "STATS" && idx[2] >= len_q[static_cast<size_t>(idx[0])];
    };
  }
  return o;
}

// One SDPA graph: Q [b,hq,sq,d], K and V [b,hk,skv,d], scale 1/sqrt(d); the forward writes O and
// STATS (or SCORE_MAX and SCORE_SUM_EXP), the backward reads O, DO, STATS and writes DQ, DK, DV
// (and DBIAS / DSINK when asked).
struct SdpaCase {
  const char* name;
  DataType t = DataType::BFloat16;
  int64_t b = 2, hq = 4, hk = 4, sq = 128, skv = 128, d = 64;
  int64_t dv = 0;          // V's head dim when it differs from d (forward only)
  bool inference = false;  // forward without STATS
  bool causal = false;
  DiagonalAlignment align = DiagonalAlignment::TopLeft;
  std::optional<int64_t> left, right;
  std::vector<int32_t> len_q, len_kv;  // padding mask when set (one per batch item)
  bool backward = false;
  std::vector<int64_t> bias;  // BIAS dims when set (and DBIAS in the backward)
  bool alibi = false;         // alibi_mask (needs causal)
  bool stats_bshd = false;    // backward STATS input token-major ([b,s,h,1] in memory)
  bool sink = false;          // SINK [1,hq,1,1] FLOAT (and DSINK in the backward)
  // Forward in inference with SCORE_MAX / SCORE_SUM_EXP instead of STATS (the frontend's
  // score_max / score_sum_exp; cuDNN's composite softmax takes them only without Stats).
  bool score_rows = false;
  // Sets more of the node's optional inputs (e.g. score modifiers) on the graph being built.
  std::function<void(Graph&, ir::SdpaInputs&)> more_inputs = {};
};

// A case named `name`, forward or backward, the rest as SdpaCase defaults it.
inline SdpaCase sdpa_case(const char* name, bool backward) {
  SdpaCase c;
  c.name = name;
  c.backward = backward;
  return c;
}

inline std::function<void(Graph&)> make_graph(const SdpaCase& c) {
  return [c](Graph& g) {
    const DataType t = c.t;
    g.set_io_data_type(t);
    auto q = input(g, "Q", {c.b, c.hq, c.sq, c.d}, t);
    auto k = input(g, "K", {c.b, c.hk, c.skv, c.d}, t);
    const int64_t dv = c.dv ? c.dv : c.d;
    auto v = input(g, "V", {c.b, c.hk, c.skv, dv}, t);
    ir::SdpaOptions a;
    a.causal = c.causal;
    a.diagonal_alignment = c.align;
    a.left_bound = c.left;
    a.right_bound = c.causal ? std::optional<int64_t>(0) : c.right;
    a.attn_scale = 1.0 / std::sqrt(static_cast<double>(c.d));
    a.alibi_mask = c.alibi;
    ir::SdpaInputs extra;
    if (!c.bias.empty()) extra.bias = input(g, "BIAS", c.bias, t);
    if (!c.len_q.empty()) {
      a.padding_mask = true;
      extra.seq_len_q = input(g, "SEQ_LEN_Q", {c.b, 1, 1, 1}, DataType::Int32);
      extra.seq_len_kv = input(g, "SEQ_LEN_KV", {c.b, 1, 1, 1}, DataType::Int32);
    }
    if (c.sink) extra.sink_token = input(g, "SINK", {1, c.hq, 1, 1}, DataType::Float);
    if (c.score_rows) {
      extra.score_max = g.tensor(ir::TensorAttrs());
      extra.score_sum_exp = g.tensor(ir::TensorAttrs());
    }
    if (c.more_inputs) c.more_inputs(g, extra);
    if (!c.backward) {
      auto out = g.sdpa(q, k, v, ir::SdpaAttrs{a, c.score_rows || c.inference, {}}, extra);
      finish(out[0], "O", {c.b, c.hq, c.sq, dv}, t);
      finish(out[1], "STATS", {c.b, c.hq, c.sq, 1}, DataType::Float);
      finish(extra.score_max, "SCORE_MAX", {c.b, c.hq, c.sq, 1}, DataType::Float);
      finish(extra.score_sum_exp, "SCORE_SUM_EXP", {c.b, c.hq, c.sq, 1}, DataType::Float);
      return;
    }
    auto o = input(g, "O", {c.b, c.hq, c.sq, c.d}, t);
    auto d_o = input(g, "DO", {c.b, c.hq, c.sq, c.d}, t);
    auto stats = input(g, "STATS", {c.b, c.hq, c.sq, 1}, DataType::Float, c.stats_bshd);
    if (c.sink) extra.dsink_token = g.tensor(ir::TensorAttrs().set_name("DSINK"));
    auto out = g.sdpa_backward(q, k, v, o, d_o, stats, ir::SdpaBwdAttrs{a}, extra);
    finish(out[0], "DQ", {c.b, c.hq, c.sq, c.d}, t);
    finish(out[1], "DK", {c.b, c.hk, c.skv, c.d}, t);
    finish(out[2], "DV", {c.b, c.hk, c.skv, c.d}, t);
    if (out[3]) finish(out[3], "DBIAS", c.bias, t);
    if (c.sink) finish(extra.dsink_token, "DSINK", {1, c.hq, 1, 1}, DataType::Float);
  };
}

inline CompareOptions options(const SdpaCase& c) {
  return sdpa_options(c.backward, c.len_q, c.len_kv, /*compare_padded_stats=*/true);
}

// The record line of one run: "<tag> <label>: ok plan ..., N compared, M mismatches, ...".
inline void print_result(const char* tag, const std::string& label, const RunReport& r) {
  std::printf(
      "%s %s: %s plan %s, %lld compared, %lld mismatches, max abs err %.4g, "
      "%lld padded elements skipped (%lld differ from the reference%s%s)%s%s\n",
      tag, label.c_str(), r.status.is_ok() ? "ok" : r.status.to_string().c_str(),
      r.plan_name.c_str(), static_cast<long long>(r.compared), static_cast<long long>(r.mismatches),
      r.max_abs_err, static_cast<long long>(r.skipped),
      static_cast<long long>(r.skipped_mismatches), r.skipped_mismatches ? ", first: " : "",
      r.first_skipped_mismatch.c_str(), r.mismatches ? "; first mismatch: " : "",
      r.first_mismatch.c_str());
}

// Runs one case on both engines and prints its SDPA_RESULT line ("<name> <dtype>: ...").
inline RunReport run_case(const SdpaCase& c) {
  RunReport r = run_and_compare(make_graph(c), options(c));
  print_result("SDPA_RESULT", std::string(c.name) + " " + std::string(data_type_name(c.t)), r);
  return r;
}

}  // namespace dnngraph::gpu_test
