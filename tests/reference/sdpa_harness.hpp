// Shared by the reference SDPA tests (sdpa_test.cpp, sdpa_dropout_test.cpp): a problem
// description (Spec), hand-made forward / backward nodes on it, naive fp64 loops that compute
// what the kernels must give (masks, padding, GQA/MQA, bias, both dropout forms) and central
// finite differences of the forward kernel for the backward.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/ref_harness.hpp"
#include "dnngraph/dnngraph.hpp"
#include "engines/reference/kernel.hpp"

namespace dnngraph::reference {
// The dropout hash of sdpa.cpp (not in a library header: only the tests need it).
double sdpa_dropout_uniform(uint64_t seed, uint64_t offset, int64_t b, int64_t h, int64_t i,
                            int64_t j);

namespace sdpa_harness {

// ------------------------------------------------------------------ kernel-level harness
// Ports with host storage, the hand-made node, expect_close and the graph helpers
// (graph_tensor, mark_output, build_and_run, poisoned): tests/common/ref_harness.hpp.
using namespace ref_test::hand_made;  // NOLINT(build/namespaces)

inline constexpr char kNode[] = "sdpa0";
using Case = NamedCase<kNode>;

// ------------------------------------------------------------------ problem description
inline Buf make_int_scalar(const std::string& name, int64_t v) {
  auto t = std::make_shared<ir::TensorAttrs>();
  t->set_name(name).set_value(ir::Scalar::of_int(v));
  return Buf(t);
}

struct Spec {
  int64_t b = 2, hq = 2, hk = 2, hv = 2, sq = 5, skv = 7, d = 4, dv = 3;
  bool causal = false, bottom_right = false;
  std::optional<int64_t> left, right;
  std::vector<int64_t> len_q, len_kv;  // padding mask when not empty
  std::vector<int64_t> bias_dims;      // additive bias when not empty
  std::vector<double> alibi;           // ALiBi slope per query head (alibi_mask) when not empty
  std::optional<double> attr_scale, tensor_scale;
  double dropout = 0.0;  // dropout by probability when > 0
  int64_t seed = 0, offset = 0;
  // Dropout by mask when mask_dims is not empty: DROPOUT_MASK (random 0/1 values, or random
  // values in [0, 2) with mask_any_values) and DROPOUT_SCALE (pass-by-value unless
  // mask_scale_in_buffer, then a [1,1,1,1] tensor of the io type).
  std::vector<int64_t> mask_dims;
  double mask_scale = 1.0;
  bool mask_any_values = false, mask_scale_in_buffer = false;
  DataType io = DataType::Float;
  bool bshd = false;  // Q, K, V, O stored as [b, s, h, d] in memory

  double scale() const {
    if (tensor_scale) return *tensor_scale;
    if (attr_scale) return *attr_scale;
    return 1.0 / std::sqrt(static_cast<double>(d));
  }
  ir::SdpaAttrs attrs(bool inference) const {
    ir::SdpaAttrs a;
    a.is_inference = inference;
    a.attn_scale = attr_scale;
    a.causal = causal;
    a.diagonal_alignment =
        bottom_right ? DiagonalAlignment::BottomRight : DiagonalAlignment::TopLeft;
    a.left_bound = left;
    a.right_bound = right;
    a.padding_mask = !len_q.empty() || !len_kv.empty();
    a.alibi_mask = !alibi.empty();
    if (dropout > 0.0) a.dropout_probability = dropout;
    return a;
  }
  std::vector<int64_t> stride(int64_t h, int64_t s, int64_t dd) const {
    if (bshd) return {s * h * dd, dd, h * dd, 1};
    return {h * s * dd, s * dd, dd, 1};
  }
};

// The rule, written directly: query i of batch bi sees key j.
inline bool allowed(const Spec& s, int64_t bi, int64_t i, int64_t j) {
  const int64_t lq = s.len_q.empty() ? s.sq : s.len_q[bi];
  const int64_t lkv = s.len_kv.empty() ? s.skv : s.len_kv[bi];
  if (i >= lq || j >= lkv) return false;
  const int64_t shift = s.bottom_right ? lkv - lq : 0;  // key index on query i's diagonal
  std::optional<int64_t> right = s.right;
  if (s.causal) right = right ? std::min<int64_t>(*right, 0) : 0;
  if (right && j - (i + shift) > *right) return false;
  if (s.left && (i + shift) - j >= *s.left) return false;  // a window of `left` keys
  return true;
}

// Row-major index into a tensor of dims `bd` broadcast to [b, h, s_q, s_kv].
inline int64_t broadcast_index(const std::vector<int64_t>& bd, int64_t bi, int64_t h, int64_t i,
                               int64_t j) {
  const int64_t a = bd[0] == 1 ? 0 : bi, b = bd[1] == 1 ? 0 : h, c = bd[2] == 1 ? 0 : i,
                e = bd[3] == 1 ? 0 : j;
  return ((a * bd[1] + b) * bd[2] + c) * bd[3] + e;
}
inline int64_t bias_index(const Spec& s, int64_t bi, int64_t h, int64_t i, int64_t j) {
  return broadcast_index(s.bias_dims, bi, h, i, j);
}

struct Inputs {
  std::vector<double> q, k, v, bias;
  std::vector<double> mask;  // DROPOUT_MASK as stored (mask form)
  double mask_scale = 1.0;   // DROPOUT_SCALE as stored
};

inline double dropout_factor(const Spec& s, const Inputs& in, int64_t bi, int64_t h, int64_t i,
                             int64_t j) {
  if (!s.mask_dims.empty())
    return in.mask[static_cast<size_t>(broadcast_index(s.mask_dims, bi, h, i, j))] * in.mask_scale;
  if (s.dropout <= 0.0) return 1.0;
  const double u = sdpa_dropout_uniform(static_cast<uint64_t>(s.seed),
                                        static_cast<uint64_t>(s.offset), bi, h, i, j);
  return u < s.dropout ? 0.0 : 1.0 / (1.0 - s.dropout);
}

struct Shapes {
  std::vector<int64_t> q, k, v, o, stats;
  explicit Shapes(const Spec& s)
      : q{s.b, s.hq, s.sq, s.d},
        k{s.b, s.hk, s.skv, s.d},
        v{s.b, s.hv, s.skv, s.dv},
        o{s.b, s.hq, s.sq, s.dv},
        stats{s.b, s.hq, s.sq, 1} {}
};

// The graph tests' Q, K and V: buffers of the spec's shapes and I/O type, filled in that order
// with uniform values in [-1, 1) from gen, which `in` keeps.
struct QkvBufs {
  Buf q, k, v;
};
inline QkvBufs qkv_bufs(const Spec& s, const Shapes& sh, std::mt19937& gen, Inputs& in) {
  QkvBufs b{make_buf("Q", sh.q, s.io), make_buf("K", sh.k, s.io), make_buf("V", sh.v, s.io)};
  in.q = b.q.fill(gen, -1, 1), in.k = b.k.fill(gen, -1, 1), in.v = b.v.fill(gen, -1, 1);
  return b;
}

// Score of (bi, h, i, j) before masking.
inline double score(const Spec& s, const Inputs& in, int64_t bi, int64_t h, int64_t i, int64_t j) {
  const int64_t kh = h / (s.hq / s.hk);
  double dot = 0.0;
  for (int64_t c = 0; c < s.d; ++c)
    dot += in.q[((bi * s.hq + h) * s.sq + i) * s.d + c] *
           in.k[((bi * s.hk + kh) * s.skv + j) * s.d + c];
  const double alibi = s.alibi.empty() ? 0.0 : s.alibi[static_cast<size_t>(h)] * double(j - i);
  return s.scale() * dot + (s.bias_dims.empty() ? 0.0 : in.bias[bias_index(s, bi, h, i, j)]) +
         alibi;
}

struct Fwd {
  std::vector<double> o, lse;
};

// Direct exp / sum (inputs are small): no max subtraction, unlike the kernel.
inline Fwd naive_forward(const Spec& s, const Inputs& in) {
  Fwd f;
  f.o.assign(static_cast<size_t>(s.b * s.hq * s.sq * s.dv), 0.0);
  // A row with no key: log(0) = -inf (cuDNN's value).
  f.lse.assign(static_cast<size_t>(s.b * s.hq * s.sq), -std::numeric_limits<double>::infinity());
  for (int64_t bi = 0; bi < s.b; ++bi)
    for (int64_t h = 0; h < s.hq; ++h)
      for (int64_t i = 0; i < s.sq; ++i) {
        const int64_t vh = h / (s.hq / s.hv), row = (bi * s.hq + h) * s.sq + i;
        double sum = 0.0;
        for (int64_t j = 0; j < s.skv; ++j)
          if (allowed(s, bi, i, j)) sum += std::exp(score(s, in, bi, h, i, j));
        if (sum == 0.0) continue;
        f.lse[row] = std::log(sum);
        for (int64_t j = 0; j < s.skv; ++j) {
          if (!allowed(s, bi, i, j)) continue;
          const double p =
              std::exp(score(s, in, bi, h, i, j)) / sum * dropout_factor(s, in, bi, h, i, j);
          for (int64_t c = 0; c < s.dv; ++c)
            f.o[row * s.dv + c] += p * in.v[((bi * s.hv + vh) * s.skv + j) * s.dv + c];
        }
      }
  return f;
}

struct Bwd {
  std::vector<double> dq, dk, dv, dbias;
};

// Per (b, h): P = exp(score - STATS) (STATS as stored), dP = (dO V^T) * dropout,
// dS = P * (dP - rowsum(dO * O)), then the three products (and the bias reduction).
inline Bwd naive_backward(const Spec& s, const Inputs& in, const std::vector<double>& o,
                          const std::vector<double>& d_o, const std::vector<double>& stats) {
  Bwd g;
  g.dq.assign(in.q.size(), 0.0);
  g.dk.assign(in.k.size(), 0.0);
  g.dv.assign(in.v.size(), 0.0);
  g.dbias.assign(in.bias.size(), 0.0);
  for (int64_t bi = 0; bi < s.b; ++bi)
    for (int64_t h = 0; h < s.hq; ++h) {
      const int64_t kh = h / (s.hq / s.hk), vh = h / (s.hq / s.hv);
      for (int64_t i = 0; i < s.sq; ++i) {
        const int64_t row = (bi * s.hq + h) * s.sq + i;
        double rowsum = 0.0;
        for (int64_t c = 0; c < s.dv; ++c) rowsum += d_o[row * s.dv + c] * o[row * s.dv + c];
        for (int64_t j = 0; j < s.skv; ++j) {
          if (!allowed(s, bi, i, j)) continue;
          const double p = std::exp(score(s, in, bi, h, i, j) - stats[row]);
          const double z = dropout_factor(s, in, bi, h, i, j);
          const int64_t kj = (bi * s.hk + kh) * s.skv + j, vj = (bi * s.hv + vh) * s.skv + j;
          double dp = 0.0;
          for (int64_t c = 0; c < s.dv; ++c) {
            dp += d_o[row * s.dv + c] * in.v[vj * s.dv + c];
            g.dv[vj * s.dv + c] += p * z * d_o[row * s.dv + c];
          }
          const double ds = p * (dp * z - rowsum);
          for (int64_t c = 0; c < s.d; ++c) {
            g.dq[row * s.d + c] += s.scale() * ds * in.k[kj * s.d + c];
            g.dk[kj * s.d + c] += s.scale() * ds * in.q[row * s.d + c];
          }
          if (!s.bias_dims.empty()) g.dbias[bias_index(s, bi, h, i, j)] += ds;
        }
      }
    }
  return g;
}

// Optional inputs shared by forward and backward nodes.
inline void add_optional(Case& c, const Spec& s, Inputs& in, std::mt19937& gen) {
  if (s.tensor_scale) c.input(Role::ATTN_SCALE, make_scalar("attn_scale", *s.tensor_scale));
  if (!s.bias_dims.empty())
    in.bias = c.input(Role::BIAS, make_buf("bias", s.bias_dims, s.io)).fill(gen, -1.5, 1.5);
  auto lengths = [&](Role role, const char* name, const std::vector<int64_t>& l) {
    if (l.empty()) return;
    c.input(role, make_buf(name, {s.b, 1, 1, 1}, DataType::Int32))
        .set(std::vector<double>(l.begin(), l.end()));
  };
  lengths(Role::SEQ_LEN_Q, "seq_q", s.len_q);
  lengths(Role::SEQ_LEN_KV, "seq_kv", s.len_kv);
  if (s.dropout > 0.0) {
    c.input(Role::SEED, make_int_scalar("seed", s.seed));
    c.input(Role::OFFSET, make_int_scalar("offset", s.offset));
  }
  if (!s.mask_dims.empty()) {
    Buf& m = c.input(Role::DROPOUT_MASK, make_buf("dmask", s.mask_dims, s.io));
    if (s.mask_any_values) {
      in.mask = m.fill(gen, 0.0, 2.0);
    } else {
      std::bernoulli_distribution keep(0.7);
      std::vector<double> v(static_cast<size_t>(m.attrs->volume()));
      for (double& x : v) x = keep(gen) ? 1.0 : 0.0;
      v[0] = 1.0;  // both values present whatever the draw
      if (v.size() > 1) v[1] = 0.0;
      m.set(v);
      in.mask = m.get();
    }
    if (s.mask_scale_in_buffer) {
      Buf& sc = c.input(Role::DROPOUT_SCALE, make_buf("dscale", {1, 1, 1, 1}, s.io));
      sc.set({s.mask_scale});
      in.mask_scale = sc.get()[0];
    } else {
      c.input(Role::DROPOUT_SCALE, make_scalar("dscale", s.mask_scale));
      in.mask_scale = s.mask_scale;
    }
  }
}

inline Case forward_node(const Spec& s, bool inference, std::mt19937& gen, Inputs& in) {
  const Shapes sh(s);
  Case c(s.attrs(inference));
  in.q = c.input(Role::Q, make_buf("q", sh.q, s.io, s.stride(s.hq, s.sq, s.d))).fill(gen, -1, 1);
  in.k = c.input(Role::K, make_buf("k", sh.k, s.io, s.stride(s.hk, s.skv, s.d))).fill(gen, -1, 1);
  in.v = c.input(Role::V, make_buf("v", sh.v, s.io, s.stride(s.hv, s.skv, s.dv))).fill(gen, -1, 1);
  add_optional(c, s, in, gen);
  c.output(Role::O, make_buf("o", sh.o, s.io, s.stride(s.hq, s.sq, s.dv)));
  if (!inference)
    c.output(Role::STATS, make_buf("stats", sh.stats,
                                   s.io == DataType::Double ? DataType::Double : DataType::Float));
  return c;
}

inline void forward_case(const Spec& s, uint32_t seed, const std::string& what) {
  SCOPED_TRACE(what);
  std::mt19937 gen(seed);
  Inputs in;
  Case c = forward_node(s, false, gen, in);
  Status st = c.run();
  ASSERT_TRUE(st.is_ok()) << st.message();
  const Fwd f = naive_forward(s, in);
  expect_close(c.result(Role::O), f.o, tol_of(s.io), "O");
  expect_close(c.result(Role::STATS), f.lse, 1e-5, "STATS");
}

// The backward node of spec s on the forward's Q, K, V and bias from `in`, the dropout mask
// `mask` (when given), O, dO and STATS (stored as stats_type): outputs DQ, DK, DV, and DBIAS when
// `dbias` and the spec has a bias. gen feeds what add_optional draws.
inline Case backward_node(const Spec& s, const Inputs& in, const std::vector<double>* mask,
                          const std::vector<double>& o, const std::vector<double>& d_o,
                          const std::vector<double>& stats, DataType stats_type, std::mt19937& gen,
                          bool dbias) {
  const Shapes sh(s);
  ir::SdpaBwdAttrs a;
  static_cast<ir::SdpaOptions&>(a) = s.attrs(false);
  Case c(a);
  Inputs tmp;
  c.input(Role::Q, make_buf("q", sh.q, s.io)).set(in.q);
  c.input(Role::K, make_buf("k", sh.k, s.io)).set(in.k);
  c.input(Role::V, make_buf("v", sh.v, s.io)).set(in.v);
  add_optional(c, s, tmp, gen);
  if (!s.bias_dims.empty()) c.in.at(Role::BIAS).set(in.bias);
  if (mask) c.in.at(Role::DROPOUT_MASK).set(*mask);
  c.input(Role::O, make_buf("o", sh.o, s.io)).set(o);
  c.input(Role::DO, make_buf("do", sh.o, s.io)).set(d_o);
  c.input(Role::STATS, make_buf("stats", sh.stats, stats_type)).set(stats);
  c.output(Role::DQ, make_buf("dq", sh.q, s.io));
  c.output(Role::DK, make_buf("dk", sh.k, s.io));
  c.output(Role::DV, make_buf("dv", sh.v, s.io));
  if (dbias && !s.bias_dims.empty()) c.output(Role::DBIAS, make_buf("dbias", s.bias_dims, s.io));
  return c;
}

inline void backward_case(const Spec& s, uint32_t seed, const std::string& what) {
  SCOPED_TRACE(what);
  std::mt19937 gen(seed);
  const Shapes sh(s);
  ir::SdpaBwdAttrs a;
  static_cast<ir::SdpaOptions&>(a) = s.attrs(false);
  Case c(a);
  Inputs in;
  in.q = c.input(Role::Q, make_buf("q", sh.q, s.io, s.stride(s.hq, s.sq, s.d))).fill(gen, -1, 1);
  in.k = c.input(Role::K, make_buf("k", sh.k, s.io, s.stride(s.hk, s.skv, s.d))).fill(gen, -1, 1);
  in.v = c.input(Role::V, make_buf("v", sh.v, s.io, s.stride(s.hv, s.skv, s.dv))).fill(gen, -1, 1);
  add_optional(c, s, in, gen);
  // O and STATS as a forward would have stored them.
  const Fwd f = naive_forward(s, in);
  Buf& ob = c.input(Role::O, make_buf("o", sh.o, s.io, s.stride(s.hq, s.sq, s.dv)));
  ob.set(f.o);
  const auto o = ob.get();
  const auto d_o =
      c.input(Role::DO, make_buf("do", sh.o, s.io, s.stride(s.hq, s.sq, s.dv))).fill(gen, -1, 1);
  Buf& sb = c.input(Role::STATS, make_buf("stats", sh.stats, DataType::Float));
  sb.set(f.lse);
  const auto stats = sb.get();
  c.output(Role::DQ, make_buf("dq", sh.q, s.io, s.stride(s.hq, s.sq, s.d)));
  c.output(Role::DK, make_buf("dk", sh.k, s.io, s.stride(s.hk, s.skv, s.d)));
  c.output(Role::DV, make_buf("dv", sh.v, s.io, s.stride(s.hv, s.skv, s.dv)));
  if (!s.bias_dims.empty()) c.output(Role::DBIAS, make_buf("dbias", s.bias_dims, DataType::Float));
  Status st = c.run();
  ASSERT_TRUE(st.is_ok()) << st.message();
  const Bwd g = naive_backward(s, in, o, d_o, stats);
  expect_close(c.result(Role::DQ), g.dq, tol_of(s.io), "DQ");
  expect_close(c.result(Role::DK), g.dk, tol_of(s.io), "DK");
  expect_close(c.result(Role::DV), g.dv, tol_of(s.io), "DV");
  if (!s.bias_dims.empty()) expect_close(c.result(Role::DBIAS), g.dbias, 1e-5, "DBIAS");
}

// Backward against central differences of the forward kernel (fp64 storage):
// loss = sum(dO * O(Q, K, V, BIAS)).
inline void finite_difference_case(Spec s, uint32_t seed, const std::string& what) {
  SCOPED_TRACE(what);
  s.io = DataType::Double;
  const Shapes sh(s);
  std::mt19937 gen(seed);
  Inputs base;
  forward_node(s, false, gen, base);  // draws the random inputs
  std::vector<double> d_o(static_cast<size_t>(s.b * s.hq * s.sq * s.dv));
  std::uniform_real_distribution<double> dist(-1, 1);
  for (double& x : d_o) x = dist(gen);

  auto forward = [&](const Inputs& in, std::vector<double>* stats) {
    std::mt19937 unused(0);
    Inputs tmp;
    Case c = forward_node(s, false, unused, tmp);
    c.in.at(Role::Q).set(in.q);
    c.in.at(Role::K).set(in.k);
    c.in.at(Role::V).set(in.v);
    if (!s.bias_dims.empty()) c.in.at(Role::BIAS).set(in.bias);
    if (!s.mask_dims.empty()) c.in.at(Role::DROPOUT_MASK).set(in.mask);
    EXPECT_TRUE(c.run().is_ok());
    if (stats) *stats = c.result(Role::STATS);
    return c.result(Role::O);
  };
  auto loss = [&](const Inputs& in) {
    const auto o = forward(in, nullptr);
    double acc = 0.0;
    for (size_t i = 0; i < o.size(); ++i) acc += d_o[i] * o[i];
    return acc;
  };
  auto numeric = [&](std::vector<double> Inputs::*field) {
    Inputs in = base;
    std::vector<double> g((in.*field).size());
    const double h = 1e-5;
    for (size_t i = 0; i < g.size(); ++i) {
      const double keep = (in.*field)[i];
      (in.*field)[i] = keep + h;
      const double up = loss(in);
      (in.*field)[i] = keep - h;
      const double down = loss(in);
      (in.*field)[i] = keep;
      g[i] = (up - down) / (2 * h);
    }
    return g;
  };

  std::vector<double> stats;
  const auto o = forward(base, &stats);
  Case c = backward_node(s, base, s.mask_dims.empty() ? nullptr : &base.mask, o, d_o, stats, s.io,
                         gen, true);
  Status st = c.run();
  ASSERT_TRUE(st.is_ok()) << st.message();
  expect_close(c.result(Role::DQ), numeric(&Inputs::q), 1e-6, "DQ");
  expect_close(c.result(Role::DK), numeric(&Inputs::k), 1e-6, "DK");
  expect_close(c.result(Role::DV), numeric(&Inputs::v), 1e-6, "DV");
  if (!s.bias_dims.empty())
    expect_close(c.result(Role::DBIAS), numeric(&Inputs::bias), 1e-6, "DBIAS");
}

}  // namespace sdpa_harness
}  // namespace dnngraph::reference
