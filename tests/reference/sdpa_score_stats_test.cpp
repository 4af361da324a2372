// Reference SDPA's SCORE_MAX / SCORE_SUM_EXP outputs (the frontend's score_max / score_sum_exp)
// and the Stats of rows that attend no key: hand-worked values (with and without a sink),
// naive fp64 loops over masks, padding, GQA, bias and ALiBi, and what fully masked or padded
// rows get (max, sum and Stats -inf, O 0, as cuDNN 9.19 writes them for padded rows).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "reference/sdpa_harness.hpp"

namespace dnngraph::reference {
namespace {

using namespace sdpa_harness;  // NOLINT(build/namespaces)

constexpr double kInf = std::numeric_limits<double>::infinity();

void add_rows(Case& c, const Spec& s) {
  const Shapes sh(s);
  c.output(Role::SCORE_MAX, make_buf("mx", sh.stats, DataType::Float));
  c.output(Role::SCORE_SUM_EXP, make_buf("se", sh.stats, DataType::Float));
}

// Row max of the attended scores and the sum of exp(score - max); both -inf with no key.
void naive_rows(const Spec& s, const Inputs& in, std::vector<double>& mx,
                std::vector<double>& sum) {
  mx.assign(static_cast<size_t>(s.b * s.hq * s.sq), -kInf);
  sum.assign(mx.size(), 0.0);
  for (int64_t bi = 0; bi < s.b; ++bi)
    for (int64_t h = 0; h < s.hq; ++h)
      for (int64_t i = 0; i < s.sq; ++i) {
        const size_t row = static_cast<size_t>((bi * s.hq + h) * s.sq + i);
        for (int64_t j = 0; j < s.skv; ++j)
          if (allowed(s, bi, i, j)) mx[row] = std::max(mx[row], score(s, in, bi, h, i, j));
        for (int64_t j = 0; j < s.skv; ++j)
          if (allowed(s, bi, i, j)) sum[row] += std::exp(score(s, in, bi, h, i, j) - mx[row]);
        if (mx[row] == -kInf) sum[row] = -kInf;
      }
}

// Exact equality where the row attends nothing (-inf), closeness elsewhere.
void expect_rows(const std::vector<double>& got, const std::vector<double>& want, double tol,
                 const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t r = 0; r < got.size(); ++r) {
    if (!std::isfinite(want[r]))
      EXPECT_EQ(got[r], want[r]) << what << " row " << r;
    else
      EXPECT_NEAR(got[r], want[r], tol * std::max(1.0, std::fabs(want[r]))) << what << " row " << r;
  }
}

// q = [1, 2], k = [1, -1], v = [1, 3] (d = dv = 1), scale 1, inference with both outputs.
struct HandWorked {
  std::vector<double> o, mx, se;
};
HandWorked hand_worked(const std::vector<double>& sink) {
  ir::SdpaAttrs a;
  a.attn_scale = 1.0;
  Case c(a);
  c.input(Role::Q, make_buf("q", {1, 1, 2, 1}, DataType::Double)).set({1, 2});
  c.input(Role::K, make_buf("k", {1, 1, 2, 1}, DataType::Double)).set({1, -1});
  c.input(Role::V, make_buf("v", {1, 1, 2, 1}, DataType::Double)).set({1, 3});
  if (!sink.empty())
    c.input(Role::SINK_TOKEN, make_buf("sink", {1, 1, 1, 1}, DataType::Float)).set(sink);
  c.output(Role::O, make_buf("o", {1, 1, 2, 1}, DataType::Double));
  c.output(Role::SCORE_MAX, make_buf("mx", {1, 1, 2, 1}, DataType::Double));
  c.output(Role::SCORE_SUM_EXP, make_buf("se", {1, 1, 2, 1}, DataType::Double));
  Status s = c.run();
  EXPECT_TRUE(s.is_ok()) << s.message();
  if (!s.is_ok()) return {};
  return {c.result(Role::O), c.result(Role::SCORE_MAX), c.result(Role::SCORE_SUM_EXP)};
}

TEST(RefSdpaScoreStats, HandWorked) {
  // Row 0 scores [1, -1], row 1 [2, -2].
  const HandWorked r = hand_worked({});
  expect_close(r.mx, {1.0, 2.0}, 1e-15, "SCORE_MAX");
  expect_close(r.se, {1.0 + std::exp(-2.0), 1.0 + std::exp(-4.0)}, 1e-15, "SCORE_SUM_EXP");
  expect_close(r.o,
               {(1 + 3 * std::exp(-2.0)) / (1 + std::exp(-2.0)),
                (1 + 3 * std::exp(-4.0)) / (1 + std::exp(-4.0))},
               1e-15, "O");
}

TEST(RefSdpaScoreStats, HandWorkedWithSink) {
  // Sink 1.5: row 0's max is the sink (scores [1, -1]), row 1's is its score 2; the sum has
  // exp(sink - max) and the sink has no value row.
  const HandWorked r = hand_worked({1.5});
  const double s0 = std::exp(-0.5) + std::exp(-2.5) + 1.0;
  const double s1 = 1.0 + std::exp(-4.0) + std::exp(-0.5);
  expect_close(r.mx, {1.5, 2.0}, 1e-15, "SCORE_MAX");
  expect_close(r.se, {s0, s1}, 1e-15, "SCORE_SUM_EXP");
  expect_close(r.o, {(std::exp(-0.5) + 3 * std::exp(-2.5)) / s0, (1 + 3 * std::exp(-4.0)) / s1},
               1e-15, "O");
}

void rows_case(const Spec& s, uint32_t seed, const char* what) {
  SCOPED_TRACE(what);
  std::mt19937 gen(seed);
  Inputs in;
  Case c = forward_node(s, true, gen, in);
  add_rows(c, s);
  Status st = c.run();
  ASSERT_TRUE(st.is_ok()) << st.message();
  std::vector<double> mx, sum;
  naive_rows(s, in, mx, sum);
  expect_rows(c.result(Role::SCORE_MAX), mx, 1e-6, "SCORE_MAX");
  expect_rows(c.result(Role::SCORE_SUM_EXP), sum, 1e-6, "SCORE_SUM_EXP");
  expect_close(c.result(Role::O), naive_forward(s, in).o, tol_of(s.io), "O");
}

TEST(RefSdpaScoreStats, MatchNaiveLoops) {
  Spec s;  // b 2, h 2, s_q 5, s_kv 7
  rows_case(s, 1, "plain");
  s.causal = true;
  s.hk = s.hv = 1;  // MQA
  rows_case(s, 2, "causal MQA");
  s.causal = false;
  s.hq = 4, s.hk = s.hv = 2;
  s.bias_dims = {1, 4, 5, 7};
  s.left = 3;
  s.right = 1;
  rows_case(s, 3, "bias, band, GQA");
  Spec a;
  a.hq = a.hk = a.hv = 3;
  a.causal = true;
  a.alibi = ir::sdpa_alibi_slopes(3);
  a.len_q = {4, 5};
  a.len_kv = {6, 3};
  rows_case(a, 4, "ALiBi, padding");
  Spec h;
  h.io = DataType::BFloat16;
  rows_case(h, 5, "bf16 inputs");
}

// Row 0 has no key (bottom-right diagonal below the first key), row 3 is padding.
Spec no_key_rows() {
  Spec s;
  s.b = 1, s.hq = 1, s.hk = 1, s.hv = 1, s.sq = 4, s.skv = 4;
  s.bottom_right = true, s.right = 0;  // diagonal i + (2 - 3)
  s.len_q = {3};
  s.len_kv = {2};
  return s;
}

TEST(RefSdpaScoreStats, RowsWithNoKey) {
  // Rows 0 and 3: O 0, max and sum -inf (cuDNN 9.19's values for padded rows) and Stats -inf
  // (max plus the log of an empty sum), as cuDNN (>= 9.14) writes it (a second run: Stats and
  // the side outputs exclude each other).
  const Spec s = no_key_rows();
  for (bool inference : {true, false}) {
    SCOPED_TRACE(inference ? "SCORE_MAX / SCORE_SUM_EXP" : "STATS");
    std::mt19937 gen(60);
    Inputs in;
    Case c = forward_node(s, inference, gen, in);
    if (inference) add_rows(c, s);
    ASSERT_TRUE(c.run().is_ok());
    const auto o = c.result(Role::O);
    for (int64_t row : {0, 3})
      for (int64_t k = 0; k < s.dv; ++k) EXPECT_EQ(o[row * s.dv + k], 0.0) << row;
    if (!inference) {
      const auto lse = c.result(Role::STATS);
      EXPECT_EQ(lse[0], -kInf);
      EXPECT_EQ(lse[3], -kInf);
      expect_rows(lse, naive_forward(s, in).lse, 1e-6, "STATS");
      continue;
    }
    const auto mx = c.result(Role::SCORE_MAX), se = c.result(Role::SCORE_SUM_EXP);
    for (int64_t row : {0, 3}) {
      EXPECT_EQ(mx[row], -kInf) << row;
      EXPECT_EQ(se[row], -kInf) << row;
    }
    for (int64_t row : {1, 2}) {
      EXPECT_TRUE(std::isfinite(mx[row])) << row;
      EXPECT_GE(se[row], 1.0) << row;  // the max's own term
    }
  }
}

TEST(RefSdpaScoreStats, BackwardSkipsRowsWithMinusInfinityStats) {
  // The forward's Stats (-inf on rows with no key) fed to the backward: no NaN, and those rows
  // get zero dQ (exp(s - (-inf)) is never formed).
  const Spec s = no_key_rows();
  std::mt19937 gen(62);
  Inputs in;
  Case f = forward_node(s, false, gen, in);
  ASSERT_TRUE(f.run().is_ok());
  const auto o = f.result(Role::O), lse = f.result(Role::STATS);
  const Shapes sh(s);
  ir::SdpaBwdAttrs a;
  static_cast<ir::SdpaOptions&>(a) = s.attrs(false);
  Case c(a);
  c.input(Role::Q, make_buf("q", sh.q, s.io)).set(in.q);
  c.input(Role::K, make_buf("k", sh.k, s.io)).set(in.k);
  c.input(Role::V, make_buf("v", sh.v, s.io)).set(in.v);
  c.input(Role::O, make_buf("o", sh.o, s.io)).set(o);
  c.input(Role::DO, make_buf("do", sh.o, s.io)).fill(gen, -1, 1);
  c.input(Role::STATS, make_buf("stats", sh.stats, DataType::Float)).set(lse);
  c.input(Role::SEQ_LEN_Q, make_buf("seq_q", {1, 1, 1, 1}, DataType::Int32)).set({3});
  c.input(Role::SEQ_LEN_KV, make_buf("seq_kv", {1, 1, 1, 1}, DataType::Int32)).set({2});
  c.output(Role::DQ, make_buf("dq", sh.q, s.io));
  c.output(Role::DK, make_buf("dk", sh.k, s.io));
  c.output(Role::DV, make_buf("dv", sh.v, s.io));
  Status st = c.run();
  ASSERT_TRUE(st.is_ok()) << st.message();
  for (Role r : {Role::DQ, Role::DK, Role::DV})
    for (double x : c.result(r)) ASSERT_TRUE(std::isfinite(x)) << r;
  const auto dq = c.result(Role::DQ);
  for (int64_t row : {0, 3})
    for (int64_t k = 0; k < s.d; ++k) EXPECT_EQ(dq[row * s.d + k], 0.0) << row;
}

}  // namespace
}  // namespace dnngraph::reference
