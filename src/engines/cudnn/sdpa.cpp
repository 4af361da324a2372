// Scaled dot-product attention, forward, as the fused graph cuDNN's flash-attention engines
// recognise: S = Q.K^T (float) -> S * scale -> [+ bias] -> [padding mask: GEN_INDEX row/col
// compared with SEQ_LEN_Q / SEQ_LEN_KV] -> [right bound / causal, left bound: GEN_INDEX,
// integer compares, BINARY_SELECT with the lowest float] -> softmax (stats = max + log(sum))
// -> P.V. With sequence lengths the matmuls carry them as GEMM M/N/K overrides.
// Padded query rows: cuDNN writes O = 0 and STATS = -inf there, as the reference does
// (docs/cudnn-engine.md).
// GQA/MQA: K and V keep their fewer heads; the engines broadcast them over the query heads.
// Lowering variants (lowering_variants in engine.cpp, tried in order until cuDNN proposes an
// engine): P in V's data type (what the fused kernels read) with the stats computed, into a
// virtual tensor in inference, as the frontend's graph (without them cuDNN 9.19 hit an illegal
// memory access in one measured case); the same without the stats; P in float.
// Dropout: P * MASK * SCALE after the softmax (sdpa_dropout; the RNG is cuDNN's Philox, so its
// keep mask differs from the reference engine's: tests compare through RNG_DUMP and the mask
// form). Left window bound: the frontend's form, the shift on the column side (not yet checked
// on a GPU with a shifted diagonal). ALiBi (alibi_mask): slope[h] * (col - row)
// added after the bias, as cuDNN's own graph does it, the slopes a [1,hq,1,1] float tensor in
// device memory the plan owns (not yet checked on a GPU). Ragged (THD) tensors: their
// descriptors carry CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC (sdpa_set_ragged; offsets in elements:
// a multiplier needs cuDNN 9.24). Paged K / V: PAGED_CACHE_LOAD operations gather K^T and V
// from the page containers into virtual tensors, as the frontend's graph does (both not yet
// checked on a GPU).
// SCORE_MAX / SCORE_SUM_EXP (the frontend's score_max / score_sum_exp): the softmax's row max
// and row sum of exp(S - max) as real outputs instead of virtual tensors, as the frontend's
// composite softmax binds Max / Sum_exp. Checked on an H200 (cuDNN 9.19) against the reference:
// equal, padded rows -inf in both; with a sink cuDNN 9.19 has no engine (refused below).
// Attention sinks (SINK_TOKEN [1,hq,1,1] float), as the frontend's softmax builds them for
// cuDNN before 9.21: the row max MAX'ed with the sink, exp(sink - max) added to the row sum,
// so STATS include the sink (not yet checked on a GPU).
// Score modifiers (score_mod): their pointwise ops right after the scale, before the bias
// (sdpa_score_mod.cpp), as the frontend places its callback.
// The rules the SDPA lowerings share are in sdpa_rules.cpp (sdpa_common.hpp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <variant>

#include "dnngraph/engines/cudnn.hpp"
#include "dnngraph/ir/sdpa.hpp"
#include "engines/cudnn/loader.hpp"
#include "engines/cudnn/sdpa_common.hpp"

namespace dnngraph::cudnn {

void sdpa_set_ragged(LowerContext& cx, const ir::Node& n) {
  for (auto [role, rr] : ir::kSdpaRaggedRoles) {
    ir::Tensor off = n.input(rr);
    if (!off) continue;
    ir::Tensor t = n.input(role);
    if (!t) t = n.output(role);
    if (t) cx.set_ragged(t, off);
  }
}

namespace {

// K (as K^T [b,hk,d,skv]) or V ([b,hv,skv,dv]) gathered from its page container by cuDNN's
// PAGED_CACHE_LOAD operation into a virtual tensor of `view`, as the frontend's graph does.
Result<cudnnBackendDescriptor_t> sdpa_paged(LowerContext& cx, const std::string& what,
                                            const std::string& tag, const ir::Tensor& container,
                                            const ir::Tensor& table, cudnnBackendDescriptor_t len,
                                            const TensorView& view) {
  DNNGRAPH_ASSIGN_OR_RETURN(auto tc, cx.tensor(container));
  DNNGRAPH_ASSIGN_OR_RETURN(auto tt, cx.tensor(table));
  DNNGRAPH_ASSIGN_OR_RETURN(auto y,
                            cx.virtual_tensor(what + "::" + tag, view, container->data_type));
  DNNGRAPH_ASSIGN_OR_RETURN(
      auto od,
      Descriptor::create(CUDNN_BACKEND_OPERATION_PAGED_CACHE_LOAD_DESCRIPTOR, what + " " + tag));
  DNNGRAPH_TRY(od.set(CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_CONTAINER_DESC, tc));
  DNNGRAPH_TRY(od.set(CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_YDESC, y));
  DNNGRAPH_TRY(od.set(CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_SEQUENCE_DESC, len));
  DNNGRAPH_TRY(od.set(CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_PAGE_TABLE_DESC, tt));
  DNNGRAPH_TRY(cx.add_op(std::move(od)));
  return y;
}

}  // namespace

Result<SdpaSeqLens> sdpa_seq_lens(LowerContext& cx, const ir::Node& n) {
  SdpaSeqLens l;
  if (ir::Tensor t = n.input(Role::SEQ_LEN_Q)) {
    DNNGRAPH_ASSIGN_OR_RETURN(l.q, cx.tensor(t));
  }
  if (ir::Tensor t = n.input(Role::SEQ_LEN_KV)) {
    DNNGRAPH_ASSIGN_OR_RETURN(l.kv, cx.tensor(t));
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
    DNNGRAPH_ASSIGN_OR_RETURN(auto tm, cx.tensor(mask));
    DNNGRAPH_ASSIGN_OR_RETURN(auto ts, cx.tensor(scale));
    d.mask = tm;
    d.scale = ts;
    return d;
  }
  if (!a.dropout_probability || *a.dropout_probability <= 0.0) return d;
  const double p = *a.dropout_probability;
  ir::Tensor seed = n.input(Role::SEED), offset = n.input(Role::OFFSET);
  DNNGRAPH_ASSIGN_OR_RETURN(auto tseed, cx.tensor(seed));
  DNNGRAPH_ASSIGN_OR_RETURN(auto toff, cx.tensor(offset));
  cudnnBackendDescriptor_t y = nullptr;
  if (ir::Tensor dump = n.output(Role::RNG_DUMP)) {
    DNNGRAPH_ASSIGN_OR_RETURN(y, cx.tensor(dump));
  } else {
    DNNGRAPH_ASSIGN_OR_RETURN(
        y, cx.virtual_tensor(what + "::dropout_mask", s.sdim(), DataType::Float));
  }
  DNNGRAPH_ASSIGN_OR_RETURN(auto rd,
                            Descriptor::create(CUDNN_BACKEND_RNG_DESCRIPTOR, what + " (rng desc)"));
  const cudnnRngDistribution_t dist = CUDNN_RNG_DISTRIBUTION_BERNOULLI;
  const double keep = 1.0 - p;
  DNNGRAPH_TRY(rd.set(CUDNN_ATTR_RNG_DISTRIBUTION, CUDNN_TYPE_RNG_DISTRIBUTION, dist));
  DNNGRAPH_TRY(rd.set(CUDNN_ATTR_RNG_BERNOULLI_DIST_PROBABILITY, CUDNN_TYPE_DOUBLE, keep));
  DNNGRAPH_TRY(rd.finalize(ErrorCode::NotSupported));
  DNNGRAPH_ASSIGN_OR_RETURN(
      auto od, Descriptor::create(CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR, what + " dropout rng"));
  DNNGRAPH_TRY(od.set(CUDNN_ATTR_OPERATION_RNG_YDESC, y));
  DNNGRAPH_TRY(od.set(CUDNN_ATTR_OPERATION_RNG_SEED, tseed));
  DNNGRAPH_TRY(od.set(CUDNN_ATTR_OPERATION_RNG_OFFSET_DESC, toff));
  DNNGRAPH_TRY(od.set(CUDNN_ATTR_OPERATION_RNG_DESC, rd));
  cx.keep(std::move(rd));
  DNNGRAPH_TRY(cx.add_op(std::move(od)));
  DNNGRAPH_ASSIGN_OR_RETURN(
      auto sc, cx.constant(what + "::dropout_scale", ir::Scalar::of_float(1.0 / keep), 4));
  d.mask = y;
  d.scale = sc;
  if (backward) {
    DNNGRAPH_ASSIGN_OR_RETURN(
        d.scale_inv, cx.constant(what + "::dropout_scale_inv", ir::Scalar::of_float(keep), 4));
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
  return add_matmul(cx, name, CUDNN_DATA_FLOAT, a, b, c, m_override, n_override, k_override);
}

Status sdpa_reshape(LowerContext& cx, const std::string& name, cudnnBackendDescriptor_t x,
                    cudnnBackendDescriptor_t y) {
  DNNGRAPH_ASSIGN_OR_RETURN(auto od,
                            Descriptor::create(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, name));
  DNNGRAPH_TRY(od.set(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x));
  DNNGRAPH_TRY(od.set(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y));
  return cx.add_op(std::move(od));
}

Result<cudnnBackendDescriptor_t> sdpa_scale(LowerContext& cx, const ir::Node& n,
                                            const std::string& what, const ir::SdpaOptions& a,
                                            int64_t d) {
  if (ir::Tensor st = n.input(Role::ATTN_SCALE)) return cx.tensor(st);
  const double value = ir::sdpa_scale_of(a, d);
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
    DNNGRAPH_ASSIGN_OR_RETURN(auto r, vt(tag, DataType::Int32));
    DNNGRAPH_TRY(add_pointwise(cx, what + " " + tag, CUDNN_POINTWISE_GEN_INDEX, DataType::Int32,
                               like, nullptr, nullptr, r, axis));
    return r;
  }
  // y = x op b, in int32; y INT32, or BOOLEAN for a comparison (compare).
  Result<cudnnBackendDescriptor_t> arith(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                                         cudnnBackendDescriptor_t b, const std::string& tag,
                                         DataType out = DataType::Int32) {
    DNNGRAPH_ASSIGN_OR_RETURN(auto r, vt(tag, out));
    DNNGRAPH_TRY(add_pointwise(cx, what + " " + tag, mode, DataType::Int32, x, b, nullptr, r));
    return r;
  }
  Result<cudnnBackendDescriptor_t> add_const(cudnnBackendDescriptor_t x, int64_t v,
                                             const std::string& tag) {
    if (v == 0) return x;
    DNNGRAPH_ASSIGN_OR_RETURN(auto c, cx.constant(what + "::" + tag + "_value",
                                                  ir::Scalar::of_int(v, DataType::Int32), 4));
    return arith(CUDNN_POINTWISE_ADD, x, c, tag);
  }
  Result<cudnnBackendDescriptor_t> compare(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                                           cudnnBackendDescriptor_t b, const std::string& tag) {
    return arith(mode, x, b, tag, DataType::Boolean);
  }
  // Keeps x where `keep`, else the lowest float.
  Result<cudnnBackendDescriptor_t> select(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t keep,
                                          const std::string& tag) {
    DNNGRAPH_ASSIGN_OR_RETURN(
        auto low, cx.constant(what + "::" + tag + "_lowest",
                              ir::Scalar::of_float(std::numeric_limits<float>::lowest()), 4));
    DNNGRAPH_ASSIGN_OR_RETURN(auto r, vt(tag, DataType::Float));
    DNNGRAPH_TRY(add_pointwise(cx, what + " " + tag, CUDNN_POINTWISE_BINARY_SELECT, DataType::Float,
                               x, low, keep, r));
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
    DNNGRAPH_ASSIGN_OR_RETURN(auto row, m.index(x, tag + "_row", 2));
    DNNGRAPH_ASSIGN_OR_RETURN(keep,
                              m.compare(CUDNN_POINTWISE_CMP_LT, row, lens.q, tag + "_row_valid"));
  }
  if (lens.kv) {
    DNNGRAPH_ASSIGN_OR_RETURN(auto col, m.index(x, tag + "_col", 3));
    DNNGRAPH_ASSIGN_OR_RETURN(auto k,
                              m.compare(CUDNN_POINTWISE_CMP_LT, col, lens.kv, tag + "_col_valid"));
    if (keep) {
      DNNGRAPH_ASSIGN_OR_RETURN(auto both, m.vt(tag + "_valid", DataType::Boolean));
      DNNGRAPH_TRY(add_pointwise(cx, what + " " + tag + "_valid", CUDNN_POINTWISE_LOGICAL_AND,
                                 DataType::Boolean, keep, k, nullptr, both));
      keep = both;
    } else {
      keep = k;
    }
  }
  if (!keep) return x;
  return m.select(x, keep, tag);
}

Result<cudnnBackendDescriptor_t> sdpa_masked_scores(
    LowerContext& cx, const ir::Node& n, const std::string& what, const ir::SdpaOptions& a,
    const SdpaShape& s, cudnnBackendDescriptor_t q, cudnnBackendDescriptor_t kt,
    cudnnBackendDescriptor_t scale, const SdpaSeqLens& lens,
    const std::vector<cudnnBackendDescriptor_t>& factors) {
  const DataType f32 = DataType::Float;
  const std::vector<int64_t> sdim = s.sdim();
  DNNGRAPH_ASSIGN_OR_RETURN(auto raw, cx.virtual_tensor(what + "::S", sdim, f32));
  DNNGRAPH_TRY(sdpa_matmul(cx, what + " bmm Q.K^T", q, kt, raw, lens.q, lens.kv));
  DNNGRAPH_ASSIGN_OR_RETURN(auto scaled, cx.virtual_tensor(what + "::S_scaled", sdim, f32));
  DNNGRAPH_TRY(
      add_pointwise(cx, what + " scale", CUDNN_POINTWISE_MUL, f32, raw, scale, nullptr, scaled));
  cudnnBackendDescriptor_t last = scaled;
  for (size_t i = 0; i < factors.size(); ++i) {
    const std::string tag = detail::cat("S_descaled_", i);
    DNNGRAPH_ASSIGN_OR_RETURN(auto r, cx.virtual_tensor(what + "::" + tag, sdim, f32));
    DNNGRAPH_TRY(add_pointwise(cx, what + " " + tag, CUDNN_POINTWISE_MUL, f32, last, factors[i],
                               nullptr, r));
    last = r;
  }
  DNNGRAPH_ASSIGN_OR_RETURN(last, sdpa_score_mod(cx, n, what, "score_mod", last));

  if (ir::Tensor bias = n.input(Role::BIAS)) {
    DNNGRAPH_ASSIGN_OR_RETURN(auto tb, cx.tensor(bias));
    DNNGRAPH_ASSIGN_OR_RETURN(auto biased, cx.virtual_tensor(what + "::S_bias", sdim, f32));
    DNNGRAPH_TRY(
        add_pointwise(cx, what + " bias", CUDNN_POINTWISE_ADD, f32, last, tb, nullptr, biased));
    last = biased;
  }
  if (a.alibi_mask) {
    // As cuDNN's own graph: (GEN_INDEX col - GEN_INDEX row) in int32, times the [1,hq,1,1]
    // float slopes (device memory the plan owns), added to the scores after the bias.
    MaskBuilder m{cx, what, sdim};
    DNNGRAPH_ASSIGN_OR_RETURN(auto row, m.index(last, "alibi_row", 2));
    DNNGRAPH_ASSIGN_OR_RETURN(auto col, m.index(last, "alibi_col", 3));
    DNNGRAPH_ASSIGN_OR_RETURN(auto rel, m.arith(CUDNN_POINTWISE_SUB, col, row, "alibi_col_row"));
    std::vector<float> slopes;
    for (double x : ir::sdpa_alibi_slopes(s.hq)) slopes.push_back(static_cast<float>(x));
    DNNGRAPH_ASSIGN_OR_RETURN(
        auto ts, cx.device_constant(what + "::alibi_slopes", {1, s.hq, 1, 1}, std::move(slopes)));
    DNNGRAPH_ASSIGN_OR_RETURN(auto bias, cx.virtual_tensor(what + "::alibi", sdim, f32));
    DNNGRAPH_TRY(
        add_pointwise(cx, what + " alibi slope", CUDNN_POINTWISE_MUL, f32, rel, ts, nullptr, bias));
    DNNGRAPH_ASSIGN_OR_RETURN(auto added, cx.virtual_tensor(what + "::S_alibi", sdim, f32));
    DNNGRAPH_TRY(add_pointwise(cx, what + " alibi add", CUDNN_POINTWISE_ADD, f32, last, bias,
                               nullptr, added));
    last = added;
  }
  if (lens.any()) {
    DNNGRAPH_ASSIGN_OR_RETURN(last, sdpa_padding_select(cx, what, "padding", last, s, lens));
  }

  // Key `col` is kept for query `row` when diag - left < col <= diag + right, with
  // diag = row (top-left) or row + skv' - sq' (bottom-right, per batch with sequence lengths).
  // `causal` means a right bound of 0 (the smaller of 0 and right_bound when both are set).
  std::optional<int64_t> right = a.right_bound;
  if (a.causal) right = std::min<int64_t>(0, a.right_bound.value_or(0));
  const std::optional<int64_t> left = a.left_bound;
  if (!right && !left) return last;
  MaskBuilder m{cx, what, sdim};
  const bool br = a.diagonal_alignment == DiagonalAlignment::BottomRight;
  DNNGRAPH_TRY(sdpa_mask_rules(what, a, s.sq, s.skv, lens.any()));
  // The diagonal of each row; `fold` is a constant added on top (no tensor needed).
  auto diagonal = [&](const std::string& tag, int64_t fold) -> Result<cudnnBackendDescriptor_t> {
    DNNGRAPH_ASSIGN_OR_RETURN(cudnnBackendDescriptor_t d, m.index(last, tag + "_row", 2));
    int64_t constant = fold;
    if (br) {
      if (lens.kv) {
        DNNGRAPH_ASSIGN_OR_RETURN(d,
                                  m.arith(CUDNN_POINTWISE_ADD, d, lens.kv, tag + "_row_plus_skv"));
      } else {
        constant += s.skv;
      }
      if (lens.q) {
        DNNGRAPH_ASSIGN_OR_RETURN(d,
                                  m.arith(CUDNN_POINTWISE_SUB, d, lens.q, tag + "_row_minus_sq"));
      } else {
        constant -= s.sq;
      }
    }
    return m.add_const(d, constant, tag + "_row_shifted");
  };
  if (right) {
    DNNGRAPH_ASSIGN_OR_RETURN(auto hi, diagonal("right", *right));
    DNNGRAPH_ASSIGN_OR_RETURN(auto col, m.index(last, "right_col", 3));
    DNNGRAPH_ASSIGN_OR_RETURN(auto keep, m.compare(CUDNN_POINTWISE_CMP_GE, hi, col, "right_keep"));
    DNNGRAPH_ASSIGN_OR_RETURN(last, m.select(last, keep, "S_right_masked"));
  }
  if (left) {
    // col > diag - left  <=>  col + left - (skv' - sq') > row (left: the frontend's window
    // length). The shift goes on the column side and the row index stays bare, as in the cuDNN
    // frontend's sliding-window mask: with the shift on the row side (the right bound's form)
    // cuDNN 9.19 returned wrong O for a shifted diagonal (docs/cudnn-engine.md).
    DNNGRAPH_ASSIGN_OR_RETURN(auto row, m.index(last, "left_row", 2));
    DNNGRAPH_ASSIGN_OR_RETURN(cudnnBackendDescriptor_t lo, m.index(last, "left_col", 3));
    if (br && lens.any()) {
      // Per batch: col + left - SEQ_LEN_KV + SEQ_LEN_Q (the tensor dims for a side without).
      DNNGRAPH_ASSIGN_OR_RETURN(lo, m.add_const(lo, *left, "left_col_plus_left"));
      cudnnBackendDescriptor_t kv = lens.kv, q = lens.q;
      if (!kv) {
        DNNGRAPH_ASSIGN_OR_RETURN(
            kv, cx.constant(what + "::left_skv", ir::Scalar::of_int(s.skv, DataType::Int32), 4));
      }
      if (!q) {
        DNNGRAPH_ASSIGN_OR_RETURN(
            q, cx.constant(what + "::left_sq", ir::Scalar::of_int(s.sq, DataType::Int32), 4));
      }
      DNNGRAPH_ASSIGN_OR_RETURN(lo, m.arith(CUDNN_POINTWISE_SUB, lo, kv, "left_col_minus_skv"));
      DNNGRAPH_ASSIGN_OR_RETURN(lo, m.arith(CUDNN_POINTWISE_ADD, lo, q, "left_col_plus_sq"));
    } else {
      const int64_t shift = br ? s.skv - s.sq : 0;
      DNNGRAPH_ASSIGN_OR_RETURN(lo, m.add_const(lo, *left - shift, "left_col_shifted"));
    }
    DNNGRAPH_ASSIGN_OR_RETURN(auto keep, m.compare(CUDNN_POINTWISE_CMP_GT, lo, row, "left_keep"));
    DNNGRAPH_ASSIGN_OR_RETURN(last, m.select(last, keep, "S_left_masked"));
  }
  return last;
}

namespace {

// add_softmax with one more logit per row, sink [1,hq,1,1] (broadcast over b and s_q); the
// row max (max_out) is MAX'ed with the sink, the row sum (sum_out) has exp(sink - max) added.
Status add_sink_softmax(LowerContext& cx, const std::string& what, const std::vector<int64_t>& dim,
                        cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t sink,
                        cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t stats,
                        cudnnBackendDescriptor_t max_out, cudnnBackendDescriptor_t sum_out) {
  const DataType f32 = DataType::Float;
  std::vector<int64_t> row = dim;
  row.back() = 1;
  auto vt = [&](const char* n, const std::vector<int64_t>& d) {
    return cx.virtual_tensor(what + "::" + n, d, f32);
  };
  auto pw = [&](const char* tag, cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t a,
                cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t out) {
    return add_pointwise(cx, what + " " + tag, mode, f32, a, b, nullptr, out);
  };
  cudnnBackendDescriptor_t mx = max_out, sum = sum_out;
  DNNGRAPH_ASSIGN_OR_RETURN(auto smax, vt("max_scores", row));
  if (!mx) {
    DNNGRAPH_ASSIGN_OR_RETURN(mx, vt("max", row));
  }
  DNNGRAPH_ASSIGN_OR_RETURN(auto sub, vt("sub", dim));
  DNNGRAPH_ASSIGN_OR_RETURN(auto ex, vt("exp", dim));
  DNNGRAPH_ASSIGN_OR_RETURN(auto ssum, vt("sum_scores", row));
  DNNGRAPH_ASSIGN_OR_RETURN(auto sink_sub, vt("sink_sub", row));
  DNNGRAPH_ASSIGN_OR_RETURN(auto sink_exp, vt("sink_exp", row));
  if (!sum) {
    DNNGRAPH_ASSIGN_OR_RETURN(sum, vt("sum", row));
  }
  DNNGRAPH_TRY(add_reduction(cx, what + " max", CUDNN_REDUCE_TENSOR_MAX, f32, x, smax));
  DNNGRAPH_TRY(pw("max sink", CUDNN_POINTWISE_MAX, smax, sink, mx));
  DNNGRAPH_TRY(pw("sub", CUDNN_POINTWISE_SUB, x, mx, sub));
  DNNGRAPH_TRY(pw("exp", CUDNN_POINTWISE_EXP, sub, nullptr, ex));
  DNNGRAPH_TRY(add_reduction(cx, what + " sum", CUDNN_REDUCE_TENSOR_ADD, f32, ex, ssum));
  DNNGRAPH_TRY(pw("sink sub", CUDNN_POINTWISE_SUB, sink, mx, sink_sub));
  DNNGRAPH_TRY(pw("sink exp", CUDNN_POINTWISE_EXP, sink_sub, nullptr, sink_exp));
  DNNGRAPH_TRY(pw("add sink", CUDNN_POINTWISE_ADD, ssum, sink_exp, sum));
  if (stats) {
    DNNGRAPH_ASSIGN_OR_RETURN(auto lg, vt("log", row));
    DNNGRAPH_TRY(pw("log", CUDNN_POINTWISE_LOG, sum, nullptr, lg));
    DNNGRAPH_TRY(pw("stats", CUDNN_POINTWISE_ADD, mx, lg, stats));
  }
  return pw("div", CUDNN_POINTWISE_DIV, ex, sum, y);
}

}  // namespace

Status lower_sdpa(LowerContext& cx, const ir::Node& n) {
  const std::string what = detail::cat(op_kind_name(n.kind()), " '", n.name, "'");
  const auto& a = n.as<ir::SdpaAttrs>();
  ir::Tensor k = n.input(Role::K), o = n.output(Role::O);
  DNNGRAPH_ASSIGN_OR_RETURN(const SdpaShape& s, sdpa_shape(cx, n, what, a));
  const DataType f32 = DataType::Float;
  sdpa_set_ragged(cx, n);
  DNNGRAPH_ASSIGN_OR_RETURN(auto lens, sdpa_seq_lens(cx, n));

  // K described transposed (same memory), or gathered from its pages transposed; V likewise
  // (not yet checked on a GPU).
  DNNGRAPH_ASSIGN_OR_RETURN(auto tq, cx.tensor(n.input(Role::Q)));
  cudnnBackendDescriptor_t tk = nullptr, tv = nullptr;
  if (ir::Tensor table = n.input(Role::PAGE_TABLE_K)) {
    const TensorView kt{{s.b, s.hk, s.d, s.skv}, {s.d * s.skv * s.hk, s.d * s.skv, 1, s.d}};
    DNNGRAPH_ASSIGN_OR_RETURN(tk, sdpa_paged(cx, what, "K_paged", k, table, lens.kv, kt));
  } else {
    DNNGRAPH_ASSIGN_OR_RETURN(tk, cx.tensor_as(k, sdpa_transposed(cx.view(k))));
  }
  if (ir::Tensor table = n.input(Role::PAGE_TABLE_V)) {
    const TensorView vv{{s.b, s.hv, s.skv, s.dv}, {s.dv * s.skv * s.hv, s.dv * s.skv, s.dv, 1}};
    DNNGRAPH_ASSIGN_OR_RETURN(
        tv, sdpa_paged(cx, what, "V_paged", n.input(Role::V), table, lens.kv, vv));
  } else {
    DNNGRAPH_ASSIGN_OR_RETURN(tv, cx.tensor(n.input(Role::V)));
  }
  DNNGRAPH_ASSIGN_OR_RETURN(auto to, cx.tensor(o));
  DNNGRAPH_ASSIGN_OR_RETURN(auto scale, sdpa_scale(cx, n, what, a, s.d));
  DNNGRAPH_ASSIGN_OR_RETURN(auto last, sdpa_masked_scores(cx, n, what, a, s, tq, tk, scale, lens));

  // SCORE_MAX / SCORE_SUM_EXP (both or neither, never with STATS: the IR's rule, the
  // frontend's composite softmax's) are the softmax's row max and row sum made real.
  cudnnBackendDescriptor_t stats = nullptr, row_max = nullptr, sum_exp = nullptr;
  if (ir::Tensor t = n.output(Role::SCORE_MAX)) {
    DNNGRAPH_ASSIGN_OR_RETURN(row_max, cx.tensor(t));
  }
  if (ir::Tensor t = n.output(Role::SCORE_SUM_EXP)) {
    DNNGRAPH_ASSIGN_OR_RETURN(sum_exp, cx.tensor(t));
  }
  if (ir::Tensor st = n.output(Role::STATS)) {
    DNNGRAPH_ASSIGN_OR_RETURN(stats, cx.tensor(st));
  } else if (cx.variant.sdpa_virtual_stats && !row_max) {
    DNNGRAPH_ASSIGN_OR_RETURN(stats,
                              cx.virtual_tensor(what + "::stats", {s.b, s.hq, s.sq, 1}, f32));
  }
  DNNGRAPH_ASSIGN_OR_RETURN(auto drop, sdpa_dropout(cx, n, what, a, s, /*backward=*/false));
  const DataType p_type = cx.variant.sdpa_float_probabilities ? f32 : n.input(Role::V)->data_type;
  // With dropout the softmax output stays float and the dropped-out P takes P's type.
  DNNGRAPH_ASSIGN_OR_RETURN(auto p,
                            cx.virtual_tensor(what + "::P", s.sdim(), drop.any() ? f32 : p_type));
  if (ir::Tensor sink = n.input(Role::SINK_TOKEN)) {
    // Measured on an H200: cuDNN 9.19 proposes no engine for this graph (heuristics and all
    // its engines refuse it); later versions are tried.
    if (row_max && load_info().version < 92000)
      return sdpa_unsupported(what,
                              detail::cat("SCORE_MAX / SCORE_SUM_EXP with SINK_TOKEN on cuDNN ",
                                          load_info().version, " (9.19 has no engine for it)"));
    DNNGRAPH_ASSIGN_OR_RETURN(auto tsink, cx.tensor(sink));
    DNNGRAPH_TRY(
        add_sink_softmax(cx, what + " softmax", s.sdim(), last, tsink, p, stats, row_max, sum_exp));
  } else {
    DNNGRAPH_TRY(add_softmax(cx, what + " softmax", s.sdim(), last, p, stats, row_max, sum_exp));
  }
  cudnnBackendDescriptor_t pv = p;
  if (drop.any()) {
    DNNGRAPH_ASSIGN_OR_RETURN(auto masked, cx.virtual_tensor(what + "::P_masked", s.sdim(), f32));
    DNNGRAPH_ASSIGN_OR_RETURN(auto dropped,
                              cx.virtual_tensor(what + "::P_dropout", s.sdim(), p_type));
    DNNGRAPH_TRY(add_pointwise(cx, what + " dropout mask", CUDNN_POINTWISE_MUL, f32, pv, drop.mask,
                               nullptr, masked));
    DNNGRAPH_TRY(add_pointwise(cx, what + " dropout scale", CUDNN_POINTWISE_MUL, f32, masked,
                               drop.scale, nullptr, dropped));
    pv = dropped;
  }
  return sdpa_matmul(cx, what + " bmm P.V", pv, tv, to, lens.q, nullptr, lens.kv);
}

}  // namespace dnngraph::cudnn
