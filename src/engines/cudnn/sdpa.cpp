// Scaled dot-product attention, forward, as the fused graph cuDNN's flash-attention engines
// recognise: S = Q.K^T (float) -> S * scale -> [+ bias] -> [causal mask: GEN_INDEX row/col,
// CMP_GE, BINARY_SELECT with the lowest float] -> softmax (stats = max + log(sum)) -> P.V.
// Variants tried in order until cuDNN proposes an engine: 0 keeps P in V's data type (what
// the fused kernels read); 1 also computes the stats into a virtual tensor in inference;
// 2 keeps P in float.
// Not yet lowered (NotSupported, named): backward, padding masks, dropout, left window bounds,
// GQA/MQA (h_q != h_k).
#include <cmath>
#include <limits>

#include "engines/cudnn/lowering.hpp"

namespace dnngraph::cudnn {

Status lower_sdpa(LowerContext& cx, const ir::Node& n) {
  const std::string what = detail::cat(op_kind_name(n.kind()), " '", n.name, "'");
  if (n.kind() == ir::OpKind::SdpaBwd)
    return make_error(ErrorCode::NotSupported, what,
                      ": the cuDNN engine does not lower sdpa_backward yet");
  const auto& a = n.as<ir::SdpaAttrs>();
  ir::Tensor q = n.input("Q"), k = n.input("K"), v = n.input("V"), o = n.output("O");
  if (!q || !k || !v || !o)
    return make_error(ErrorCode::InvalidGraph, what, ": needs ports Q, K, V and O");
  auto unsupported = [&](const char* feature) {
    return make_error(ErrorCode::NotSupported, what, ": ", feature,
                      " is not lowered to cuDNN yet (the reference engine runs it)");
  };
  if (a.padding_mask || n.input("SEQ_LEN_Q") || n.input("SEQ_LEN_KV"))
    return unsupported("a padding mask");
  if (a.dropout_probability || n.input("SEED")) return unsupported("dropout");
  if (a.left_bound) return unsupported("a left window bound");
  const TensorView& qv = cx.view(q);
  const TensorView& kv = cx.view(k);
  if (qv.dim.size() != 4 || kv.dim.size() != 4)
    return make_error(ErrorCode::NotSupported, what, ": Q and K must be 4-D [b,h,s,d], got ",
                      q->describe(), " and ", k->describe());
  if (qv.dim[1] != kv.dim[1] || cx.view(v).dim[1] != qv.dim[1])
    return unsupported("grouped/multi-query attention (h_q != h_k)");
  const int64_t b = qv.dim[0], h = qv.dim[1], sq = qv.dim[2], d = qv.dim[3], skv = kv.dim[2];
  const DataType f32 = DataType::Float;
  const std::vector<int64_t> sdim{b, h, sq, skv};

  // S = Q . K^T, with K described transposed (same memory).
  TensorView kt{{kv.dim[0], kv.dim[1], kv.dim[3], kv.dim[2]},
                {kv.stride[0], kv.stride[1], kv.stride[3], kv.stride[2]}};
  auto tq = cx.tensor(q);
  auto tk = cx.tensor_as(k, kt);
  auto tv = cx.tensor(v);
  auto to = cx.tensor(o);
  auto s = cx.virtual_tensor(what + "::S", sdim, f32);
  for (auto* r : {&tq, &tk, &tv, &to, &s})
    if (!*r) return r->status();
  auto matmul = [&](const std::string& name, cudnnBackendDescriptor_t A, cudnnBackendDescriptor_t B,
                    cudnnBackendDescriptor_t C) -> Status {
    auto md = Descriptor::create(CUDNN_BACKEND_MATMUL_DESCRIPTOR, name + " (matmul desc)");
    if (!md) return md.status();
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    DNNGRAPH_TRY(md->set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, comp));
    DNNGRAPH_TRY(md->finalize(ErrorCode::NotSupported));
    auto od = Descriptor::create(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, name);
    if (!od) return od.status();
    DNNGRAPH_TRY(od->set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, A));
    DNNGRAPH_TRY(od->set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, B));
    DNNGRAPH_TRY(od->set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, C));
    DNNGRAPH_TRY(od->set(CUDNN_ATTR_OPERATION_MATMUL_DESC, md.value()));
    cx.keep(std::move(md.value()));
    return cx.add_op(std::move(od.value()));
  };
  DNNGRAPH_TRY(matmul(what + " bmm1", tq.value(), tk.value(), s.value()));

  // Scale: the ATTN_SCALE tensor, else the attribute, else 1/sqrt(d).
  cudnnBackendDescriptor_t scale = nullptr;
  if (ir::Tensor st = n.input("ATTN_SCALE")) {
    auto r = cx.tensor(st);
    if (!r) return r.status();
    scale = r.value();
  } else {
    const double value = a.attn_scale ? *a.attn_scale : 1.0 / std::sqrt(static_cast<double>(d));
    auto r = cx.constant(what + "::attn_scale", ir::Scalar::of_float(value), 4);
    if (!r) return r.status();
    scale = r.value();
  }
  auto scaled = cx.virtual_tensor(what + "::S_scaled", sdim, f32);
  if (!scaled) return scaled.status();
  DNNGRAPH_TRY(add_pointwise(cx, what + " scale", CUDNN_POINTWISE_MUL, f32, s.value(), scale,
                             nullptr, scaled.value()));
  cudnnBackendDescriptor_t last = scaled.value();

  if (ir::Tensor bias = n.input("BIAS")) {
    auto tb = cx.tensor(bias);
    auto biased = cx.virtual_tensor(what + "::S_bias", sdim, f32);
    if (!tb) return tb.status();
    if (!biased) return biased.status();
    DNNGRAPH_TRY(add_pointwise(cx, what + " bias", CUDNN_POINTWISE_ADD, f32, last, tb.value(),
                               nullptr, biased.value()));
    last = biased.value();
  }

  const bool masked = a.causal || a.right_bound.has_value();
  if (masked) {
    // Keep key `col` for query `row` when col <= row + offset.
    int64_t offset = a.right_bound.value_or(0);
    if (a.diagonal_alignment == DiagonalAlignment::BottomRight) offset += skv - sq;
    auto row = cx.virtual_tensor(what + "::row", sdim, DataType::Int32);
    auto col = cx.virtual_tensor(what + "::col", sdim, DataType::Int32);
    auto keep = cx.virtual_tensor(what + "::keep", sdim, DataType::Boolean);
    auto sel = cx.virtual_tensor(what + "::S_masked", sdim, f32);
    auto low = cx.constant(what + "::lowest",
                           ir::Scalar::of_float(std::numeric_limits<float>::lowest()), 4);
    for (auto* r : {&row, &col, &keep, &sel, &low})
      if (!*r) return r->status();
    DNNGRAPH_TRY(add_pointwise(cx, what + " row index", CUDNN_POINTWISE_GEN_INDEX, DataType::Int32,
                               last, nullptr, nullptr, row.value(), 2));
    DNNGRAPH_TRY(add_pointwise(cx, what + " col index", CUDNN_POINTWISE_GEN_INDEX, DataType::Int32,
                               last, nullptr, nullptr, col.value(), 3));
    cudnnBackendDescriptor_t row_idx = row.value();
    if (offset != 0) {
      auto off = cx.constant(what + "::offset", ir::Scalar::of_int(offset, DataType::Int32), 4);
      auto shifted = cx.virtual_tensor(what + "::row_shifted", sdim, DataType::Int32);
      if (!off) return off.status();
      if (!shifted) return shifted.status();
      DNNGRAPH_TRY(add_pointwise(cx, what + " row offset", CUDNN_POINTWISE_ADD, DataType::Int32,
                                 row_idx, off.value(), nullptr, shifted.value()));
      row_idx = shifted.value();
    }
    DNNGRAPH_TRY(add_pointwise(cx, what + " causal compare", CUDNN_POINTWISE_CMP_GE,
                               DataType::Int32, row_idx, col.value(), nullptr, keep.value()));
    DNNGRAPH_TRY(add_pointwise(cx, what + " causal select", CUDNN_POINTWISE_BINARY_SELECT, f32,
                               last, low.value(), keep.value(), sel.value()));
    last = sel.value();
  }

  cudnnBackendDescriptor_t stats = nullptr;
  if (ir::Tensor st = n.output("STATS")) {
    auto r = cx.tensor(st);
    if (!r) return r.status();
    stats = r.value();
  } else if (cx.variant == 1) {
    auto r = cx.virtual_tensor(what + "::stats", {b, h, sq, 1}, f32);
    if (!r) return r.status();
    stats = r.value();
  }
  const DataType p_type = cx.variant < 2 ? v->data_type : f32;
  auto p = cx.virtual_tensor(what + "::P", sdim, p_type);
  if (!p) return p.status();
  DNNGRAPH_TRY(add_softmax(cx, what + " softmax", sdim, last, p.value(), stats));
  return matmul(what + " bmm2", p.value(), tv.value(), to.value());
}

}  // namespace dnngraph::cudnn
