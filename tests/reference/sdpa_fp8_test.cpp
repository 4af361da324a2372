// sdpa_fp8 / sdpa_fp8_backward on the reference engine: a hand-worked forward, and random
// problems (masks, padding, GQA, both FP8 types, FP8 and float outputs) against naive fp64
// loops written from the definition in include/dnngraph/ir/ops.hpp (SdpaFp8Attrs), with the
// same FP8 rounding of P and dS. Outputs are poisoned (NaN) before the run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <vector>

#include "common/ref_harness.hpp"
#include "dnngraph/dnngraph.hpp"
#include "engines/reference/kernel.hpp"

namespace {

using dnngraph::DataType;
using dnngraph::DiagonalAlignment;
using dnngraph::ir::Role;
using dnngraph::ir::Tensor;
using dnngraph::ir::TensorAttrs;
using dnngraph::reference::round_to;

constexpr DataType kE4 = DataType::FP8_E4M3, kE5 = DataType::FP8_E5M2, kF32 = DataType::Float;

Tensor input(dnngraph::Graph& g, const std::string& name, std::vector<int64_t> dims, DataType t) {
  const std::vector<int64_t> st = ref_test::packed(dims);
  return g.tensor(
      TensorAttrs().set_name(name).set_dim(std::move(dims)).set_stride(st).set_data_type(t));
}

// The factors by role; values chosen per test.
using Factors = std::map<Role, double>;

struct Spec {
  int64_t b = 2, hq = 2, hk = 2, sq = 5, skv = 7, d = 16, dv = 16;
  bool causal = false, bottom_right = false;
  std::optional<int64_t> left;
  std::vector<int64_t> len_q, len_kv;
  double attn_scale = 0.25;
  DataType in = kE4, grad = kE4, out = kF32;  // Q/K/V; DO; O and dQ/dK/dV
  Factors f = {{Role::DESCALE_Q, 0.5},      {Role::DESCALE_K, 1.5},   {Role::DESCALE_V, 0.75},
               {Role::DESCALE_S, 1 / 64.0}, {Role::SCALE_S, 64.0},    {Role::SCALE_O, 2.0},
               {Role::DESCALE_O, 0.5},      {Role::DESCALE_DO, 0.25}, {Role::DESCALE_DP, 1 / 32.0},
               {Role::SCALE_DQ, 4.0},       {Role::SCALE_DK, 0.5},    {Role::SCALE_DV, 3.0},
               {Role::SCALE_DP, 32.0}};

  bool allowed(int64_t bi, int64_t i, int64_t j) const {
    const int64_t lq = len_q.empty() ? sq : len_q[bi], lkv = len_kv.empty() ? skv : len_kv[bi];
    if (i >= lq || j >= lkv) return false;
    const int64_t diag = i + (bottom_right ? lkv - lq : 0);
    if (causal && j > diag) return false;
    if (left && diag - j >= *left) return false;
    return true;
  }
};

struct Data {
  std::vector<double> q, k, v, o, d_o, stats;
};

double at(const std::vector<double>& x, int64_t row, int64_t width, int64_t c) {
  return x[static_cast<size_t>(row * width + c)];
}

// S (descaled, scaled) of (bi, h, i, j).
double score(const Spec& s, const Data& x, int64_t bi, int64_t h, int64_t i, int64_t j) {
  const int64_t kh = h / (s.hq / s.hk);
  double dot = 0.0;
  for (int64_t c = 0; c < s.d; ++c)
    dot +=
        at(x.q, (bi * s.hq + h) * s.sq + i, s.d, c) * at(x.k, (bi * s.hk + kh) * s.skv + j, s.d, c);
  return dot * s.attn_scale * s.f.at(Role::DESCALE_Q) * s.f.at(Role::DESCALE_K);
}

struct Fwd {
  std::vector<double> o, stats;  // O as the engine stores it (rounded to s.out)
  double amax_s = 0, amax_o = 0;
};

Fwd naive_forward(const Spec& s, const Data& x) {
  Fwd r;
  r.o.assign(static_cast<size_t>(s.b * s.hq * s.sq * s.dv), 0.0);
  r.stats.assign(static_cast<size_t>(s.b * s.hq * s.sq), -INFINITY);  // no key: -inf
  for (int64_t bi = 0; bi < s.b; ++bi)
    for (int64_t h = 0; h < s.hq; ++h)
      for (int64_t i = 0; i < s.sq; ++i) {
        const int64_t row = (bi * s.hq + h) * s.sq + i, vh = h / (s.hq / s.hk);
        // Flash order, as cuDNN on an H200: P8 = fp8(exp(S - max) * scale_s), then the P8.V
        // product is divided by the row sum of exp(S - max).
        double mx = -INFINITY;
        for (int64_t j = 0; j < s.skv; ++j)
          if (s.allowed(bi, i, j)) mx = std::max(mx, score(s, x, bi, h, i, j));
        if (mx == -INFINITY) continue;
        double sum = 0.0;
        for (int64_t j = 0; j < s.skv; ++j)
          if (s.allowed(bi, i, j)) sum += std::exp(score(s, x, bi, h, i, j) - mx);
        r.stats[row] = mx + std::log(sum);
        std::vector<double> acc(static_cast<size_t>(s.dv), 0.0);
        for (int64_t j = 0; j < s.skv; ++j) {
          if (!s.allowed(bi, i, j)) continue;
          const double e = std::exp(score(s, x, bi, h, i, j) - mx);
          r.amax_s = std::max(r.amax_s, e / sum);
          const double p8 = round_to(s.in, e * s.f.at(Role::SCALE_S));
          for (int64_t c = 0; c < s.dv; ++c)
            acc[c] += p8 * at(x.v, (bi * s.hk + vh) * s.skv + j, s.dv, c);
        }
        for (int64_t c = 0; c < s.dv; ++c) {
          const double xo = acc[c] / sum * s.f.at(Role::DESCALE_S) * s.f.at(Role::DESCALE_V);
          r.amax_o = std::max(r.amax_o, std::abs(xo));
          r.o[static_cast<size_t>(row * s.dv + c)] = round_to(s.out, xo * s.f.at(Role::SCALE_O));
        }
      }
  return r;
}

struct Bwd {
  std::vector<double> dq, dk, dv;  // before their output scale
  double amax_dq = 0, amax_dk = 0, amax_dv = 0, amax_dp = 0;
};

Bwd naive_backward(const Spec& s, const Data& x) {
  Bwd g;
  g.dq.assign(x.q.size(), 0.0);
  g.dk.assign(x.k.size(), 0.0);
  g.dv.assign(x.v.size(), 0.0);
  const auto& f = s.f;
  for (int64_t bi = 0; bi < s.b; ++bi)
    for (int64_t h = 0; h < s.hq; ++h)
      for (int64_t i = 0; i < s.sq; ++i) {
        const int64_t row = (bi * s.hq + h) * s.sq + i, kh = h / (s.hq / s.hk);
        if (!std::isfinite(x.stats[row])) continue;
        double dsum = 0.0;
        for (int64_t c = 0; c < s.dv; ++c) dsum += at(x.d_o, row, s.dv, c) * at(x.o, row, s.dv, c);
        dsum *= f.at(Role::DESCALE_DO) * f.at(Role::DESCALE_O);
        for (int64_t j = 0; j < s.skv; ++j) {
          if (!s.allowed(bi, i, j)) continue;
          const int64_t krow = (bi * s.hk + kh) * s.skv + j;
          const double e = std::exp(score(s, x, bi, h, i, j) - x.stats[row]);
          const double p8 = round_to(s.in, e * f.at(Role::SCALE_S));
          double dp = 0.0;
          for (int64_t c = 0; c < s.dv; ++c) {
            g.dv[krow * s.dv + c] += p8 * at(x.d_o, row, s.dv, c);
            dp += at(x.d_o, row, s.dv, c) * at(x.v, krow, s.dv, c);
          }
          dp *= f.at(Role::DESCALE_DO) * f.at(Role::DESCALE_V);
          const double ds = (dp - dsum) * e * s.attn_scale;
          g.amax_dp = std::max(g.amax_dp, std::abs(ds));
          const double ds8 = round_to(s.grad, ds * f.at(Role::SCALE_DP));
          for (int64_t c = 0; c < s.d; ++c) {
            g.dq[row * s.d + c] += ds8 * at(x.k, krow, s.d, c);
            g.dk[krow * s.d + c] += ds8 * at(x.q, row, s.d, c);
          }
        }
      }
  auto finish = [](std::vector<double>& v, double descale, double& amax) {
    for (double& e : v) {
      e *= descale;
      amax = std::max(amax, std::abs(e));
    }
  };
  finish(g.dq, f.at(Role::DESCALE_DP) * f.at(Role::DESCALE_K), g.amax_dq);
  finish(g.dk, f.at(Role::DESCALE_DP) * f.at(Role::DESCALE_Q), g.amax_dk);
  finish(g.dv, f.at(Role::DESCALE_S) * f.at(Role::DESCALE_DO), g.amax_dv);
  return g;
}

dnngraph::ir::SdpaOptions options(const Spec& s) {
  dnngraph::ir::SdpaOptions a;
  a.attn_scale = s.attn_scale;
  a.causal = s.causal;
  a.diagonal_alignment =
      s.bottom_right ? DiagonalAlignment::BottomRight : DiagonalAlignment::TopLeft;
  a.left_bound = s.left;
  return a;
}

struct Built {
  dnngraph::ir::SdpaFp8Scales sc;
  dnngraph::ir::SdpaInputs extra;
};

Built factors(dnngraph::Graph& g, ref_test::Buffers& bufs, const Spec& s, bool backward) {
  Built r;
  auto make = [&](Role role, const char* name, Tensor& slot) {
    slot = input(g, name, {1, 1, 1, 1}, kF32);
    bufs.set(slot, {s.f.at(role)});
  };
  make(Role::DESCALE_Q, "descale_q", r.sc.descale_q);
  make(Role::DESCALE_K, "descale_k", r.sc.descale_k);
  make(Role::DESCALE_V, "descale_v", r.sc.descale_v);
  make(Role::DESCALE_S, "descale_s", r.sc.descale_s);
  make(Role::SCALE_S, "scale_s", r.sc.scale_s);
  if (!backward) {
    make(Role::SCALE_O, "scale_o", r.sc.scale_o);
  } else {
    make(Role::DESCALE_O, "descale_o", r.sc.descale_o);
    make(Role::DESCALE_DO, "descale_dO", r.sc.descale_do);
    make(Role::DESCALE_DP, "descale_dP", r.sc.descale_dp);
    make(Role::SCALE_DQ, "scale_dQ", r.sc.scale_dq);
    make(Role::SCALE_DK, "scale_dK", r.sc.scale_dk);
    make(Role::SCALE_DV, "scale_dV", r.sc.scale_dv);
    make(Role::SCALE_DP, "scale_dP", r.sc.scale_dp);
  }
  if (!s.len_q.empty()) {
    r.extra.seq_len_q = input(g, "seq_len_q", {s.b, 1, 1, 1}, DataType::Int32);
    r.extra.seq_len_kv = input(g, "seq_len_kv", {s.b, 1, 1, 1}, DataType::Int32);
    bufs.set(r.extra.seq_len_q, {s.len_q.begin(), s.len_q.end()});
    bufs.set(r.extra.seq_len_kv, {s.len_kv.begin(), s.len_kv.end()});
  }
  return r;
}

// Runs the forward (training) on random inputs; returns the inputs and the engine's results.
void run_forward(const Spec& s, Data& x, Fwd& got, uint64_t seed) {
  dnngraph::Graph g;
  ref_test::Buffers bufs;
  ref_test::Rng rng(seed);
  Tensor q = input(g, "q", {s.b, s.hq, s.sq, s.d}, s.in);
  Tensor k = input(g, "k", {s.b, s.hk, s.skv, s.d}, s.in);
  Tensor v = input(g, "v", {s.b, s.hk, s.skv, s.dv}, s.in);
  x.q = bufs.random(q, rng, -2, 2);
  x.k = bufs.random(k, rng, -2, 2);
  x.v = bufs.random(v, rng, -2, 2);
  Built f = factors(g, bufs, s, false);
  dnngraph::ir::SdpaFp8Attrs a;
  static_cast<dnngraph::ir::SdpaOptions&>(a) = options(s);
  a.is_inference = false;
  auto [o, stats, amax_s, amax_o] = g.sdpa_fp8(q, k, v, f.sc, a, f.extra, {"attn"});
  o->set_output(true).set_data_type(s.out);
  stats->set_output(true);
  amax_s->set_output(true);
  amax_o->set_output(true);
  ASSERT_OK(g.validate());
  ASSERT_OK(bufs.run_graph(g));
  got.o = bufs.values(o);
  got.stats = bufs.values(stats);
  got.amax_s = bufs.values(amax_s)[0];
  got.amax_o = bufs.values(amax_o)[0];
}

void check_forward(const Spec& s, uint64_t seed, const std::string& what) {
  SCOPED_TRACE(what);
  Data x;
  Fwd got;
  run_forward(s, x, got, seed);
  const Fwd want = naive_forward(s, x);
  // Same roundings on both sides: fp64 summation order is all that differs (an FP8 output
  // may round one step apart at a tie, hence one FP8 step there).
  const double tol = s.out == kF32 ? 1e-5 : 0.13;
  ref_test::hand_made::expect_close(got.o, want.o, tol, "O");
  EXPECT_TRUE(ref_test::all_close(got.stats, want.stats, {1e-6, 1e-6})) << "STATS (float32)";
  EXPECT_NEAR(got.amax_s, want.amax_s, 1e-6 * want.amax_s) << "AMAX_S";
  EXPECT_NEAR(got.amax_o, want.amax_o, 1e-5 * want.amax_o) << "AMAX_O";
  EXPECT_GT(want.amax_o, 0.0);
}

TEST(RefSdpaFp8, HandWorkedForward) {
  // One query, two keys, d = dv = 1: q = 1, k = {1, -1}, v = {1, 3}; attn_scale 1,
  // descale_q 2, descale_k 0.5 -> S = {1, -1}; P = {e, 1/e} / (e + 1/e) = {0.8808, 0.1192}.
  // Flash order: exp(S - max) = {1, e^-2}, row sum l = 1 + e^-2; scale_s 16: {16, 2.165} ->
  // E4M3 {16, 2.25}. descale_s 1/16, descale_v 1: X = (16 * 1 + 2.25 * 3) / 16 / l
  // = 1.421875 / l = AMAX_O; scale_o 2 -> O = 2 X (float).
  dnngraph::Graph g;
  ref_test::Buffers bufs;
  Tensor q = input(g, "q", {1, 1, 1, 1}, kE4), k = input(g, "k", {1, 1, 2, 1}, kE4),
         v = input(g, "v", {1, 1, 2, 1}, kE4);
  bufs.set(q, {1});
  bufs.set(k, {1, -1});
  bufs.set(v, {1, 3});
  Spec s;
  s.f = {{Role::DESCALE_Q, 2.0},        {Role::DESCALE_K, 0.5}, {Role::DESCALE_V, 1.0},
         {Role::DESCALE_S, 1.0 / 16.0}, {Role::SCALE_S, 16.0},  {Role::SCALE_O, 2.0}};
  Built f = factors(g, bufs, s, false);
  dnngraph::ir::SdpaFp8Attrs a;
  a.attn_scale = 1.0;
  a.is_inference = false;
  auto [o, stats, amax_s, amax_o] = g.sdpa_fp8(q, k, v, f.sc, a, {}, {"attn"});
  o->set_output(true).set_data_type(kF32);
  stats->set_output(true);
  amax_s->set_output(true);
  amax_o->set_output(true);
  ASSERT_OK(bufs.run_graph(g));
  const double e = std::exp(1.0);
  const double x = 1.421875 / (1 + std::exp(-2.0));
  EXPECT_NEAR(bufs.values(o)[0], 2 * x, 1e-6);
  EXPECT_NEAR(bufs.values(amax_o)[0], x, 1e-6);
  EXPECT_NEAR(bufs.values(amax_s)[0], e / (e + 1 / e), 1e-7);
  EXPECT_NEAR(bufs.values(stats)[0], std::log(e + 1 / e), 1e-6);
}

TEST(RefSdpaFp8, ForwardMatchesNaive) {
  Spec s;
  check_forward(s, 1, "plain");
  s.causal = true;
  check_forward(s, 2, "causal");
  s.bottom_right = true;
  check_forward(s, 3, "causal bottom-right");
  s.causal = false, s.bottom_right = false, s.left = 3;
  check_forward(s, 4, "left bound 3");
  s.left.reset();
  s.hq = 4;  // GQA: two query heads per K/V head
  check_forward(s, 5, "GQA");
  s.len_q = {3, 5}, s.len_kv = {7, 2};
  check_forward(s, 6, "padding");
  s.len_q.clear(), s.len_kv.clear();
  s.in = kE5;
  check_forward(s, 7, "E5M2 inputs");
  s.in = kE4, s.out = kE4;
  check_forward(s, 8, "E4M3 output");
}

TEST(RefSdpaFp8, BackwardMatchesNaive) {
  auto check = [](const Spec& s, uint64_t seed, const std::string& what) {
    SCOPED_TRACE(what);
    Data x;
    Fwd fwd;
    run_forward(s, x, fwd, seed);
    // O as the forward stored it (the backward reads it through its descale), a fresh dO.
    dnngraph::Graph g;
    ref_test::Buffers bufs;
    ref_test::Rng rng(seed + 100);
    Tensor q = input(g, "q", {s.b, s.hq, s.sq, s.d}, s.in);
    Tensor k = input(g, "k", {s.b, s.hk, s.skv, s.d}, s.in);
    Tensor v = input(g, "v", {s.b, s.hk, s.skv, s.dv}, s.in);
    Tensor o = input(g, "o", {s.b, s.hq, s.sq, s.dv}, s.out);
    Tensor d_o = input(g, "dO", {s.b, s.hq, s.sq, s.dv}, s.grad);
    Tensor st = input(g, "stats", {s.b, s.hq, s.sq, 1}, kF32);
    bufs.set(q, x.q), bufs.set(k, x.k), bufs.set(v, x.v);
    x.o = bufs.set(o, fwd.o);
    x.stats = bufs.set(st, fwd.stats);
    x.d_o = bufs.random(d_o, rng, -2, 2);
    Built f = factors(g, bufs, s, true);
    dnngraph::ir::SdpaFp8BwdAttrs a;
    static_cast<dnngraph::ir::SdpaOptions&>(a) = options(s);
    auto r = g.sdpa_fp8_backward(q, k, v, o, d_o, st, f.sc, a, f.extra, {"attn_bwd"});
    for (int i = 0; i < 3; ++i) r[i]->set_output(true).set_data_type(s.out);
    for (int i = 3; i < 7; ++i) r[i]->set_output(true);
    ASSERT_OK(bufs.run_graph(g));
    const Bwd want = naive_backward(s, x);
    auto scaled = [&](std::vector<double> v, Role role) {
      for (double& e : v) e = round_to(s.out, e * s.f.at(role));
      return v;
    };
    const double tol = s.out == kF32 ? 1e-5 : 0.13;
    ref_test::hand_made::expect_close(bufs.values(r[0]), scaled(want.dq, Role::SCALE_DQ), tol,
                                      "dQ");
    ref_test::hand_made::expect_close(bufs.values(r[1]), scaled(want.dk, Role::SCALE_DK), tol,
                                      "dK");
    ref_test::hand_made::expect_close(bufs.values(r[2]), scaled(want.dv, Role::SCALE_DV), tol,
                                      "dV");
    const double amax[4] = {want.amax_dq, want.amax_dk, want.amax_dv, want.amax_dp};
    for (int i = 0; i < 4; ++i) {
      EXPECT_GT(amax[i], 0.0) << i;
      EXPECT_NEAR(bufs.values(r[3 + i])[0], amax[i], 1e-5 * amax[i]) << r[3 + i]->name;
    }
  };
  Spec s;
  check(s, 11, "plain");
  s.causal = true;
  check(s, 12, "causal");
  s.hq = 4;
  check(s, 13, "causal GQA");
  s.causal = false;
  s.len_q = {4, 2}, s.len_kv = {3, 7};
  check(s, 14, "padding GQA");
  s.len_q.clear(), s.len_kv.clear();
  s.grad = kE5;
  check(s, 15, "E5M2 dO");
  s.out = kE4;
  check(s, 16, "E4M3 O and gradients");
}

// The FP8 attention approximates full-precision attention: with the factors undoing each
// other, O is within FP8's precision of the fp64 softmax(Q K^T * scale) V of the same inputs.
TEST(RefSdpaFp8, ApproximatesFullPrecision) {
  Spec s;
  Data x;
  Fwd got;
  run_forward(s, x, got, 21);
  std::vector<double> want(got.o.size(), 0.0);
  for (int64_t bi = 0; bi < s.b; ++bi)
    for (int64_t h = 0; h < s.hq; ++h)
      for (int64_t i = 0; i < s.sq; ++i) {
        const int64_t row = (bi * s.hq + h) * s.sq + i;
        double sum = 0.0;
        for (int64_t j = 0; j < s.skv; ++j) sum += std::exp(score(s, x, bi, h, i, j));
        for (int64_t j = 0; j < s.skv; ++j) {
          const double p = std::exp(score(s, x, bi, h, i, j)) / sum;
          for (int64_t c = 0; c < s.dv; ++c)
            want[row * s.dv + c] += p * at(x.v, (bi * s.hk + h) * s.skv + j, s.dv, c) *
                                    s.f.at(Role::DESCALE_V) * s.f.at(Role::SCALE_O);
        }
      }
  double err = 0.0, mag = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(got.o[i] - want[i]));
    mag = std::max(mag, std::abs(want[i]));
  }
  EXPECT_LT(err, 0.08 * mag);  // E4M3 P: 3 mantissa bits
  EXPECT_GT(err, 0.0);         // and the quantization is really there
}

}  // namespace
