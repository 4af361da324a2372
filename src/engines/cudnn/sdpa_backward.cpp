// Scaled dot-product attention, backward, as the fused flash-attention backward graph cuDNN's
// engines recognise (the op sequence and layouts of cuDNN's own SDPA backward graphs):
//   D    = rowsum(dO * O) * SCALE_INV (1 without dropout)  float [b,hq,sq,1]
//   S    = scale * Q.K^T (+ bias), masks as forward   float [b,hq,sq,skv]
//   P    = exp(S - STATS)                            (padding mask applied again after the sub)
//   dV   = Pd^T . dO       Pd = P * MASK * SCALE (P without dropout); Pd^T: a RESHAPE to
//                          [b,hq,skv,sq] (transposed strides), io type
//   dP   = dO . V^T        V described transposed
//   dS   = scale * (P * (dP * MASK - D) * SCALE)   (MASK = SCALE = 1 without dropout; with
//          score_mod_bprop, its ops map P * (..) * SCALE before the scale: the frontend's place)
//   DBIAS = sum of dS / scale over the dims BIAS broadcasts
//   DSINK = sum over b, s_q of exp(SINK - STATS) * D (cuDNN negates it; frontend form)
//   dK   = dS^T . Q        dS^T: a RESHAPE like P^T
//   dQ   = dS . K          K: a RESHAPE of the transposed K back to [b,hk,skv,d]
// dQ (lowering_variants): first as the frontend forms it on cuDNN 9, the matmul into a float
// accumulator in the plan's workspace (a scratch tensor, as are the softmax sums D) then an
// identity into dQ; else written by the matmul directly (cuDNN's "dP workspace" form, which
// materialises dS in the workspace cuDNN sizes; the only form with dBias).
// GQA/MQA: dK / dV come out per query head ([b,hq,skv,d], io type) and are summed over the
// heads that share a K / V head by a reduction.
// Sequence lengths become GEMM M/N/K overrides as in the forward. Ragged (THD) tensors carry
// their offsets as in the forward (sdpa_set_ragged; not yet checked on a GPU).
// Dropout (sdpa_dropout): the same RNG operation as the forward, so the same SEED / OFFSET give
// the same mask. DBIAS (with a BIAS input) is dS before the attention scale, reduced over the
// dims the bias broadcasts.
#include "engines/cudnn/sdpa_common.hpp"

namespace dnngraph::cudnn {

namespace {

// DSINK_TOKEN, as the frontend builds it: exp(SINK - STATS) * D summed over b and s_q into
// [1,hq,1,1]; cuDNN's fused kernel applies the minus sign of -sum(...) itself (the frontend
// says so; not yet checked on a GPU). `tst`: STATS, `dsum`: D, `row`: [b,hq,sq,1].
Status add_dsink(LowerContext& cx, const ir::Node& n, const std::string& what,
                 const ir::Tensor& dsink, cudnnBackendDescriptor_t tst,
                 cudnnBackendDescriptor_t dsum, const std::vector<int64_t>& row) {
  const DataType f32 = DataType::Float;
  auto vt = [&](const std::string& tag) { return cx.virtual_tensor(what + "::" + tag, row, f32); };
  auto pw = [&](const std::string& tag, cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t y) {
    return add_pointwise(cx, what + " " + tag, mode, f32, x, b, nullptr, y);
  };
  DNNGRAPH_ASSIGN_OR_RETURN(auto tsink, cx.tensor(n.input(Role::SINK_TOKEN)));
  DNNGRAPH_ASSIGN_OR_RETURN(auto tdsink, cx.tensor(dsink));
  DNNGRAPH_ASSIGN_OR_RETURN(auto sub_sink, vt("sink_minus_stats"));
  DNNGRAPH_ASSIGN_OR_RETURN(auto exp_sink, vt("exp_sink"));
  DNNGRAPH_ASSIGN_OR_RETURN(auto per_row, vt("exp_sink_D"));
  DNNGRAPH_TRY(pw("sink-stats", CUDNN_POINTWISE_SUB, tsink, tst, sub_sink));
  DNNGRAPH_TRY(pw("exp(sink-stats)", CUDNN_POINTWISE_EXP, sub_sink, nullptr, exp_sink));
  DNNGRAPH_TRY(pw("exp(sink-stats)*D", CUDNN_POINTWISE_MUL, exp_sink, dsum, per_row));
  return add_reduction(cx, what + " dSink", CUDNN_REDUCE_TENSOR_ADD, f32, per_row, tdsink);
}

// dst = lhs^T . rhs into `out` (dK, dV); summed over query-head groups when `out` has fewer
// heads than Q (GQA / MQA): per query head in the io type, then a reduction.
Status add_grad_matmul(LowerContext& cx, const std::string& what, const SdpaShape& s,
                       const SdpaSeqLens& lens, DataType io, const std::string& tag,
                       cudnnBackendDescriptor_t lhs_t, cudnnBackendDescriptor_t rhs,
                       cudnnBackendDescriptor_t out, int64_t out_heads, int64_t width) {
  if (out_heads == s.hq)
    return sdpa_matmul(cx, what + " bmm " + tag, lhs_t, rhs, out, lens.kv, nullptr, lens.q);
  DNNGRAPH_ASSIGN_OR_RETURN(auto per_head, cx.virtual_tensor(what + "::" + tag + "_per_query_head",
                                                             {s.b, s.hq, s.skv, width}, io));
  DNNGRAPH_TRY(
      sdpa_matmul(cx, what + " bmm " + tag, lhs_t, rhs, per_head, lens.kv, nullptr, lens.q));
  return add_reduction(cx, what + " " + tag + " head sum", CUDNN_REDUCE_TENSOR_ADD, DataType::Float,
                       per_head, out);
}

}  // namespace

Status lower_sdpa_backward(LowerContext& cx, const ir::Node& n) {
  const std::string what = detail::cat(op_kind_name(n.kind()), " '", n.name, "'");
  const auto& a = n.as<ir::SdpaBwdAttrs>();
  ir::Tensor q = n.input(Role::Q), k = n.input(Role::K), v = n.input(Role::V), o = n.input(Role::O);
  ir::Tensor d_o = n.input(Role::DO), stats = n.input(Role::STATS);
  ir::Tensor dq = n.output(Role::DQ), dk = n.output(Role::DK), dv = n.output(Role::DV);
  DNNGRAPH_ASSIGN_OR_RETURN(const SdpaShape& s, sdpa_shape(cx, n, what, a));
  const DataType f32 = DataType::Float;
  const DataType io = q->data_type;

  sdpa_set_ragged(cx, n);
  const TensorView& kview = cx.view(k);
  DNNGRAPH_ASSIGN_OR_RETURN(auto tq, cx.tensor(q));
  DNNGRAPH_ASSIGN_OR_RETURN(auto tkt, cx.tensor_as(k, sdpa_transposed(kview)));
  DNNGRAPH_ASSIGN_OR_RETURN(auto tvt, cx.tensor_as(v, sdpa_transposed(cx.view(v))));
  DNNGRAPH_ASSIGN_OR_RETURN(auto to, cx.tensor(o));
  DNNGRAPH_ASSIGN_OR_RETURN(auto tdo, cx.tensor(d_o));
  DNNGRAPH_TRY(sdpa_check_stats_layout(cx, what, stats));
  DNNGRAPH_ASSIGN_OR_RETURN(auto tst, cx.tensor(stats));
  DNNGRAPH_ASSIGN_OR_RETURN(auto tdq, cx.tensor(dq));
  DNNGRAPH_ASSIGN_OR_RETURN(auto tdk, cx.tensor(dk));
  DNNGRAPH_ASSIGN_OR_RETURN(auto tdv, cx.tensor(dv));
  DNNGRAPH_ASSIGN_OR_RETURN(auto lens, sdpa_seq_lens(cx, n));
  DNNGRAPH_ASSIGN_OR_RETURN(auto scale, sdpa_scale(cx, n, what, a, s.d));
  auto vt = [&](const std::string& tag, const std::vector<int64_t>& dim, DataType t) {
    return cx.virtual_tensor(what + "::" + tag, dim, t);
  };
  auto pw = [&](const std::string& tag, cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t y) {
    return add_pointwise(cx, what + " " + tag, mode, f32, x, b, nullptr, y);
  };
  const std::vector<int64_t> sdim = s.sdim(), row{s.b, s.hq, s.sq, 1};

  // D = rowsum(dO * O): the softmax backward's per-row term.
  DNNGRAPH_ASSIGN_OR_RETURN(auto doo, vt("dO_O", {s.b, s.hq, s.sq, s.dv}, f32));
  DNNGRAPH_ASSIGN_OR_RETURN(auto dsum, vt("dO_O_sum", row, f32));
  const bool accumulator = cx.variant.sdpa_dq_accumulator;
  DNNGRAPH_ASSIGN_OR_RETURN(
      auto dsum1,
      accumulator ? cx.scratch_tensor(what + "::softmax_sum", {row, {s.hq * s.sq, s.sq, 1, 1}}, f32)
                  : vt("softmax_sum", row, f32));
  DNNGRAPH_TRY(pw("dO*O", CUDNN_POINTWISE_MUL, tdo, to, doo));
  DNNGRAPH_TRY(add_reduction(cx, what + " rowsum(dO*O)", CUDNN_REDUCE_TENSOR_ADD, f32, doo, dsum));
  if (ir::Tensor dsink = n.output(Role::DSINK_TOKEN))
    DNNGRAPH_TRY(add_dsink(cx, n, what, dsink, tst, dsum, row));
  DNNGRAPH_ASSIGN_OR_RETURN(auto drop, sdpa_dropout(cx, n, what, a, s, /*backward=*/true));
  // Without dropout the mask and 1/scale are a constant 1 (only created then: every tensor
  // the plan binds must be used by the graph, or cuDNN refuses the variant pack).
  cudnnBackendDescriptor_t mask = drop.mask, scale_inv = drop.scale_inv;
  if (!drop.any()) {
    DNNGRAPH_ASSIGN_OR_RETURN(mask = scale_inv,
                              cx.constant(what + "::one", ir::Scalar::of_float(1.0), 4));
  }
  DNNGRAPH_TRY(pw("softmax_sum*scale_inv", CUDNN_POINTWISE_MUL, dsum, scale_inv, dsum1));

  // P = exp(S - STATS).
  DNNGRAPH_ASSIGN_OR_RETURN(auto sc, sdpa_masked_scores(cx, n, what, a, s, tq, tkt, scale, lens));
  DNNGRAPH_ASSIGN_OR_RETURN(auto sub, vt("S_minus_stats", sdim, f32));
  DNNGRAPH_TRY(pw("S-stats", CUDNN_POINTWISE_SUB, sc, tst, sub));
  cudnnBackendDescriptor_t before_exp = sub;
  if (lens.any()) {
    DNNGRAPH_ASSIGN_OR_RETURN(before_exp,
                              sdpa_padding_select(cx, what, "padding2", before_exp, s, lens));
  }
  DNNGRAPH_ASSIGN_OR_RETURN(auto p, vt("P", sdim, f32));
  DNNGRAPH_TRY(pw("exp", CUDNN_POINTWISE_EXP, before_exp, nullptr, p));

  // [b,hq,sq,skv] float -> its transpose [b,hq,skv,sq] in the io type, same packed layout.
  const TensorView tview{{s.b, s.hq, s.skv, s.sq}, {s.hq * s.sq * s.skv, s.sq * s.skv, 1, s.skv}};
  auto grad = [&](const std::string& tag, cudnnBackendDescriptor_t lhs_t,
                  cudnnBackendDescriptor_t rhs, cudnnBackendDescriptor_t out, int64_t out_heads,
                  int64_t width) {
    return add_grad_matmul(cx, what, s, lens, io, tag, lhs_t, rhs, out, out_heads, width);
  };

  // dV = P^T . dO
  cudnnBackendDescriptor_t pd = p;
  if (drop.any()) {
    DNNGRAPH_ASSIGN_OR_RETURN(auto masked, vt("P_masked", sdim, f32));
    DNNGRAPH_ASSIGN_OR_RETURN(auto dropped, vt("P_dropout", sdim, f32));
    DNNGRAPH_TRY(pw("P*mask", CUDNN_POINTWISE_MUL, pd, drop.mask, masked));
    DNNGRAPH_TRY(pw("P*dropout_scale", CUDNN_POINTWISE_MUL, masked, drop.scale, dropped));
    pd = dropped;
  }
  DNNGRAPH_ASSIGN_OR_RETURN(auto pt, cx.virtual_tensor(what + "::P^T", tview, io));
  DNNGRAPH_TRY(sdpa_reshape(cx, what + " P^T", pd, pt));
  DNNGRAPH_TRY(grad("P^T.dO", pt, tdo, tdv, s.hv, s.dv));

  // dS = scale * P * (dP * 1 - D), dP = dO . V^T
  DNNGRAPH_ASSIGN_OR_RETURN(auto dp, vt("dP", sdim, f32));
  DNNGRAPH_ASSIGN_OR_RETURN(auto dp1, vt("dP_1", sdim, f32));
  DNNGRAPH_ASSIGN_OR_RETURN(auto dpd, vt("dP_minus_D", sdim, f32));
  DNNGRAPH_ASSIGN_OR_RETURN(auto pds, vt("P_dP", sdim, f32));
  DNNGRAPH_ASSIGN_OR_RETURN(auto ds, vt("dS", sdim, f32));
  DNNGRAPH_TRY(sdpa_matmul(cx, what + " bmm dO.V^T", tdo, tvt, dp, lens.q, lens.kv));
  DNNGRAPH_TRY(pw("dP*mask", CUDNN_POINTWISE_MUL, dp, mask, dp1));
  DNNGRAPH_TRY(pw("dP-D", CUDNN_POINTWISE_SUB, dp1, dsum1, dpd));
  DNNGRAPH_TRY(pw("(dP-D)*P", CUDNN_POINTWISE_MUL, dpd, p, pds));
  cudnnBackendDescriptor_t before_scale = pds;
  if (drop.any()) {
    DNNGRAPH_ASSIGN_OR_RETURN(auto r, vt("P_dP_dropout", sdim, f32));
    DNNGRAPH_TRY(pw("dS*dropout_scale", CUDNN_POINTWISE_MUL, before_scale, drop.scale, r));
    before_scale = r;
  }
  // DBIAS = dS before the attention scale, summed over the dims BIAS broadcasts (batch, heads).
  if (ir::Tensor dbias = n.output(Role::DBIAS)) {
    DNNGRAPH_ASSIGN_OR_RETURN(auto tdb, cx.tensor(dbias));
    DNNGRAPH_TRY(
        add_reduction(cx, what + " dBias", CUDNN_REDUCE_TENSOR_ADD, f32, before_scale, tdb));
  }
  DNNGRAPH_ASSIGN_OR_RETURN(before_scale,
                            sdpa_score_mod(cx, n, what, "score_mod_bprop", before_scale));
  DNNGRAPH_TRY(pw("dS*scale", CUDNN_POINTWISE_MUL, before_scale, scale, ds));

  // dK = dS^T . Q
  DNNGRAPH_ASSIGN_OR_RETURN(auto dst, cx.virtual_tensor(what + "::dS^T", tview, io));
  DNNGRAPH_TRY(sdpa_reshape(cx, what + " dS^T", ds, dst));
  DNNGRAPH_TRY(grad("dS^T.Q", dst, tq, tdk, s.hk, s.d));

  // dQ = dS . K, K viewed back in its own layout through a reshape of K^T.
  DNNGRAPH_ASSIGN_OR_RETURN(auto kn, cx.virtual_tensor(what + "::K", kview, k->data_type));
  DNNGRAPH_TRY(sdpa_reshape(cx, what + " K", tkt, kn));
  if (!accumulator)
    return sdpa_matmul(cx, what + " bmm dS.K", ds, kn, tdq, lens.q, nullptr, lens.kv);
  const std::vector<int64_t> qdim{s.b, s.hq, s.sq, s.d};
  DNNGRAPH_ASSIGN_OR_RETURN(auto acc, cx.scratch_tensor(what + "::dQ_accumulator",
                                                        {qdim, ir::packed_strides(qdim)}, f32));
  DNNGRAPH_TRY(sdpa_matmul(cx, what + " bmm dS.K", ds, kn, acc, lens.q, nullptr, lens.kv));
  return add_pointwise(cx, what + " dQ", CUDNN_POINTWISE_IDENTITY, f32, acc, nullptr, nullptr, tdq);
}

}  // namespace dnngraph::cudnn
