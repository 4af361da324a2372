// Scaled dot-product attention, forward and backward.
#include "common.hpp"

namespace dnngraph::py {

namespace {

using OptT = ir::Tensor;
using SeedOrOffset = std::variant<ir::Tensor, int64_t>;
// Dropout by probability: (probability, seed, offset); seed and offset are tensors or ints
// (int64 constants). The engine draws the keep mask.
using DropoutByProbability = std::tuple<double, SeedOrOffset, SeedOrOffset>;
// Dropout by mask: (mask, scale); P is multiplied by the mask tensor (used as given) and by
// scale, a tensor or a float (a pass-by-value constant).
using DropoutByMask = std::tuple<ir::Tensor, TensorOrScalar>;
using Dropout = std::optional<std::variant<DropoutByProbability, DropoutByMask>>;

ir::Tensor int_or_tensor(PyGraph& g, const SeedOrOffset& v) {
  if (auto* t = std::get_if<ir::Tensor>(&v)) return *t;
  return g.graph.scalar(ir::Scalar::of_int(std::get<int64_t>(v)));
}

// Fills the attributes and optional inputs shared by forward and backward.
void fill_common(PyGraph& g, ir::SdpaOptions& a, ir::SdpaInputs& extra,
                 const std::optional<TensorOrScalar>& attn_scale, OptT bias, bool causal,
                 bool causal_bottom_right, DiagonalAlignment alignment,
                 std::optional<int64_t> left_bound, std::optional<int64_t> right_bound,
                 bool padding_mask, OptT seq_len_q, OptT seq_len_kv, const Dropout& dropout,
                 bool alibi, std::optional<int64_t> max_total_q,
                 std::optional<int64_t> max_total_kv) {
  a.max_total_seq_len_q = max_total_q;
  a.max_total_seq_len_kv = max_total_kv;
  fill_sdpa_options(a, extra, attn_scale, causal, causal_bottom_right, alignment, left_bound,
                    right_bound, padding_mask, std::move(seq_len_q), std::move(seq_len_kv), alibi,
                    "sdpa");
  extra.bias = std::move(bias);
  if (!dropout) return;
  if (const auto* p = std::get_if<DropoutByProbability>(&*dropout)) {
    a.dropout_probability = std::get<0>(*p);
    extra.seed = int_or_tensor(g, std::get<1>(*p));
    extra.offset = int_or_tensor(g, std::get<2>(*p));
  } else {
    const auto& m = std::get<DropoutByMask>(*dropout);
    if (!std::get<0>(m)) throw nb::value_error("sdpa: dropout=(mask, scale) needs a mask tensor");
    extra.dropout_mask = std::get<0>(m);
    extra.dropout_scale = as_tensor(g, std::get<1>(m));
  }
}

// A score modifier callback fn(graph, score) -> tensor (the frontend's score_mod /
// score_mod_bprop): called with this graph's own Python object, so the pointwise methods it
// calls (mul, div, tanh, gen_index, binary_select, ...) are the graph's; the ops it adds become
// the SDPA node's subgraph (ir::Graph::build_subgraph).
ir::ScoreModifier score_modifier(PyGraph& g, const std::optional<nb::callable>& fn,
                                 const char* what) {
  if (!fn) return {};
  return [&g, f = *fn, what](ir::Graph&, ir::Tensor score) -> ir::Tensor {
    nb::object self = nb::find(&g);
    nb::object r = f(self, nb::cast(score));
    ir::Tensor t;
    if (!nb::try_cast(r, t) || !t)
      throw nb::type_error(
          detail::cat(what, " must return the modified score tensor (a graph tensor), got ",
                      nb::inst_name(r).c_str())
              .c_str());
    return t;
  };
}

}  // namespace

void fill_sdpa_options(ir::SdpaOptions& a, ir::SdpaInputs& extra,
                       const std::optional<TensorOrScalar>& attn_scale, bool causal,
                       bool causal_bottom_right, DiagonalAlignment alignment,
                       std::optional<int64_t> left_bound, std::optional<int64_t> right_bound,
                       bool padding_mask, OptT seq_len_q, OptT seq_len_kv, bool alibi,
                       const char* op) {
  if (attn_scale) {
    if (auto* t = std::get_if<ir::Tensor>(&*attn_scale))
      extra.attn_scale = *t;
    else
      a.attn_scale = std::get<double>(*attn_scale);
  }
  a.causal = causal || causal_bottom_right;
  a.diagonal_alignment = causal_bottom_right ? DiagonalAlignment::BottomRight : alignment;
  a.left_bound = left_bound;
  a.right_bound = right_bound;
  a.alibi_mask = alibi;
  if (padding_mask && !(seq_len_q && seq_len_kv))
    throw nb::value_error(
        (std::string(op) + ": use_padding_mask=True needs seq_len_q and seq_len_kv tensors")
            .c_str());
  a.padding_mask = padding_mask;
  extra.seq_len_q = std::move(seq_len_q);
  extra.seq_len_kv = std::move(seq_len_kv);
}

void bind_op_sdpa(nb::class_<PyGraph>& cls) {
  cls.def(
      "sdpa",
      [](PyGraph& g, ir::Tensor q, ir::Tensor k, ir::Tensor v, bool is_inference,
         std::optional<TensorOrScalar> attn_scale, OptT bias, bool use_causal_mask,
         bool use_causal_mask_bottom_right, DiagonalAlignment alignment,
         std::optional<int64_t> left_bound, std::optional<int64_t> right_bound,
         bool use_padding_mask, OptT seq_len_q, OptT seq_len_kv, Dropout dropout, OptT rng_dump,
         bool use_alibi_mask, std::optional<int64_t> max_total_seq_len_q,
         std::optional<int64_t> max_total_seq_len_kv, OptT paged_attention_k_table,
         OptT paged_attention_v_table, std::optional<int64_t> paged_attention_max_seq_len_kv,
         OptT sink_token, OptT score_max, OptT score_sum_exp, DataType compute, std::string name,
         std::optional<nb::callable> score_mod) {
        ir::SdpaAttrs a;
        a.is_inference = is_inference;
        a.paged_max_seq_len_kv = paged_attention_max_seq_len_kv;
        ir::SdpaInputs extra;
        fill_common(g, a, extra, attn_scale, std::move(bias), use_causal_mask,
                    use_causal_mask_bottom_right, alignment, left_bound, right_bound,
                    use_padding_mask, std::move(seq_len_q), std::move(seq_len_kv), dropout,
                    use_alibi_mask, max_total_seq_len_q, max_total_seq_len_kv);
        extra.rng_dump = std::move(rng_dump);
        extra.sink_token = std::move(sink_token);
        extra.page_table_k = std::move(paged_attention_k_table);
        extra.page_table_v = std::move(paged_attention_v_table);
        extra.score_max = std::move(score_max);
        extra.score_sum_exp = std::move(score_sum_exp);
        extra.score_mod = score_modifier(g, score_mod, "score_mod");
        return as_tuple(g.graph.sdpa(q, k, v, a, extra, op_options(compute, std::move(name))));
      },
      nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("is_inference"),
      nb::arg("attn_scale").none() = nb::none(), nb::arg("bias").none() = nb::none(),
      nb::arg("use_causal_mask") = false, nb::arg("use_causal_mask_bottom_right") = false,
      nb::arg("diagonal_alignment") = DiagonalAlignment::TopLeft,
      nb::arg("left_bound").none() = nb::none(), nb::arg("right_bound").none() = nb::none(),
      nb::arg("use_padding_mask") = false, nb::arg("seq_len_q").none() = nb::none(),
      nb::arg("seq_len_kv").none() = nb::none(), nb::arg("dropout").none() = nb::none(),
      nb::arg("rng_dump").none() = nb::none(), nb::arg("use_alibi_mask") = false,
      nb::arg("max_total_seq_len_q").none() = nb::none(),
      nb::arg("max_total_seq_len_kv").none() = nb::none(),
      nb::arg("paged_attention_k_table").none() = nb::none(),
      nb::arg("paged_attention_v_table").none() = nb::none(),
      nb::arg("paged_attention_max_seq_len_kv").none() = nb::none(),
      nb::arg("sink_token").none() = nb::none(), nb::arg("score_max").none() = nb::none(),
      nb::arg("score_sum_exp").none() = nb::none(), nb::arg("compute_data_type") = DataType::NotSet,
      nb::arg("name") = "", nb::arg("score_mod").none() = nb::none(),
      "Attention O = softmax(scale * Q K^T + bias, masked) V with Q [b,h,s_q,d], K "
      "[b,h_k,s_kv,d],\n"
      "V [b,h_v,s_kv,d_v]. attn_scale: float or pass-by-value tensor (default 1/sqrt(d)).\n"
      "use_causal_mask is diagonal_alignment=TOP_LEFT with right_bound=0.\n"
      "use_alibi_mask adds the ALiBi bias slope[h] * (col - row) after bias, with the cuDNN\n"
      "frontend's per-query-head slopes; it needs use_causal_mask (top-left).\n"
      "dropout, one of two forms (P = softmax probabilities; stats are taken before dropout):\n"
      "  (p, seed, offset): the engine draws a keep mask with probability 1-p and uses\n"
      "    P * keep / (1-p); seed and offset are int64 tensors or ints.\n"
      "  (mask, scale): P * mask * scale with mask [b|1, h|1, s_q, s_kv] (floating, values used\n"
      "    as given, normally 0/1) and scale a one-element tensor or a float.\n"
      "rng_dump: a graph tensor, only with dropout=(p, seed, offset); receives the keep mask\n"
      "the engine drew as 1/0, [b, h, s_q, s_kv] (dims, strides, type inferred when unset).\n"
      "Replaying it as dropout=(rng_dump, 1/(1-p)) reproduces the run, e.g. to check an\n"
      "engine against another whose random numbers differ.\n"
      "Ragged (THD) Q, K, V, O, stats: set their ragged offsets (tensor.set_ragged_offset);\n"
      "they need use_padding_mask. max_total_seq_len_q/kv: the largest token total of the\n"
      "ragged Q / K-V (a hint; only with ragged tensors).\n"
      "paged_attention_k_table / _v_table: [b, 1, pages, 1] INT32 page numbers; k / v are then\n"
      "page containers [num_pages, h, page_size, d] (key j of sequence i: row j % page_size of\n"
      "page table[i][j // page_size]); needs use_padding_mask. paged_attention_max_seq_len_kv:\n"
      "the logical s_kv (default: pages x page_size).\n"
      "sink_token: attention sinks, a FLOAT tensor [1, h_q, 1, 1]: one extra logit per query\n"
      "head in every row's softmax (no value row), so the row's weights sum to less than 1.\n"
      "score_max / score_sum_exp: graph tensors (dims [b, h_q, s_q, 1] and FLOAT when unset)\n"
      "that receive the row max of the masked scores and the row sum of exp(score - max)\n"
      "(stats = max + log(sum_exp)); both together and only with is_inference=True, as cuDNN's\n"
      "composite softmax allows. Not part of the return.\n"
      "score_mod: a callable fn(graph, score) -> tensor that adds pointwise ops (graph.mul,\n"
      "div, tanh, add, gen_index, cmp_*, binary_select, ...) on the scaled score\n"
      "attn_scale * Q K^T [b, h_q, s_q, s_kv] FLOAT and returns the modified score, applied\n"
      "before the bias and the softmax (e.g. softcapping: cap * tanh(score / cap)). Tensors it\n"
      "reads besides the score (scalars, tables) are graph tensors. Not with the causal,\n"
      "band or ALiBi masks (docs/sdpa-score-mod.md); with seq_len_q / seq_len_kv the padding\n"
      "mask applies after it.\n"
      "Returns (O, stats); stats (log-sum-exp, fp32) is None when is_inference.");

  frontend_form(cls, "sdpa", {"q", "k", "v"});
}

void bind_op_sdpa_backward(nb::class_<PyGraph>& cls) {
  cls.def(
      "sdpa_backward",
      [](PyGraph& g, ir::Tensor q, ir::Tensor k, ir::Tensor v, ir::Tensor o, ir::Tensor dO,
         ir::Tensor stats, std::optional<TensorOrScalar> attn_scale, OptT bias,
         bool use_causal_mask, bool use_causal_mask_bottom_right, DiagonalAlignment alignment,
         std::optional<int64_t> left_bound, std::optional<int64_t> right_bound,
         bool use_padding_mask, OptT seq_len_q, OptT seq_len_kv, Dropout dropout, OptT dBias,
         bool dbias_output, bool use_alibi_mask, std::optional<int64_t> max_total_seq_len_q,
         std::optional<int64_t> max_total_seq_len_kv, OptT sink_token, OptT dSink_token,
         DataType compute, std::string name, std::optional<nb::callable> score_mod,
         std::optional<nb::callable> score_mod_bprop) {
        ir::SdpaBwdAttrs a;
        ir::SdpaInputs extra;
        fill_common(g, a, extra, attn_scale, std::move(bias), use_causal_mask,
                    use_causal_mask_bottom_right, alignment, left_bound, right_bound,
                    use_padding_mask, std::move(seq_len_q), std::move(seq_len_kv), dropout,
                    use_alibi_mask, max_total_seq_len_q, max_total_seq_len_kv);
        const bool given = static_cast<bool>(dBias);
        extra.dbias = std::move(dBias);
        extra.dbias_output = dbias_output;
        extra.sink_token = std::move(sink_token);
        extra.dsink_token = std::move(dSink_token);
        extra.score_mod = score_modifier(g, score_mod, "score_mod");
        extra.score_mod_bprop = score_modifier(g, score_mod_bprop, "score_mod_bprop");
        auto r = g.graph.sdpa_backward(q, k, v, o, dO, stats, a, extra,
                                       op_options(compute, std::move(name)));
        if (r[3] && !given) return as_tuple(r);
        return as_tuple(std::array<ir::Tensor, 3>{r[0], r[1], r[2]});
      },
      nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("o"), nb::arg("dO"), nb::arg("stats"),
      nb::arg("attn_scale").none() = nb::none(), nb::arg("bias").none() = nb::none(),
      nb::arg("use_causal_mask") = false, nb::arg("use_causal_mask_bottom_right") = false,
      nb::arg("diagonal_alignment") = DiagonalAlignment::TopLeft,
      nb::arg("left_bound").none() = nb::none(), nb::arg("right_bound").none() = nb::none(),
      nb::arg("use_padding_mask") = false, nb::arg("seq_len_q").none() = nb::none(),
      nb::arg("seq_len_kv").none() = nb::none(), nb::arg("dropout").none() = nb::none(),
      nb::arg("dBias").none() = nb::none(), nb::arg("dbias_output") = true,
      nb::arg("use_alibi_mask") = false, nb::arg("max_total_seq_len_q").none() = nb::none(),
      nb::arg("max_total_seq_len_kv").none() = nb::none(),
      nb::arg("sink_token").none() = nb::none(), nb::arg("dSink_token").none() = nb::none(),
      nb::arg("compute_data_type") = DataType::NotSet, nb::arg("name") = "",
      nb::arg("score_mod").none() = nb::none(), nb::arg("score_mod_bprop").none() = nb::none(),
      "Gradients of sdpa. Pass the forward's options, use_alibi_mask and dropout included\n"
      "(dropout in either form: the same (p, seed, offset) redraws the same mask; (mask,\n"
      "scale) reuses it). Returns\n"
      "(dQ, dK, dV), or (dQ, dK, dV, dBias) when bias is given (dbias_output=False: no dBias).\n"
      "dBias=tensor (the frontend's form): that tensor receives the bias gradient and the\n"
      "return is (dQ, dK, dV).\n"
      "sink_token: the forward's sink logits; dSink_token=tensor [1, h_q, 1, 1] FLOAT receives\n"
      "their gradient (needs sink_token; not part of the return).\n"
      "score_mod: the forward's modifier, applied again in the recompute. score_mod_bprop:\n"
      "fn(graph, dS) -> tensor, given the gradient of the modified score, returns the gradient\n"
      "of the scaled score (it may read tensors score_mod made, e.g. saved in a closure);\n"
      "without it the gradient passes through unchanged, as in the cuDNN frontend.");
  frontend_form(cls, "sdpa_backward", {"q", "k", "v", "o", "dO", "stats"});
}

}  // namespace dnngraph::py
