// Scaled dot-product attention, forward, as the fused graph cuDNN's flash-attention engines
// recognise: S = Q.K^T (float) -> S * scale -> [+ bias] -> [padding mask: GEN_INDEX row/col
// compared with SEQ_LEN_Q / SEQ_LEN_KV] -> [right bound / causal, left bound: GEN_INDEX,
// integer compares, BINARY_SELECT with the lowest float] -> softmax (stats = max + log(sum))
// -> P.V. With sequence lengths the matmuls carry them as GEMM M/N/K overrides.
// Padded query rows: cuDNN writes O = 0 there like the reference, but STATS = -inf where the
// reference has +inf (docs/cudnn-engine.md).
// GQA/MQA: K and V keep their fewer heads; the engines broadcast them over the query heads.
// Lowering variants (lowering_variants in engine.cpp, tried in order until cuDNN proposes an
// engine): P in V's data type (what the fused kernels read); the same with the stats computed
// into a virtual tensor in inference; P in float.
// Dropout: P * MASK * SCALE after the softmax (sdpa_dropout; the RNG is cuDNN's Philox, so its
// keep mask differs from the reference engine's: tests compare through RNG_DUMP and the mask
// form). Not lowered (NotSupported, named): a left window bound with a padding mask or with a
// shifted (bottom-right, s_q != s_kv) diagonal.
// This file also holds the pieces sdpa_backward.cpp shares (sdpa_common.hpp).
#include <algorithm>
#include <cmath>
#include <limits>

#include "engines/cudnn/sdpa_common.hpp"

namespace dnngraph::cudnn {

Status sdpa_unsupported(const std::string& what, const std::string& feature) {
  return make_error(ErrorCode::NotSupported, what, ": ", feature,
                    " is not lowered to cuDNN (the reference engine runs it)");
}

Result<SdpaShape> sdpa_shape(LowerContext& cx, const ir::Node& n, const std::string& what,
                             const ir::SdpaOptions& a) {
  ir::Tensor q = n.input(Role::Q), k = n.input(Role::K), v = n.input(Role::V);
  const TensorView &qv = cx.view(q), &kv = cx.view(k), &vv = cx.view(v);
  if (qv.dim.size() != 4 || kv.dim.size() != 4 || vv.dim.size() != 4)
    return make_error(ErrorCode::NotSupported, what, ": Q, K and V must be 4-D [b,h,s,d], got ",
                      q->describe(), ", ", k->describe(), " and ", v->describe());
  SdpaShape s{qv.dim[0], qv.dim[1], kv.dim[1], vv.dim[1],
              qv.dim[2], kv.dim[2], qv.dim[3], vv.dim[3]};
  if (s.hk <= 0 || s.hv <= 0 || s.hq % s.hk != 0 || s.hq % s.hv != 0)
    return make_error(ErrorCode::NotSupported, what, ": query heads (", s.hq,
                      ") must be a multiple of the K heads (", s.hk, ") and V heads (", s.hv, ")");
  return s;
}

Result<SdpaSeqLens> sdpa_seq_lens(LowerContext& cx, const ir::Node& n) {
  SdpaSeqLens l;
  if (ir::Tensor t = n.input(Role::SEQ_LEN_Q)) {
    auto r = cx.tensor(t);
    if (!r) return r.status();
    l.q = r.value();
  }
  if (ir::Tensor t = n.input(Role::SEQ_LEN_KV)) {
    auto r = cx.tensor(t);
    if (!r) return r.status();
    l.kv = r.value();
  }
  return l;
}

Result<SdpaDropout> sdpa_dropout(LowerContext& cx, const ir::Node& n, const std::string& what,
                                 const ir::SdpaOptions& a, const SdpaShape& s, bool backward) {
  SdpaDropout d;
  ir::Tensor mask = n.input(Role::DROPOUT_MASK), scale = n.input(Role::DROPOUT_SCALE);
  if (mask || scale) {
    if (!mask || !scale)
      return make_error(ErrorCode::InvalidGraph, what,
                        ": dropout with a mask needs both DROPOUT_MASK and DROPOUT_SCALE");
    // The fused backward with a DROPOUT_MASK tensor (lowered like the RNG form, D scaled by
    // 1/SCALE) runs and returns wrong dQ, while the same graph with the RNG mask is right
    // (docs/cudnn-engine.md, "What is lowered").
    if (backward)
      return sdpa_unsupported(what,
                              "dropout with a DROPOUT_MASK tensor in the backward (cuDNN "
                              "computes wrong gradients for it); use dropout_probability with "
                              "SEED / OFFSET, or the reference engine");
    auto tm = cx.tensor(mask), ts = cx.tensor(scale);
    if (!tm) return tm.status();
    if (!ts) return ts.status();
    d.mask = tm.value();
    d.scale = ts.value();
    return d;
  }
  if (!a.dropout_probability || *a.dropout_probability <= 0.0) return d;
  const double p = *a.dropout_probability;
  ir::Tensor seed = n.input(Role::SEED), offset = n.input(Role::OFFSET);
  auto tseed = cx.tensor(seed), toff = cx.tensor(offset);
  if (!tseed) return tseed.status();
  if (!toff) return toff.status();
  cudnnBackendDescriptor_t y = nullptr;
  if (ir::Tensor dump = n.output(Role::RNG_DUMP)) {
    auto r = cx.tensor(dump);
    if (!r) return r.status();
    y = r.value();
  } else {
    auto r = cx.virtual_tensor(what + "::dropout_mask", s.sdim(), DataType::Float);
    if (!r) return r.status();
    y = r.value();
  }
  auto rd = Descriptor::create(CUDNN_BACKEND_RNG_DESCRIPTOR, what + " (rng desc)");
  if (!rd) return rd.status();
  const cudnnRngDistribution_t dist = CUDNN_RNG_DISTRIBUTION_BERNOULLI;
  const double keep = 1.0 - p;
  DNNGRAPH_TRY(rd->set(CUDNN_ATTR_RNG_DISTRIBUTION, CUDNN_TYPE_RNG_DISTRIBUTION, dist));
  DNNGRAPH_TRY(rd->set(CUDNN_ATTR_RNG_BERNOULLI_DIST_PROBABILITY, CUDNN_TYPE_DOUBLE, keep));
  DNNGRAPH_TRY(rd->finalize(ErrorCode::NotSupported));
  auto od = Descriptor::create(CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR, what + " dropout rng");
  if (!od) return od.status();
  DNNGRAPH_TRY(od->set(CUDNN_ATTR_OPERATION_RNG_YDESC, y));
  DNNGRAPH_TRY(od->set(CUDNN_ATTR_OPERATION_RNG_SEED, tseed.value()));
  DNNGRAPH_TRY(od->set(CUDNN_ATTR_OPERATION_RNG_OFFSET_DESC, toff.value()));
  DNNGRAPH_TRY(od->set(CUDNN_ATTR_OPERATION_RNG_DESC, rd.value()));
  cx.keep(std::move(rd.value()));
  DNNGRAPH_TRY(cx.add_op(std::move(od.value())));
  auto sc = cx.constant(what + "::dropout_scale", ir::Scalar::of_float(1.0 / keep), 4);
  if (!sc) return sc.status();
  d.mask = y;
  d.scale = sc.value();
  if (backward) {
    auto inv = cx.constant(what + "::dropout_scale_inv", ir::Scalar::of_float(keep), 4);
    if (!inv) return inv.status();
    d.scale_inv = inv.value();
  }
  return d;
}

TensorView sdpa_transposed(const TensorView& v) {
  return {{v.dim[0], v.dim[1], v.dim[3], v.dim[2]},
          {v.stride[0], v.stride[1], v.stride[3], v.stride[2]}};
}

Status sdpa_matmul(LowerContext& cx, const std::string& name, cudnnBackendDescriptor_t a,
                   cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c,
                   cudnnBackendDescriptor_t m_override, cudnnBackendDescriptor_t n_override,
                   cudnnBackendDescriptor_t k_override) {
  auto md = Descriptor::create(CUDNN_BACKEND_MATMUL_DESCRIPTOR, name + " (matmul desc)");
  if (!md) return md.status();
  const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  DNNGRAPH_TRY(md->set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, comp));
  DNNGRAPH_TRY(md->finalize(ErrorCode::NotSupported));
  auto od = Descriptor::create(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, name);
  if (!od) return od.status();
  DNNGRAPH_TRY(od->set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a));
  DNNGRAPH_TRY(od->set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b));
  DNNGRAPH_TRY(od->set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c));
  DNNGRAPH_TRY(od->set(CUDNN_ATTR_OPERATION_MATMUL_DESC, md.value()));
  if (m_override)
    DNNGRAPH_TRY(od->set(CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, m_override));
  if (n_override)
    DNNGRAPH_TRY(od->set(CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, n_override));
  if (k_override)
    DNNGRAPH_TRY(od->set(CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, k_override));
  cx.keep(std::move(md.value()));
  return cx.add_op(std::move(od.value()));
}

Status sdpa_reshape(LowerContext& cx, const std::string& name, cudnnBackendDescriptor_t x,
                    cudnnBackendDescriptor_t y) {
  auto od = Descriptor::create(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, name);
  if (!od) return od.status();
  DNNGRAPH_TRY(od->set(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x));
  DNNGRAPH_TRY(od->set(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y));
  return cx.add_op(std::move(od.value()));
}

Result<cudnnBackendDescriptor_t> sdpa_scale(LowerContext& cx, const ir::Node& n,
                                            const std::string& what, const ir::SdpaOptions& a,
                                            int64_t d) {
  if (ir::Tensor st = n.input(Role::ATTN_SCALE)) return cx.tensor(st);
  const double value = a.attn_scale ? *a.attn_scale : 1.0 / std::sqrt(static_cast<double>(d));
  return cx.constant(what + "::attn_scale", ir::Scalar::of_float(value), 4);
}

namespace {

// Shared state of the mask builders: one GEN_INDEX per use, as cuDNN's own graphs do.
struct MaskBuilder {
  LowerContext& cx;
  const std::string& what;
  std::vector<int64_t> sdim;

  Result<cudnnBackendDescriptor_t> vt(const std::string& tag, DataType t) {
    return cx.virtual_tensor(what + "::" + tag, sdim, t);
  }
  Result<cudnnBackendDescriptor_t> index(cudnnBackendDescriptor_t like, const std::string& tag,
                                         int64_t axis) {
    auto r = vt(tag, DataType::Int32);
    if (!r) return r;
    DNNGRAPH_TRY(add_pointwise(cx, what + " " + tag, CUDNN_POINTWISE_GEN_INDEX, DataType::Int32,
                               like, nullptr, nullptr, r.value(), axis));
    return r;
  }
  // y = x op b, in int32.
  Result<cudnnBackendDescriptor_t> arith(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                                         cudnnBackendDescriptor_t b, const std::string& tag) {
    auto r = vt(tag, DataType::Int32);
    if (!r) return r;
    DNNGRAPH_TRY(
        add_pointwise(cx, what + " " + tag, mode, DataType::Int32, x, b, nullptr, r.value()));
    return r;
  }
  Result<cudnnBackendDescriptor_t> add_const(cudnnBackendDescriptor_t x, int64_t v,
                                             const std::string& tag) {
    if (v == 0) return x;
    auto c = cx.constant(what + "::" + tag + "_value", ir::Scalar::of_int(v, DataType::Int32), 4);
    if (!c) return c;
    return arith(CUDNN_POINTWISE_ADD, x, c.value(), tag);
  }
  Result<cudnnBackendDescriptor_t> compare(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                                           cudnnBackendDescriptor_t b, const std::string& tag) {
    auto r = vt(tag, DataType::Boolean);
    if (!r) return r;
    DNNGRAPH_TRY(
        add_pointwise(cx, what + " " + tag, mode, DataType::Int32, x, b, nullptr, r.value()));
    return r;
  }
  // Keeps x where `keep`, else the lowest float.
  Result<cudnnBackendDescriptor_t> select(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t keep,
                                          const std::string& tag) {
    auto low = cx.constant(what + "::" + tag + "_lowest",
                           ir::Scalar::of_float(std::numeric_limits<float>::lowest()), 4);
    if (!low) return low;
    auto r = vt(tag, DataType::Float);
    if (!r) return r;
    DNNGRAPH_TRY(add_pointwise(cx, what + " " + tag, CUDNN_POINTWISE_BINARY_SELECT, DataType::Float,
                               x, low.value(), keep, r.value()));
    return r;
  }
};

}  // namespace

Result<cudnnBackendDescriptor_t> sdpa_padding_select(LowerContext& cx, const std::string& what,
                                                     const std::string& tag,
                                                     cudnnBackendDescriptor_t x, const SdpaShape& s,
                                                     const SdpaSeqLens& lens) {
  MaskBuilder m{cx, what, s.sdim()};
  cudnnBackendDescriptor_t keep = nullptr;
  if (lens.q) {
    auto row = m.index(x, tag + "_row", 2);
    if (!row) return row;
    auto k = m.compare(CUDNN_POINTWISE_CMP_LT, row.value(), lens.q, tag + "_row_valid");
    if (!k) return k;
    keep = k.value();
  }
  if (lens.kv) {
    auto col = m.index(x, tag + "_col", 3);
    if (!col) return col;
    auto k = m.compare(CUDNN_POINTWISE_CMP_LT, col.value(), lens.kv, tag + "_col_valid");
    if (!k) return k;
    if (keep) {
      auto both = m.vt(tag + "_valid", DataType::Boolean);
      if (!both) return both;
      DNNGRAPH_TRY(add_pointwise(cx, what + " " + tag + "_valid", CUDNN_POINTWISE_LOGICAL_AND,
                                 DataType::Boolean, keep, k.value(), nullptr, both.value()));
      keep = both.value();
    } else {
      keep = k.value();
    }
  }
  if (!keep) return x;
  return m.select(x, keep, tag);
}

Result<cudnnBackendDescriptor_t> sdpa_masked_scores(
    LowerContext& cx, const ir::Node& n, const std::string& what, const ir::SdpaOptions& a,
    const SdpaShape& s, cudnnBackendDescriptor_t q, cudnnBackendDescriptor_t kt,
    cudnnBackendDescriptor_t scale, const SdpaSeqLens& lens) {
  const DataType f32 = DataType::Float;
  const std::vector<int64_t> sdim = s.sdim();
  auto raw = cx.virtual_tensor(what + "::S", sdim, f32);
  if (!raw) return raw;
  DNNGRAPH_TRY(sdpa_matmul(cx, what + " bmm Q.K^T", q, kt, raw.value(), lens.q, lens.kv));
  auto scaled = cx.virtual_tensor(what + "::S_scaled", sdim, f32);
  if (!scaled) return scaled;
  DNNGRAPH_TRY(add_pointwise(cx, what + " scale", CUDNN_POINTWISE_MUL, f32, raw.value(), scale,
                             nullptr, scaled.value()));
  cudnnBackendDescriptor_t last = scaled.value();

  if (ir::Tensor bias = n.input(Role::BIAS)) {
    auto tb = cx.tensor(bias);
    if (!tb) return tb;
    auto biased = cx.virtual_tensor(what + "::S_bias", sdim, f32);
    if (!biased) return biased;
    DNNGRAPH_TRY(add_pointwise(cx, what + " bias", CUDNN_POINTWISE_ADD, f32, last, tb.value(),
                               nullptr, biased.value()));
    last = biased.value();
  }
  if (lens.any()) {
    auto r = sdpa_padding_select(cx, what, "padding", last, s, lens);
    if (!r) return r;
    last = r.value();
  }

  // Key `col` is kept for query `row` when diag - left <= col <= diag + right, with
  // diag = row (top-left) or row + skv' - sq' (bottom-right, per batch with sequence lengths).
  // `causal` means a right bound of 0 (the smaller of 0 and right_bound when both are set).
  std::optional<int64_t> right = a.right_bound;
  if (a.causal) right = std::min<int64_t>(0, a.right_bound.value_or(0));
  const std::optional<int64_t> left = a.left_bound;
  if (!right && !left) return last;
  MaskBuilder m{cx, what, sdim};
  const bool br = a.diagonal_alignment == DiagonalAlignment::BottomRight;
  // A left bound whose diagonal is shifted by the sequence lengths (bottom-right alignment
  // with a padding mask) runs and returns wrong O; only the unshifted form (top-left, or
  // s_q == s_kv, without a padding mask) is right (docs/cudnn-engine.md, "What is lowered").
  if (left && (lens.any() || (br && s.sq != s.skv)))
    return sdpa_unsupported(what,
                            "a left window bound with a padding mask or with bottom-right "
                            "alignment and s_q != s_kv");
  // The diagonal of each row; `fold` is a constant added on top (no tensor needed).
  auto diagonal = [&](const std::string& tag, int64_t fold) -> Result<cudnnBackendDescriptor_t> {
    auto row = m.index(last, tag + "_row", 2);
    if (!row) return row;
    cudnnBackendDescriptor_t d = row.value();
    int64_t constant = fold;
    if (br) {
      if (lens.kv) {
        auto r = m.arith(CUDNN_POINTWISE_ADD, d, lens.kv, tag + "_row_plus_skv");
        if (!r) return r;
        d = r.value();
      } else {
        constant += s.skv;
      }
      if (lens.q) {
        auto r = m.arith(CUDNN_POINTWISE_SUB, d, lens.q, tag + "_row_minus_sq");
        if (!r) return r;
        d = r.value();
      } else {
        constant -= s.sq;
      }
    }
    return m.add_const(d, constant, tag + "_row_shifted");
  };
  if (right) {
    auto hi = diagonal("right", *right);
    if (!hi) return hi;
    auto col = m.index(last, "right_col", 3);
    if (!col) return col;
    auto keep = m.compare(CUDNN_POINTWISE_CMP_GE, hi.value(), col.value(), "right_keep");
    if (!keep) return keep;
    auto sel = m.select(last, keep.value(), "S_right_masked");
    if (!sel) return sel;
    last = sel.value();
  }
  if (left) {
    // col >= diag - left  <=>  col + left + 1 > diag
    auto diag = diagonal("left", 0);
    if (!diag) return diag;
    auto col = m.index(last, "left_col", 3);
    if (!col) return col;
    auto lo = m.add_const(col.value(), *left + 1, "left_col_shifted");
    if (!lo) return lo;
    auto keep = m.compare(CUDNN_POINTWISE_CMP_GT, lo.value(), diag.value(), "left_keep");
    if (!keep) return keep;
    auto sel = m.select(last, keep.value(), "S_left_masked");
    if (!sel) return sel;
    last = sel.value();
  }
  return last;
}

Status lower_sdpa(LowerContext& cx, const ir::Node& n) {
  const std::string what = detail::cat(op_kind_name(n.kind()), " '", n.name, "'");
  const auto& a = n.as<ir::SdpaAttrs>();
  ir::Tensor k = n.input(Role::K), o = n.output(Role::O);
  auto shape = sdpa_shape(cx, n, what, a);
  if (!shape) return shape.status();
  const SdpaShape& s = shape.value();
  const DataType f32 = DataType::Float;

  // K described transposed (same memory).
  auto tq = cx.tensor(n.input(Role::Q));
  auto tk = cx.tensor_as(k, sdpa_transposed(cx.view(k)));
  auto tv = cx.tensor(n.input(Role::V));
  auto to = cx.tensor(o);
  for (auto* r : {&tq, &tk, &tv, &to})
    if (!*r) return r->status();
  auto lens = sdpa_seq_lens(cx, n);
  if (!lens) return lens.status();
  auto scale = sdpa_scale(cx, n, what, a, s.d);
  if (!scale) return scale.status();
  auto last =
      sdpa_masked_scores(cx, n, what, a, s, tq.value(), tk.value(), scale.value(), lens.value());
  if (!last) return last.status();

  cudnnBackendDescriptor_t stats = nullptr;
  if (ir::Tensor st = n.output(Role::STATS)) {
    auto r = cx.tensor(st);
    if (!r) return r.status();
    stats = r.value();
  } else if (cx.variant.sdpa_virtual_stats) {
    auto r = cx.virtual_tensor(what + "::stats", {s.b, s.hq, s.sq, 1}, f32);
    if (!r) return r.status();
    stats = r.value();
  }
  auto drop = sdpa_dropout(cx, n, what, a, s, /*backward=*/false);
  if (!drop) return drop.status();
  const DataType p_type = cx.variant.sdpa_float_probabilities ? f32 : n.input(Role::V)->data_type;
  // With dropout the softmax output stays float and the dropped-out P takes P's type.
  auto p = cx.virtual_tensor(what + "::P", s.sdim(), drop->any() ? f32 : p_type);
  if (!p) return p.status();
  DNNGRAPH_TRY(add_softmax(cx, what + " softmax", s.sdim(), last.value(), p.value(), stats));
  cudnnBackendDescriptor_t pv = p.value();
  if (drop->any()) {
    auto masked = cx.virtual_tensor(what + "::P_masked", s.sdim(), f32);
    auto dropped = cx.virtual_tensor(what + "::P_dropout", s.sdim(), p_type);
    if (!masked) return masked.status();
    if (!dropped) return dropped.status();
    DNNGRAPH_TRY(add_pointwise(cx, what + " dropout mask", CUDNN_POINTWISE_MUL, f32, pv, drop->mask,
                               nullptr, masked.value()));
    DNNGRAPH_TRY(add_pointwise(cx, what + " dropout scale", CUDNN_POINTWISE_MUL, f32,
                               masked.value(), drop->scale, nullptr, dropped.value()));
    pv = dropped.value();
  }
  return sdpa_matmul(cx, what + " bmm P.V", pv, tv.value(), to.value(), lens->q, nullptr, lens->kv);
}

}  // namespace dnngraph::cudnn
