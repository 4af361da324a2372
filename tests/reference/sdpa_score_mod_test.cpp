// SDPA score modifiers on the reference engine against naive fp64 loops: softcapping
// (cap * tanh(s / cap) on the scaled score, before the bias) forward with a bias, and its
// backward with the frontend's bprop (TANH_BWD on the tensor score_mod saved), GQA included.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/ref_harness.hpp"
#include "dnngraph/dnngraph.hpp"

namespace {

using dnngraph::DataType;
using dnngraph::PointwiseMode;
using dnngraph::ir::Tensor;
using ref_test::Buffers;

struct Problem {
  int64_t b = 2, hq = 4, hk = 2, sq = 5, skv = 6, d = 8;
  double scale = 0.6, cap = 1.5;
  std::vector<double> q, k, v, bias, d_o;
  // Index helpers (row-major).
  double at(const std::vector<double>& x, int64_t h_count, int64_t s, int64_t bi, int64_t h,
            int64_t i, int64_t c) const {
    return x[static_cast<size_t>(((bi * h_count + h) * s + i) * d + c)];
  }
};

// What the engine must give: O, stats, dQ, dK, dV (naive fp64).
struct Expected {
  std::vector<double> o, stats, dq, dk, dv;
};

Expected naive(const Problem& p) {
  Expected e;
  const int64_t g = p.hq / p.hk;
  e.o.assign(static_cast<size_t>(p.b * p.hq * p.sq * p.d), 0.0);
  e.stats.assign(static_cast<size_t>(p.b * p.hq * p.sq), 0.0);
  e.dq.assign(e.o.size(), 0.0);
  e.dk.assign(static_cast<size_t>(p.b * p.hk * p.skv * p.d), 0.0);
  e.dv = e.dk;
  for (int64_t bi = 0; bi < p.b; ++bi)
    for (int64_t h = 0; h < p.hq; ++h)
      for (int64_t i = 0; i < p.sq; ++i) {
        std::vector<double> s(static_cast<size_t>(p.skv)), t(s.size()), pr(s.size());
        double mx = -INFINITY;
        for (int64_t j = 0; j < p.skv; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < p.d; ++c)
            dot += p.at(p.q, p.hq, p.sq, bi, h, i, c) * p.at(p.k, p.hk, p.skv, bi, h / g, j, c);
          s[j] = p.scale * dot;
          t[j] = p.cap * std::tanh(s[j] / p.cap) + p.bias[static_cast<size_t>(i * p.skv + j)];
          mx = std::max(mx, t[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < p.skv; ++j) sum += std::exp(t[j] - mx);
        const int64_t row = (bi * p.hq + h) * p.sq + i;
        e.stats[static_cast<size_t>(row)] = mx + std::log(sum);
        for (int64_t j = 0; j < p.skv; ++j) pr[j] = std::exp(t[j] - mx) / sum;
        for (int64_t c = 0; c < p.d; ++c)
          for (int64_t j = 0; j < p.skv; ++j)
            e.o[static_cast<size_t>(row * p.d + c)] +=
                pr[j] * p.at(p.v, p.hk, p.skv, bi, h / g, j, c);
        if (p.d_o.empty()) continue;  // forward only
        double di = 0;
        for (int64_t c = 0; c < p.d; ++c)
          di += p.d_o[static_cast<size_t>(row * p.d + c)] * e.o[static_cast<size_t>(row * p.d + c)];
        for (int64_t j = 0; j < p.skv; ++j) {
          double dp = 0;
          for (int64_t c = 0; c < p.d; ++c)
            dp +=
                p.d_o[static_cast<size_t>(row * p.d + c)] * p.at(p.v, p.hk, p.skv, bi, h / g, j, c);
          const double th = std::tanh(s[j] / p.cap);
          const double ds = pr[j] * (dp - di) * (1.0 - th * th) * p.scale;
          const size_t kv = static_cast<size_t>(((bi * p.hk + h / g) * p.skv + j) * p.d);
          for (int64_t c = 0; c < p.d; ++c) {
            e.dq[static_cast<size_t>(row * p.d + c)] += ds * p.k[kv + c];
            e.dk[kv + c] += ds * p.q[static_cast<size_t>(row * p.d + c)];
            e.dv[kv + c] += pr[j] * p.d_o[static_cast<size_t>(row * p.d + c)];
          }
        }
      }
  return e;
}

Tensor input(dnngraph::Graph& g, const char* name, std::vector<int64_t> dims) {
  return g.tensor(dnngraph::ir::TensorAttrs()
                      .set_name(name)
                      .set_dim(std::move(dims))
                      .set_data_type(DataType::Float));
}

TEST(ReferenceSdpaScoreMod, SoftcapForwardAndBackwardAgainstNaiveLoops) {
  Problem p;
  ref_test::Rng rng(11);
  Buffers fwd_bufs;
  dnngraph::Graph fg;
  Tensor q = input(fg, "q", {p.b, p.hq, p.sq, p.d}), k = input(fg, "k", {p.b, p.hk, p.skv, p.d});
  Tensor v = input(fg, "v", {p.b, p.hk, p.skv, p.d}), bias = input(fg, "bias", {1, 1, p.sq, p.skv});
  Tensor cap = fg.scalar(dnngraph::ir::Scalar::of_float(p.cap), "cap");
  Tensor saved;
  auto fwd_mod = [&](dnngraph::ir::Graph& g, Tensor s) {
    saved = g.binary(PointwiseMode::Div, s, cap);
    return g.mul(g.unary(PointwiseMode::Tanh, saved), cap);
  };
  dnngraph::ir::SdpaAttrs a;
  a.is_inference = false;
  a.attn_scale = p.scale;
  dnngraph::ir::SdpaInputs extra;
  extra.bias = bias;
  extra.score_mod = fwd_mod;
  auto [o, stats] = fg.sdpa(q, k, v, a, extra);
  o->set_output(true);
  stats->set_output(true);
  ASSERT_OK(fg.validate());  // strides of the inputs, for the buffers
  // Scores of several caps' size, so that the cap bends them.
  p.q = fwd_bufs.random(q, rng, -2.0, 2.0);
  p.k = fwd_bufs.random(k, rng);
  p.v = fwd_bufs.random(v, rng);
  p.bias = fwd_bufs.random(bias, rng, -0.5, 0.5);
  ASSERT_OK(fwd_bufs.run_graph(fg));
  const Expected e = naive(p);
  const auto tol = ref_test::tol(DataType::Float);
  EXPECT_TRUE(ref_test::all_close(fwd_bufs.values(o), e.o, tol));
  EXPECT_TRUE(ref_test::all_close(fwd_bufs.values(stats), e.stats, tol));

  dnngraph::Graph bg;
  Buffers bwd_bufs;
  Tensor bq = input(bg, "q", q->dim), bk = input(bg, "k", k->dim), bv = input(bg, "v", v->dim);
  Tensor bo = input(bg, "o", o->dim), bdo = input(bg, "do", o->dim);
  Tensor bst = input(bg, "stats", {p.b, p.hq, p.sq, 1}), bbias = input(bg, "bias", bias->dim);
  cap = bg.scalar(dnngraph::ir::Scalar::of_float(p.cap), "cap");
  dnngraph::ir::SdpaBwdAttrs ba;
  ba.attn_scale = p.scale;
  dnngraph::ir::SdpaInputs bextra;
  bextra.bias = bbias;
  bextra.dbias_output = false;
  bextra.score_mod = fwd_mod;
  bextra.score_mod_bprop = [&](dnngraph::ir::Graph& g, Tensor ds) {
    Tensor t = g.binary(PointwiseMode::TanhBwd, g.mul(ds, cap), saved);
    return g.binary(PointwiseMode::Div, t, cap);
  };
  auto grads = bg.sdpa_backward(bq, bk, bv, bo, bdo, bst, ba, bextra);
  for (int i = 0; i < 3; ++i) grads[i]->set_output(true);
  ASSERT_OK(bg.validate());
  bwd_bufs.set(bq, p.q);
  bwd_bufs.set(bk, p.k);
  bwd_bufs.set(bv, p.v);
  bwd_bufs.set(bbias, p.bias);
  bwd_bufs.set(bo, fwd_bufs.values(o));
  bwd_bufs.set(bst, fwd_bufs.values(stats));
  p.d_o = bwd_bufs.random(bdo, rng);
  ASSERT_OK(bwd_bufs.run_graph(bg));
  const Expected e2 = naive(p);  // with dO now
  EXPECT_TRUE(ref_test::all_close(bwd_bufs.values(grads[0]), e2.dq, {1e-5, 1e-5}));
  EXPECT_TRUE(ref_test::all_close(bwd_bufs.values(grads[1]), e2.dk, {1e-5, 1e-5}));
  EXPECT_TRUE(ref_test::all_close(bwd_bufs.values(grads[2]), e2.dv, {1e-5, 1e-5}));
}

}  // namespace
