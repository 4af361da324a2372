// Scaled dot-product attention, forward and backward.
#include "common.hpp"

namespace dnngraph::py {

namespace {

using OptT = ir::Tensor;
using SeedOrOffset = std::variant<ir::Tensor, int64_t>;
// (probability, seed, offset); seed and offset are tensors or ints (int64 constants).
using Dropout = std::optional<std::tuple<double, SeedOrOffset, SeedOrOffset>>;

ir::Tensor int_or_tensor(PyGraph& g, const SeedOrOffset& v) {
  if (auto* t = std::get_if<ir::Tensor>(&v)) return *t;
  return g.graph.scalar(ir::Scalar::of_int(std::get<int64_t>(v)));
}

// Fills the attributes and optional inputs shared by forward and backward.
void fill_common(PyGraph& g, ir::SdpaAttrs& a, ir::SdpaInputs& extra,
                 const std::optional<TensorOrScalar>& attn_scale, OptT bias, bool causal,
                 bool causal_bottom_right, DiagonalAlignment alignment,
                 std::optional<int64_t> left_bound, std::optional<int64_t> right_bound,
                 bool padding_mask, OptT seq_len_q, OptT seq_len_kv, const Dropout& dropout) {
  if (attn_scale) {
    // A float stays an attribute of the node; a tensor is bound to the ATTN_SCALE port.
    if (auto* t = std::get_if<ir::Tensor>(&*attn_scale))
      extra.attn_scale = *t;
    else
      a.attn_scale = std::get<double>(*attn_scale);
  }
  extra.bias = std::move(bias);
  a.causal = causal || causal_bottom_right;
  a.diagonal_alignment = causal_bottom_right ? DiagonalAlignment::BottomRight : alignment;
  a.left_bound = left_bound;
  a.right_bound = right_bound;
  if (padding_mask && !(seq_len_q && seq_len_kv))
    throw nb::value_error("sdpa: use_padding_mask=True needs seq_len_q and seq_len_kv tensors");
  a.padding_mask = padding_mask;
  extra.seq_len_q = std::move(seq_len_q);
  extra.seq_len_kv = std::move(seq_len_kv);
  if (dropout) {
    a.dropout_probability = std::get<0>(*dropout);
    extra.seed = int_or_tensor(g, std::get<1>(*dropout));
    extra.offset = int_or_tensor(g, std::get<2>(*dropout));
  }
}

}  // namespace

void bind_ops_sdpa(nb::class_<PyGraph>& cls) {
  cls.def(
      "sdpa",
      [](PyGraph& g, ir::Tensor q, ir::Tensor k, ir::Tensor v, bool is_inference,
         std::optional<TensorOrScalar> attn_scale, OptT bias, bool use_causal_mask,
         bool use_causal_mask_bottom_right, DiagonalAlignment alignment,
         std::optional<int64_t> left_bound, std::optional<int64_t> right_bound,
         bool use_padding_mask, OptT seq_len_q, OptT seq_len_kv, Dropout dropout, DataType compute,
         std::string name) {
        ir::SdpaAttrs a;
        a.is_inference = is_inference;
        ir::SdpaInputs extra;
        fill_common(g, a, extra, attn_scale, std::move(bias), use_causal_mask,
                    use_causal_mask_bottom_right, alignment, left_bound, right_bound,
                    use_padding_mask, std::move(seq_len_q), std::move(seq_len_kv), dropout);
        return as_tuple(g.graph.sdpa(q, k, v, a, extra, op_options(compute, std::move(name))));
      },
      nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("is_inference"),
      nb::arg("attn_scale").none() = nb::none(), nb::arg("bias").none() = nb::none(),
      nb::arg("use_causal_mask") = false, nb::arg("use_causal_mask_bottom_right") = false,
      nb::arg("diagonal_alignment") = DiagonalAlignment::TopLeft,
      nb::arg("left_bound").none() = nb::none(), nb::arg("right_bound").none() = nb::none(),
      nb::arg("use_padding_mask") = false, nb::arg("seq_len_q").none() = nb::none(),
      nb::arg("seq_len_kv").none() = nb::none(), nb::arg("dropout").none() = nb::none(),
      nb::arg("compute_data_type") = DataType::NotSet, nb::arg("name") = "",
      "Attention O = softmax(scale * Q K^T + bias, masked) V with Q [b,h,s_q,d], K "
      "[b,h_k,s_kv,d],\n"
      "V [b,h_v,s_kv,d_v]. attn_scale: float or pass-by-value tensor (default 1/sqrt(d)).\n"
      "use_causal_mask is diagonal_alignment=TOP_LEFT with right_bound=0. dropout: (p, seed,\n"
      "offset). Returns (O, stats); stats (log-sum-exp, fp32) is None when is_inference.");

  cls.def(
      "sdpa_backward",
      [](PyGraph& g, ir::Tensor q, ir::Tensor k, ir::Tensor v, ir::Tensor o, ir::Tensor dO,
         ir::Tensor stats, std::optional<TensorOrScalar> attn_scale, OptT bias,
         bool use_causal_mask, bool use_causal_mask_bottom_right, DiagonalAlignment alignment,
         std::optional<int64_t> left_bound, std::optional<int64_t> right_bound,
         bool use_padding_mask, OptT seq_len_q, OptT seq_len_kv, Dropout dropout, DataType compute,
         std::string name) {
        ir::SdpaBwdAttrs a;
        ir::SdpaInputs extra;
        fill_common(g, a, extra, attn_scale, std::move(bias), use_causal_mask,
                    use_causal_mask_bottom_right, alignment, left_bound, right_bound,
                    use_padding_mask, std::move(seq_len_q), std::move(seq_len_kv), dropout);
        auto r = g.graph.sdpa_backward(q, k, v, o, dO, stats, a, extra,
                                       op_options(compute, std::move(name)));
        if (r[3]) return as_tuple(r);
        return as_tuple(std::array<ir::Tensor, 3>{r[0], r[1], r[2]});
      },
      nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("o"), nb::arg("dO"), nb::arg("stats"),
      nb::arg("attn_scale").none() = nb::none(), nb::arg("bias").none() = nb::none(),
      nb::arg("use_causal_mask") = false, nb::arg("use_causal_mask_bottom_right") = false,
      nb::arg("diagonal_alignment") = DiagonalAlignment::TopLeft,
      nb::arg("left_bound").none() = nb::none(), nb::arg("right_bound").none() = nb::none(),
      nb::arg("use_padding_mask") = false, nb::arg("seq_len_q").none() = nb::none(),
      nb::arg("seq_len_kv").none() = nb::none(), nb::arg("dropout").none() = nb::none(),
      nb::arg("compute_data_type") = DataType::NotSet, nb::arg("name") = "",
      "Gradients of sdpa. Returns (dQ, dK, dV), or (dQ, dK, dV, dBias) when bias is given.");
}

}  // namespace dnngraph::py
