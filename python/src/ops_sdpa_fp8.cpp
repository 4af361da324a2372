// FP8 attention with per-tensor scaling: sdpa_fp8 and sdpa_fp8_backward, with the cuDNN
// frontend's positional order and keywords (its wrapper adds generate_stats and the renamed
// mask keywords, dnngraph/_compat/ops.py).
#include "common.hpp"

namespace dnngraph::py {

namespace {

using OptT = ir::Tensor;

// Bias and dropout have no place in the FP8 family: refused at the call, as NotSupportedError.
void refuse_extras(const char* op, const OptT& bias, const nb::object& dropout,
                   const OptT& rng_dump) {
  const char* what = bias                 ? "bias"
                     : !dropout.is_none() ? "dropout"
                     : rng_dump           ? "rng_dump"
                                          : nullptr;
  if (what)
    throw NotSupportedException(std::string(op) + "(" + what +
                                "=...): dnngraph's FP8 attention has no bias or dropout; use sdpa "
                                "in FP16/BF16 for them");
}

}  // namespace

void bind_op_sdpa_fp8(nb::class_<PyGraph>& cls) {
  cls.def(
      "sdpa_fp8",
      [](PyGraph& g, ir::Tensor q, ir::Tensor k, ir::Tensor v, ir::Tensor descale_q,
         ir::Tensor descale_k, ir::Tensor descale_v, ir::Tensor descale_s, ir::Tensor scale_s,
         ir::Tensor scale_o, bool is_inference, std::optional<TensorOrScalar> attn_scale, OptT bias,
         bool use_alibi_mask, bool use_padding_mask, OptT seq_len_q, OptT seq_len_kv,
         nb::object dropout, OptT rng_dump, bool use_causal_mask, bool use_causal_mask_bottom_right,
         DiagonalAlignment alignment, std::optional<int64_t> left_bound,
         std::optional<int64_t> right_bound, DataType compute, std::string name) {
        refuse_extras("sdpa_fp8", bias, dropout, rng_dump);
        ir::SdpaFp8Attrs a;
        a.is_inference = is_inference;
        ir::SdpaInputs extra;
        fill_sdpa_options(a, extra, attn_scale, use_causal_mask, use_causal_mask_bottom_right,
                          alignment, left_bound, right_bound, use_padding_mask,
                          std::move(seq_len_q), std::move(seq_len_kv), use_alibi_mask, "sdpa_fp8");
        ir::SdpaFp8Scales sc;
        sc.descale_q = descale_q, sc.descale_k = descale_k, sc.descale_v = descale_v;
        sc.descale_s = descale_s, sc.scale_s = scale_s, sc.scale_o = scale_o;
        return as_tuple(
            g.graph.sdpa_fp8(q, k, v, sc, a, extra, op_options(compute, std::move(name))));
      },
      nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("descale_q"), nb::arg("descale_k"),
      nb::arg("descale_v"), nb::arg("descale_s"), nb::arg("scale_s"), nb::arg("scale_o"),
      nb::arg("is_inference"), nb::arg("attn_scale").none() = nb::none(),
      nb::arg("bias").none() = nb::none(), nb::arg("use_alibi_mask") = false,
      nb::arg("use_padding_mask") = false, nb::arg("seq_len_q").none() = nb::none(),
      nb::arg("seq_len_kv").none() = nb::none(), nb::arg("dropout").none() = nb::none(),
      nb::arg("rng_dump").none() = nb::none(), nb::arg("use_causal_mask") = false,
      nb::arg("use_causal_mask_bottom_right") = false,
      nb::arg("diagonal_alignment") = DiagonalAlignment::TopLeft,
      nb::arg("left_bound").none() = nb::none(), nb::arg("right_bound").none() = nb::none(),
      nb::arg("compute_data_type") = DataType::NotSet, nb::arg("name") = "",
      "FP8 attention with per-tensor scaling. q, k, v: FP8_E4M3 / FP8_E5M2 [b,h,s,d]; each\n"
      "descale / scale: a FLOAT [1,1,1,1] tensor. S = attn_scale * Q K^T * descale_q *\n"
      "descale_k (masked as sdpa); P = softmax(S); P8 = fp8(P * scale_s);\n"
      "O = (P8 V) * descale_s * descale_v * scale_o. Amax_S = max|P|, Amax_O = max|O| before\n"
      "scale_o (FLOAT [1,1,1,1]; mark them as outputs to read them). No bias, no dropout.\n"
      "Returns (O, Stats, Amax_S, Amax_O); Stats (log-sum-exp, fp32) is None when\n"
      "is_inference.");

  frontend_form(
      cls, "sdpa_fp8",
      {"q", "k", "v", "descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o"});
}

void bind_op_sdpa_fp8_backward(nb::class_<PyGraph>& cls) {
  cls.def(
      "sdpa_fp8_backward",
      [](PyGraph& g, ir::Tensor q, ir::Tensor k, ir::Tensor v, ir::Tensor o, ir::Tensor dO,
         ir::Tensor stats, ir::Tensor descale_q, ir::Tensor descale_k, ir::Tensor descale_v,
         ir::Tensor descale_o, ir::Tensor descale_dO, ir::Tensor descale_s, ir::Tensor descale_dP,
         ir::Tensor scale_s, ir::Tensor scale_dQ, ir::Tensor scale_dK, ir::Tensor scale_dV,
         ir::Tensor scale_dP, std::optional<TensorOrScalar> attn_scale, bool use_padding_mask,
         OptT seq_len_q, OptT seq_len_kv, bool use_causal_mask, bool use_causal_mask_bottom_right,
         DiagonalAlignment alignment, std::optional<int64_t> left_bound,
         std::optional<int64_t> right_bound, nb::object dropout, bool use_alibi_mask,
         DataType compute, std::string name) {
        refuse_extras("sdpa_fp8_backward", nullptr, dropout, nullptr);
        ir::SdpaFp8BwdAttrs a;
        ir::SdpaInputs extra;
        fill_sdpa_options(a, extra, attn_scale, use_causal_mask, use_causal_mask_bottom_right,
                          alignment, left_bound, right_bound, use_padding_mask,
                          std::move(seq_len_q), std::move(seq_len_kv), use_alibi_mask,
                          "sdpa_fp8_backward");
        ir::SdpaFp8Scales sc;
        sc.descale_q = descale_q, sc.descale_k = descale_k, sc.descale_v = descale_v;
        sc.descale_o = descale_o, sc.descale_do = descale_dO, sc.descale_s = descale_s;
        sc.descale_dp = descale_dP, sc.scale_s = scale_s, sc.scale_dq = scale_dQ;
        sc.scale_dk = scale_dK, sc.scale_dv = scale_dV, sc.scale_dp = scale_dP;
        return as_tuple(g.graph.sdpa_fp8_backward(q, k, v, o, dO, stats, sc, a, extra,
                                                  op_options(compute, std::move(name))));
      },
      nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("o"), nb::arg("dO"), nb::arg("stats"),
      nb::arg("descale_q"), nb::arg("descale_k"), nb::arg("descale_v"), nb::arg("descale_o"),
      nb::arg("descale_dO"), nb::arg("descale_s"), nb::arg("descale_dP"), nb::arg("scale_s"),
      nb::arg("scale_dQ"), nb::arg("scale_dK"), nb::arg("scale_dV"), nb::arg("scale_dP"),
      nb::arg("attn_scale").none() = nb::none(), nb::arg("use_padding_mask") = false,
      nb::arg("seq_len_q").none() = nb::none(), nb::arg("seq_len_kv").none() = nb::none(),
      nb::arg("use_causal_mask") = false, nb::arg("use_causal_mask_bottom_right") = false,
      nb::arg("diagonal_alignment") = DiagonalAlignment::TopLeft,
      nb::arg("left_bound").none() = nb::none(), nb::arg("right_bound").none() = nb::none(),
      nb::arg("dropout").none() = nb::none(), nb::arg("use_alibi_mask") = false,
      nb::arg("compute_data_type") = DataType::NotSet, nb::arg("name") = "",
      "Gradients of sdpa_fp8 (pass the forward's mask options). q, k, v, dO: FP8; o: the\n"
      "forward's O; stats: its Stats. E = exp(S - stats); P8 = fp8(E * scale_s);\n"
      "dV = (P8^T dO) * descale_s * descale_dO * scale_dV;\n"
      "dS = ((dO V^T) * descale_dO * descale_v - rowsum(dO * O) * descale_dO * descale_o) * E\n"
      "* attn_scale; dS8 = fp8(dS * scale_dP) in dO's type;\n"
      "dQ = (dS8 K) * descale_dP * descale_k * scale_dQ; dK = (dS8^T Q) * descale_dP *\n"
      "descale_q * scale_dK. Each amax is the largest magnitude before its scale.\n"
      "Returns (dQ, dK, dV, amax_dQ, amax_dK, amax_dV, amax_dP).");
  frontend_form(cls, "sdpa_fp8_backward",
                {"q", "k", "v", "o", "dO", "stats", "descale_q", "descale_k", "descale_v",
                 "descale_o", "descale_dO", "descale_s", "descale_dP", "scale_s", "scale_dQ",
                 "scale_dK", "scale_dV", "scale_dP"});
}

}  // namespace dnngraph::py
