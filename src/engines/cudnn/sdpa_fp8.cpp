// FP8 attention with per-tensor scaling (sdpa_fp8, sdpa_fp8_backward), lowered to the op graph
// the cuDNN frontend builds for them on cuDNN 9.x (its composite FP8 SDPA nodes), which cuDNN's
// fused FP8 flash-attention engines recognise:
// Forward:
//   S  = Q.K^T (float) * scale * DESCALE_Q * DESCALE_K -> masks (sdpa_masked_scores)
//   P  = softmax(S) (float; STATS)      AMAX_S = AMAX(P)      P8 = P * SCALE_S in Q's type
//   X  = (P8.V) * DESCALE_S * DESCALE_V (float)   AMAX_O = AMAX(X)   O = X * SCALE_O
// Backward:
//   D   = rowsum(dO * O) * DESCALE_DO * DESCALE_O               float [b,hq,sq,1]
//   E   = exp(S - STATS), S as forward; P8 = E * SCALE_S in Q's type; P8^T a RESHAPE
//   dV  = fp8 matmul (P8^T . dO, DESCALE_S, DESCALE_DO, SCALE_DV, AMAX_DV)
//   dS  = ((dO.V^T) * DESCALE_DO * DESCALE_V - D) * E * scale   AMAX_DP = AMAX(dS)
//   dS8 = dS * SCALE_DP in dO's type; dS8^T a RESHAPE; K a RESHAPE of K^T back
//   dQ  = fp8 matmul (dS8 . K, DESCALE_DP, DESCALE_K, SCALE_DQ, AMAX_DQ)
//   dK  = fp8 matmul (dS8^T . Q, DESCALE_DP, DESCALE_Q, SCALE_DK, AMAX_DK)
// An fp8 matmul: C = (A.B [summed over query-head groups when C has fewer heads]) * descale_a
// * descale_b * scale_c, with amax = AMAX before scale_c (the frontend's matmul_fp8).
// Every AMAX is written (into a virtual tensor when the graph does not read it), as the
// frontend's graphs always have them. Sequence lengths are GEMM M/N/K overrides as in sdpa.
#include <map>

#include "engines/cudnn/sdpa_common.hpp"

namespace dnngraph::cudnn {
namespace {

using Desc = cudnnBackendDescriptor_t;

struct Fp8Lowering {
  LowerContext& cx;
  const ir::Node& n;
  std::string what;

  Result<Desc> port(Role r) { return cx.tensor(n.input(r)); }
  Result<Desc> out(Role r) { return cx.tensor(n.output(r)); }
  Result<Desc> vt(const std::string& tag, const std::vector<int64_t>& dim, DataType t) {
    return cx.virtual_tensor(what + "::" + tag, dim, t);
  }
  // y = x * factor (float compute) into a new virtual tensor of type t, or into `into`.
  Result<Desc> mul(const std::string& tag, Desc x, Desc factor, const std::vector<int64_t>& dim,
                   DataType t = DataType::Float, Desc into = nullptr) {
    Desc y = into;
    if (!y) {
      DNNGRAPH_ASSIGN_OR_RETURN(y, vt(tag, dim, t));
    }
    DNNGRAPH_TRY(add_pointwise(cx, what + " " + tag, CUDNN_POINTWISE_MUL, DataType::Float, x,
                               factor, nullptr, y));
    return y;
  }
  Status amax(const std::string& tag, Desc x, Desc y) {
    return add_reduction(cx, what + " " + tag, CUDNN_REDUCE_TENSOR_AMAX, DataType::Float, x, y);
  }
  // The frontend's matmul_fp8: C = (A.B, head-summed to `c_dim`'s heads) * da * db * sc.
  Status fp8_matmul(const std::string& tag, Desc a, Desc b, std::vector<int64_t> full_dim,
                    const std::vector<int64_t>& c_dim, Desc da, Desc db, Desc sc, Desc c,
                    Desc amax_c, Desc m, Desc nn, Desc k) {
    const DataType f32 = DataType::Float;
    DNNGRAPH_ASSIGN_OR_RETURN(auto acc, vt(tag, full_dim, f32));
    DNNGRAPH_TRY(sdpa_matmul(cx, what + " bmm " + tag, a, b, acc, m, nn, k));
    Desc last = acc;
    if (full_dim[1] != c_dim[1]) {
      DNNGRAPH_ASSIGN_OR_RETURN(auto red, vt(tag + "_head_sum", c_dim, f32));
      DNNGRAPH_TRY(add_reduction(cx, what + " " + tag + " head sum", CUDNN_REDUCE_TENSOR_ADD, f32,
                                 acc, red));
      last = red;
    }
    DNNGRAPH_ASSIGN_OR_RETURN(last, mul(tag + "_descale_a", last, da, c_dim));
    DNNGRAPH_ASSIGN_OR_RETURN(last, mul(tag + "_descale_b", last, db, c_dim));
    DNNGRAPH_TRY(mul(tag + "_scale_c", last, sc, c_dim, f32, c).status());
    return amax(tag + "_amax", last, amax_c);
  }
};

}  // namespace

Status lower_sdpa_fp8(LowerContext& cx, const ir::Node& n) {
  Fp8Lowering L{cx, n, detail::cat(op_kind_name(n.kind()), " '", n.name, "'")};
  const std::string& what = L.what;
  const auto& a = n.as<ir::SdpaFp8Attrs>();
  ir::Tensor q = n.input(Role::Q), k = n.input(Role::K);
  DNNGRAPH_ASSIGN_OR_RETURN(const SdpaShape& s, sdpa_shape(cx, n, what, a));
  const DataType f32 = DataType::Float;
  DNNGRAPH_ASSIGN_OR_RETURN(auto tq, cx.tensor(q));
  DNNGRAPH_ASSIGN_OR_RETURN(auto tk, cx.tensor_as(k, sdpa_transposed(cx.view(k))));
  DNNGRAPH_ASSIGN_OR_RETURN(auto tv, L.port(Role::V));
  DNNGRAPH_ASSIGN_OR_RETURN(auto to, L.out(Role::O));
  DNNGRAPH_ASSIGN_OR_RETURN(auto lens, sdpa_seq_lens(cx, n));
  DNNGRAPH_ASSIGN_OR_RETURN(auto scale, sdpa_scale(cx, n, what, a, s.d));
  DNNGRAPH_ASSIGN_OR_RETURN(auto dq, L.port(Role::DESCALE_Q));
  DNNGRAPH_ASSIGN_OR_RETURN(auto dk, L.port(Role::DESCALE_K));
  DNNGRAPH_ASSIGN_OR_RETURN(auto last,
                            sdpa_masked_scores(cx, n, what, a, s, tq, tk, scale, lens, {dq, dk}));
  Desc stats = nullptr;
  if (ir::Tensor st = n.output(Role::STATS)) {
    DNNGRAPH_ASSIGN_OR_RETURN(stats, cx.tensor(st));
  } else if (cx.variant.sdpa_virtual_stats) {
    DNNGRAPH_ASSIGN_OR_RETURN(stats, L.vt("stats", {s.b, s.hq, s.sq, 1}, f32));
  }
  const std::vector<int64_t> sdim = s.sdim(), odim{s.b, s.hq, s.sq, s.dv};
  DNNGRAPH_ASSIGN_OR_RETURN(auto p, L.vt("P", sdim, f32));
  DNNGRAPH_TRY(add_softmax(cx, what + " softmax", sdim, last, p, stats));
  DNNGRAPH_ASSIGN_OR_RETURN(auto amax_s, L.out(Role::AMAX_S));
  DNNGRAPH_TRY(L.amax("amax_S", p, amax_s));
  DNNGRAPH_ASSIGN_OR_RETURN(auto scale_s, L.port(Role::SCALE_S));
  DNNGRAPH_ASSIGN_OR_RETURN(auto p8, L.mul("P_scaled", p, scale_s, sdim, q->data_type));
  DNNGRAPH_ASSIGN_OR_RETURN(auto ds, L.port(Role::DESCALE_S));
  DNNGRAPH_ASSIGN_OR_RETURN(auto dv, L.port(Role::DESCALE_V));
  DNNGRAPH_ASSIGN_OR_RETURN(auto so, L.port(Role::SCALE_O));
  DNNGRAPH_ASSIGN_OR_RETURN(auto amax_o, L.out(Role::AMAX_O));
  return L.fp8_matmul("P.V", p8, tv, odim, odim, ds, dv, so, to, amax_o, lens.q, nullptr, lens.kv);
}

Status lower_sdpa_fp8_backward(LowerContext& cx, const ir::Node& n) {
  Fp8Lowering L{cx, n, detail::cat(op_kind_name(n.kind()), " '", n.name, "'")};
  const std::string& what = L.what;
  const auto& a = n.as<ir::SdpaFp8BwdAttrs>();
  ir::Tensor q = n.input(Role::Q), k = n.input(Role::K), v = n.input(Role::V);
  ir::Tensor d_o = n.input(Role::DO);
  DNNGRAPH_ASSIGN_OR_RETURN(const SdpaShape& s, sdpa_shape(cx, n, what, a));
  const DataType f32 = DataType::Float;
  const TensorView& kview = cx.view(k);
  DNNGRAPH_ASSIGN_OR_RETURN(auto tq, cx.tensor(q));
  DNNGRAPH_ASSIGN_OR_RETURN(auto tkt, cx.tensor_as(k, sdpa_transposed(kview)));
  DNNGRAPH_ASSIGN_OR_RETURN(auto tvt, cx.tensor_as(v, sdpa_transposed(cx.view(v))));
  DNNGRAPH_ASSIGN_OR_RETURN(auto to, L.port(Role::O));
  DNNGRAPH_ASSIGN_OR_RETURN(auto tdo, cx.tensor(d_o));
  DNNGRAPH_TRY(sdpa_check_stats_layout(cx, what, n.input(Role::STATS)));
  DNNGRAPH_ASSIGN_OR_RETURN(auto tst, L.port(Role::STATS));
  DNNGRAPH_ASSIGN_OR_RETURN(auto lens, sdpa_seq_lens(cx, n));
  DNNGRAPH_ASSIGN_OR_RETURN(auto scale, sdpa_scale(cx, n, what, a, s.d));
  std::map<Role, Desc> f;
  for (Role r : {Role::DESCALE_Q, Role::DESCALE_K, Role::DESCALE_V, Role::DESCALE_O,
                 Role::DESCALE_DO, Role::DESCALE_S, Role::DESCALE_DP, Role::SCALE_S, Role::SCALE_DQ,
                 Role::SCALE_DK, Role::SCALE_DV, Role::SCALE_DP}) {
    DNNGRAPH_ASSIGN_OR_RETURN(f[r], L.port(r));
  }
  auto F = [&](Role r) { return f.at(r); };
  const std::vector<int64_t> sdim = s.sdim(), row{s.b, s.hq, s.sq, 1};

  // D = rowsum(dO * O) * DESCALE_DO * DESCALE_O
  DNNGRAPH_ASSIGN_OR_RETURN(auto doo, L.mul("dO_O", tdo, to, {s.b, s.hq, s.sq, s.dv}));
  DNNGRAPH_ASSIGN_OR_RETURN(auto dsum, L.vt("dO_O_sum", row, f32));
  DNNGRAPH_TRY(add_reduction(cx, what + " rowsum(dO*O)", CUDNN_REDUCE_TENSOR_ADD, f32, doo, dsum));
  DNNGRAPH_ASSIGN_OR_RETURN(auto d1, L.mul("D_descale_dO", dsum, F(Role::DESCALE_DO), row));
  DNNGRAPH_ASSIGN_OR_RETURN(auto dd, L.mul("D_descale_O", d1, F(Role::DESCALE_O), row));

  // E = exp(S - STATS); P8 = E * SCALE_S (Q's type), its transpose by a reshape.
  DNNGRAPH_ASSIGN_OR_RETURN(auto sc, sdpa_masked_scores(cx, n, what, a, s, tq, tkt, scale, lens,
                                                        {F(Role::DESCALE_Q), F(Role::DESCALE_K)}));
  DNNGRAPH_ASSIGN_OR_RETURN(auto sub, L.vt("S_minus_stats", sdim, f32));
  DNNGRAPH_TRY(
      add_pointwise(cx, what + " S-stats", CUDNN_POINTWISE_SUB, f32, sc, tst, nullptr, sub));
  DNNGRAPH_ASSIGN_OR_RETURN(auto e, L.vt("E", sdim, f32));
  DNNGRAPH_TRY(
      add_pointwise(cx, what + " exp", CUDNN_POINTWISE_EXP, f32, sub, nullptr, nullptr, e));
  DNNGRAPH_ASSIGN_OR_RETURN(auto p8, L.mul("P_scaled", e, F(Role::SCALE_S), sdim, q->data_type));
  const TensorView tview{{s.b, s.hq, s.skv, s.sq}, {s.hq * s.sq * s.skv, s.sq * s.skv, 1, s.skv}};
  DNNGRAPH_ASSIGN_OR_RETURN(auto pt, cx.virtual_tensor(what + "::P^T", tview, q->data_type));
  DNNGRAPH_TRY(sdpa_reshape(cx, what + " P^T", p8, pt));

  // dV = P8^T . dO
  DNNGRAPH_ASSIGN_OR_RETURN(auto tdv, L.out(Role::DV));
  DNNGRAPH_ASSIGN_OR_RETURN(auto amax_dv, L.out(Role::AMAX_DV));
  DNNGRAPH_TRY(L.fp8_matmul("P^T.dO", pt, tdo, {s.b, s.hq, s.skv, s.dv}, {s.b, s.hv, s.skv, s.dv},
                            F(Role::DESCALE_S), F(Role::DESCALE_DO), F(Role::SCALE_DV), tdv,
                            amax_dv, lens.kv, nullptr, lens.q));

  // dS = ((dO.V^T) * DESCALE_DO * DESCALE_V - D) * E * scale; dS8 = dS * SCALE_DP (dO's type).
  DNNGRAPH_ASSIGN_OR_RETURN(auto dp, L.vt("dP", sdim, f32));
  DNNGRAPH_TRY(sdpa_matmul(cx, what + " bmm dO.V^T", tdo, tvt, dp, lens.q, lens.kv));
  DNNGRAPH_ASSIGN_OR_RETURN(auto dp1, L.mul("dP_descale_dO", dp, F(Role::DESCALE_DO), sdim));
  DNNGRAPH_ASSIGN_OR_RETURN(auto dp2, L.mul("dP_descale_V", dp1, F(Role::DESCALE_V), sdim));
  DNNGRAPH_ASSIGN_OR_RETURN(auto dpd, L.vt("dP_minus_D", sdim, f32));
  DNNGRAPH_TRY(add_pointwise(cx, what + " dP-D", CUDNN_POINTWISE_SUB, f32, dp2, dd, nullptr, dpd));
  DNNGRAPH_ASSIGN_OR_RETURN(auto dpe, L.mul("dP_E", dpd, e, sdim));
  DNNGRAPH_ASSIGN_OR_RETURN(auto ds, L.mul("dS", dpe, scale, sdim));
  DNNGRAPH_ASSIGN_OR_RETURN(auto amax_dp, L.out(Role::AMAX_DP));
  DNNGRAPH_TRY(L.amax("amax_dP", ds, amax_dp));
  DNNGRAPH_ASSIGN_OR_RETURN(auto ds8,
                            L.mul("dS_scaled", ds, F(Role::SCALE_DP), sdim, d_o->data_type));

  // dQ = dS8 . K, K viewed back in its own layout through a reshape of K^T.
  DNNGRAPH_ASSIGN_OR_RETURN(auto kn, cx.virtual_tensor(what + "::K", kview, k->data_type));
  DNNGRAPH_TRY(sdpa_reshape(cx, what + " K", tkt, kn));
  DNNGRAPH_ASSIGN_OR_RETURN(auto tdq, L.out(Role::DQ));
  DNNGRAPH_ASSIGN_OR_RETURN(auto amax_dq, L.out(Role::AMAX_DQ));
  const std::vector<int64_t> qdim{s.b, s.hq, s.sq, s.d};
  DNNGRAPH_TRY(L.fp8_matmul("dS.K", ds8, kn, qdim, qdim, F(Role::DESCALE_DP), F(Role::DESCALE_K),
                            F(Role::SCALE_DQ), tdq, amax_dq, lens.q, nullptr, lens.kv));

  // dK = dS8^T . Q
  DNNGRAPH_ASSIGN_OR_RETURN(auto dst, cx.virtual_tensor(what + "::dS^T", tview, d_o->data_type));
  DNNGRAPH_TRY(sdpa_reshape(cx, what + " dS^T", ds8, dst));
  DNNGRAPH_ASSIGN_OR_RETURN(auto tdk, L.out(Role::DK));
  DNNGRAPH_ASSIGN_OR_RETURN(auto amax_dk, L.out(Role::AMAX_DK));
  return L.fp8_matmul("dS^T.Q", dst, tq, {s.b, s.hq, s.skv, s.d}, {s.b, s.hk, s.skv, s.d},
                      F(Role::DESCALE_DP), F(Role::DESCALE_Q), F(Role::SCALE_DK), tdk, amax_dk,
                      lens.kv, nullptr, lens.q);
}

}  // namespace dnngraph::cudnn
