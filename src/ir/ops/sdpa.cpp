// Shape rules of scaled dot-product attention (forward and backward).
//   Q [b, hq, sq, d], K [b, hk, skv, d], V [b, hv, skv, dv]; hq a multiple of hk and hv
//   (grouped-query / multi-query attention). O [b, hq, sq, dv] follows Q's layout;
//   STATS [b, hq, sq, 1] FLOAT (log-sum-exp) in training, packed unless the user set strides.
//   SCORE_MAX / SCORE_SUM_EXP [b, hq, sq, 1] FLOAT (optional, packed likewise): both or
//   neither, never with STATS (infer_score_rows).
// Optional inputs: ATTN_SCALE (one element), BIAS (broadcastable to [b, hq, sq, skv]),
// SEQ_LEN_Q / SEQ_LEN_KV ([b,1,1,1] integers, iff padding_mask), and dropout in one of two
// forms: by probability (dropout_probability + SEED / OFFSET integer scalars; the engine draws
// the keep mask) or by mask (DROPOUT_MASK broadcastable to [b, hq, sq, skv] + DROPOUT_SCALE, one
// element; both floating, used as given). The forms exclude each other so that an engine never
// has to guess which one wins. The forward may dump the mask it drew into RNG_DUMP
// [b, hq, sq, skv] (probability form only), to replay it through the mask form elsewhere.
// Ragged offsets (<X>_RAGGED_OFFSET [b+1,1,1,1] INT32/INT64, validate() binds them from the
// tensors' ragged_offset) and page tables (PAGE_TABLE_K/V [b,1,pages,1], K/V then page
// containers [pages, h, page_size, d]) need the padding mask, as in the frontend.
// alibi_mask (the frontend's use_alibi_mask) adds slope[h] * (col - row) to the scores; as in
// the frontend it needs causal masking (right bound 0) on the top-left diagonal.
// SINK_TOKEN [1, h_q, 1, 1] FLOAT (attention sinks: one extra softmax logit per query head);
// the backward's DSINK_TOKEN output [1, h_q, 1, 1] FLOAT needs it.
#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>

#include "dnngraph/ir/sdpa.hpp"
#include "ir/ops/common.hpp"
#include "ir/subgraph.hpp"

namespace dnngraph::ir {
namespace {

struct SdpaDims {
  int64_t b, hq, sq, d, skv, dv;
};

// Paged K / V (forward): the logical s_kv from the page tables and containers, after checking
// them. 0 when neither is paged.
Result<int64_t> check_paged(const Node& n, const Tensor& q, const Tensor& k, const Tensor& v) {
  const SdpaAttrs* fwd = n.kind() == OpKind::SdpaFwd ? &n.as<SdpaAttrs>() : nullptr;
  Tensor tk = n.input(Role::PAGE_TABLE_K), tv = n.input(Role::PAGE_TABLE_V);
  if (!tk && !tv) {
    if (fwd && fwd->paged_max_seq_len_kv)
      return make_error(ErrorCode::NotSupported, op_label(n),
                        ": paged_attention_max_seq_len_kv is set without a page table; it is the "
                        "logical s_kv of paged K / V (set paged_attention_k_table / _v_table)");
    return int64_t{0};
  }
  const int64_t b = q->dim[0];
  int64_t addressed = INT64_MAX, dense = 0;
  for (auto [role, table, data] :
       {std::tuple<Role, const Tensor&, const Tensor&>{Role::PAGE_TABLE_K, tk, k},
        {Role::PAGE_TABLE_V, tv, v}}) {
    const Role data_role = role == Role::PAGE_TABLE_K ? Role::K : Role::V;
    if (!table) {
      dense = data->dim[2];
      continue;
    }
    DNNGRAPH_TRY(check_rank(n, role, table, 4, 4));
    if (table->dim[0] != b || table->dim[1] != 1 || table->dim[3] != 1)
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(role, table),
                        " has dims ", dims_str(table->dim),
                        "; expected [b, 1, pages, 1] with b=", b,
                        " (one row of page numbers per "
                        "batch item)");
    if (!is_integral(table->data_type))
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(role, table),
                        " must be an integer (INT32) but is ", data_type_name(table->data_type));
    if (table->is_virtual || table->is_pass_by_value)
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(role, table),
                        " must be a graph input in memory (non-virtual, not pass-by-value)");
    if (n.input(data_role == Role::K ? Role::K_RAGGED_OFFSET : Role::V_RAGGED_OFFSET))
      return make_error(ErrorCode::NotSupported, op_label(n), ": ", port_label(data_role, data),
                        " is a page container and ragged; packed (ragged) page tables are not "
                        "supported: remove the ragged offset");
    addressed = std::min(addressed, table->dim[2] * data->dim[2]);
  }
  const SdpaOptions& a = fwd ? static_cast<const SdpaOptions&>(*fwd)
                             : static_cast<const SdpaOptions&>(n.as<SdpaBwdAttrs>());
  if (!a.padding_mask)
    return make_error(ErrorCode::NotSupported, op_label(n),
                      ": page tables need the padding mask (use_padding_mask with seq_len_q and "
                      "seq_len_kv), as in the cuDNN frontend");
  int64_t skv = dense ? dense : addressed;
  if (fwd && fwd->paged_max_seq_len_kv) {
    const int64_t m = *fwd->paged_max_seq_len_kv;
    if (m < 1 || m > addressed)
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": paged_attention_max_seq_len_kv ",
                        m, " is outside 1..", addressed,
                        " (what the page tables address: pages x page size)");
    skv = m;
  }
  if (dense && dense > addressed)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": the dense ", tk ? "V" : "K",
                      " has s_kv=", dense, " but the page table of the paged one addresses only ",
                      addressed, " rows");
  return skv;
}

Result<SdpaDims> check_qkv(const Node& n, const Tensor& q, const Tensor& k, const Tensor& v) {
  DNNGRAPH_TRY(check_rank(n, Role::Q, q, 4, 4));
  DNNGRAPH_TRY(check_rank(n, Role::K, k, 4, 4));
  DNNGRAPH_TRY(check_rank(n, Role::V, v, 4, 4));
  SdpaDims s{q->dim[0], q->dim[1], q->dim[2], q->dim[3], k->dim[2], v->dim[3]};
  auto paged_skv = check_paged(n, q, k, v);
  DNNGRAPH_TRY(paged_skv.status());
  const bool paged_k = n.input(Role::PAGE_TABLE_K) != nullptr;
  const bool paged_v = n.input(Role::PAGE_TABLE_V) != nullptr;
  if (*paged_skv > 0) s.skv = *paged_skv;
  for (auto [role, t] : {std::pair<Role, const Tensor&>{Role::K, k}, {Role::V, v}}) {
    if (t->dim[0] != s.b && !(role == Role::K ? paged_k : paged_v))
      return make_error(ErrorCode::InvalidGraph, op_label(n),
                        ": batch differs: ", port_label(Role::Q, q), " has b=", s.b, " but ",
                        port_label(role, t), " has b=", t->dim[0], " (dim 0)");
    if (s.hq % t->dim[1] != 0)
      return make_error(ErrorCode::InvalidGraph, op_label(n),
                        ": head count mismatch: ", port_label(Role::Q, q), " has ", s.hq,
                        " heads which is not a multiple of ", port_label(role, t), "'s ", t->dim[1],
                        " heads (dim 1)");
  }
  if (k->dim[3] != s.d)
    return make_error(ErrorCode::InvalidGraph, op_label(n),
                      ": head dim differs: ", port_label(Role::Q, q), " has d=", s.d, " but ",
                      port_label(Role::K, k), " has d=", k->dim[3], " (dim 3)");
  if (!paged_k && !paged_v && v->dim[2] != s.skv)
    return make_error(ErrorCode::InvalidGraph, op_label(n),
                      ": key/value length differs: ", port_label(Role::K, k), " has s_kv=", s.skv,
                      " but ", port_label(Role::V, v), " has ", v->dim[2], " (dim 2)");
  return s;
}

Status check_integer_scalar(const Node& n, Role role, const Tensor& t) {
  DNNGRAPH_TRY(check_scalar(n, role, t, false));
  if (!is_integral(t->data_type))
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(role, t),
                      " must be an integer (INT32/INT64) but is ", data_type_name(t->data_type));
  return Status::ok();
}

Status check_floating(const Node& n, Role role, const Tensor& t) {
  if (t->data_type != DataType::NotSet && !is_floating(t->data_type))
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(role, t),
                      " must have a floating data type but is ", data_type_name(t->data_type));
  return Status::ok();
}

// The mask form of dropout: DROPOUT_MASK and DROPOUT_SCALE together, never with the
// probability form.
Status check_dropout_mask(const Node& n, const SdpaOptions& a, const SdpaDims& s) {
  Tensor mask = n.input(Role::DROPOUT_MASK), scale = n.input(Role::DROPOUT_SCALE);
  if (!mask && !scale) return Status::ok();
  if (!mask || !scale)
    return make_error(
        ErrorCode::InvalidGraph, op_label(n), ": dropout with a mask needs both ",
        "DROPOUT_MASK and DROPOUT_SCALE but only ",
        mask ? port_label(Role::DROPOUT_MASK, mask) : port_label(Role::DROPOUT_SCALE, scale),
        " is given");
  if (a.dropout_probability && *a.dropout_probability > 0.0)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": ",
                      port_label(Role::DROPOUT_MASK, mask),
                      " (dropout by mask) cannot be combined ", "with dropout_probability ",
                      *a.dropout_probability, " (dropout by probability); expected one form only");
  for (Role role : {Role::SEED, Role::OFFSET})
    if (Tensor t = n.input(role))
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": ",
                        port_label(Role::DROPOUT_MASK, mask),
                        " (dropout by mask) cannot be combined with ", port_label(role, t),
                        " (dropout by probability); expected one form only");
  DNNGRAPH_TRY(check_rank(n, Role::DROPOUT_MASK, mask, 4, 4));
  DNNGRAPH_TRY(expect_broadcastable(n, Role::DROPOUT_MASK, mask, {s.b, s.hq, s.sq, s.skv},
                                    "the score matrix [b, h_q, s_q, s_kv]"));
  DNNGRAPH_TRY(check_floating(n, Role::DROPOUT_MASK, mask));
  DNNGRAPH_TRY(check_scalar(n, Role::DROPOUT_SCALE, scale, false));
  if (scale->value && !std::isfinite(scale->value->as_double()))
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": ",
                      port_label(Role::DROPOUT_SCALE, scale), " is ", scale->value->as_double(),
                      "; expected a finite scale (normally 1 / (1 - p))");
  return check_floating(n, Role::DROPOUT_SCALE, scale);
}

// SINK_TOKEN: one FLOAT logit per query head, [1, h_q, 1, 1] (as the cuDNN frontend checks it).
Status check_sink(const Node& n, const SdpaDims& s) {
  Tensor sink = n.input(Role::SINK_TOKEN);
  if (!sink) return Status::ok();
  DNNGRAPH_TRY(check_rank(n, Role::SINK_TOKEN, sink, 4, 4));
  DNNGRAPH_TRY(expect_dims(n, Role::SINK_TOKEN, sink, {1, s.hq, 1, 1},
                           "one sink logit per query head, [1, h_q, 1, 1]"));
  if (sink->data_type != DataType::NotSet && sink->data_type != DataType::Float)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": ",
                      port_label(Role::SINK_TOKEN, sink),
                      " must be FLOAT (fp32 sink logits, as "
                      "the cuDNN frontend requires) but is ",
                      data_type_name(sink->data_type), "; convert it to float32");
  return Status::ok();
}

// Ragged (THD) offsets: [b+1,1,1,1] integers in memory, only with the padding mask.
Status check_ragged(const Node& n, const SdpaOptions& a, const SdpaDims& s) {
  bool ragged = false;
  for (auto [role, rr] : kSdpaRaggedRoles) {
    Tensor t = n.input(role);
    if (!t) t = n.output(role);
    Tensor off = n.input(rr);
    if (t && t->ragged_offset_multiplier < 1)
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(role, t),
                        " has ragged_offset_multiplier ", t->ragged_offset_multiplier,
                        "; expected a positive number of elements per offset unit");
    if (t && t->ragged_offset_multiplier != 1 && !off)
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(role, t),
                        " has ragged_offset_multiplier ", t->ragged_offset_multiplier,
                        " but no ragged offset tensor; set one (set_ragged_offset) or leave the "
                        "multiplier at 1");
    if (!off) continue;
    if (!t)
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(rr, off),
                        " is given but ", role, " is not");
    ragged = true;
    DNNGRAPH_TRY(expect_dims(
        n, rr, off, {s.b + 1, 1, 1, 1},
        detail::cat("the ragged offset of ", port_label(role, t), ": where each of the b=", s.b,
                    " sequences starts, and one past the last")));
    if (off->data_type != DataType::Int32 && off->data_type != DataType::Int64)
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(rr, off),
                        " (the ragged offset of ", port_label(role, t),
                        ") must be INT32 or INT64 but is ", data_type_name(off->data_type));
    if (off->is_virtual || off->is_pass_by_value)
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(rr, off),
                        " (the ragged offset of ", port_label(role, t),
                        ") must be a graph input in memory (non-virtual, not pass-by-value)");
  }
  if (ragged && !a.padding_mask)
    return make_error(ErrorCode::NotSupported, op_label(n),
                      ": ragged offsets need the padding mask (use_padding_mask with seq_len_q "
                      "and seq_len_kv), as in the cuDNN frontend");
  for (auto [key, v] : {std::pair<const char*, const std::optional<int64_t>&>{
                            "max_total_seq_len_q", a.max_total_seq_len_q},
                        {"max_total_seq_len_kv", a.max_total_seq_len_kv}}) {
    if (!v) continue;
    if (!ragged)
      return make_error(ErrorCode::NotSupported, op_label(n), ": ", key,
                        " is only supported with ragged (packed THD) tensors, as in the cuDNN "
                        "frontend; set ragged offsets on Q, K, V, O or leave it unset");
    if (*v < 1)
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", key, " ", *v,
                        " is not a token count; expected at least 1");
  }
  return Status::ok();
}

// Attributes and optional inputs shared by forward and backward.
Status check_options(const Node& n, const SdpaOptions& a, const SdpaDims& s) {
  if (static_cast<int>(a.diagonal_alignment) < 0 ||
      a.diagonal_alignment > DiagonalAlignment::BottomRight)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": diagonal_alignment ",
                      static_cast<int>(a.diagonal_alignment), " is not TOP_LEFT or BOTTOM_RIGHT");
  if (Tensor scale = n.input(Role::ATTN_SCALE)) {
    DNNGRAPH_TRY(check_scalar(n, Role::ATTN_SCALE, scale, false));
    if (scale->value && !std::isfinite(scale->value->as_double()))
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": ",
                        port_label(Role::ATTN_SCALE, scale), " is ", scale->value->as_double(),
                        "; expected a finite scale");
  }
  if (a.attn_scale && !std::isfinite(*a.attn_scale))
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": attn_scale ", *a.attn_scale,
                      " is not finite; expected a finite scale (or leave it unset for "
                      "1/sqrt(d))");
  if (Tensor bias = n.input(Role::BIAS)) {
    DNNGRAPH_TRY(check_rank(n, Role::BIAS, bias, 4, 4));
    DNNGRAPH_TRY(expect_broadcastable(n, Role::BIAS, bias, {s.b, s.hq, s.sq, s.skv},
                                      "the score matrix [b, h_q, s_q, s_kv]"));
  }

  Tensor slq = n.input(Role::SEQ_LEN_Q), slkv = n.input(Role::SEQ_LEN_KV);
  if (a.padding_mask) {
    for (auto [role, t] :
         {std::pair<Role, const Tensor&>{Role::SEQ_LEN_Q, slq}, {Role::SEQ_LEN_KV, slkv}}) {
      if (!t)
        return make_error(ErrorCode::InvalidGraph, op_label(n), ": padding_mask needs input ",
                          role);
      DNNGRAPH_TRY(expect_dims(n, role, t, {s.b, 1, 1, 1}, "one length per batch item"));
      if (!is_integral(t->data_type))
        return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(role, t),
                          " must be an integer (INT32) but is ", data_type_name(t->data_type));
    }
  } else if (slq || slkv) {
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": ",
                      slq ? port_label(Role::SEQ_LEN_Q, slq) : port_label(Role::SEQ_LEN_KV, slkv),
                      " is given but padding_mask is off");
  }

  Tensor seed = n.input(Role::SEED), offset = n.input(Role::OFFSET);
  if (a.dropout_probability) {
    const double p = *a.dropout_probability;
    if (!(p >= 0.0 && p < 1.0))
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": dropout_probability ", p,
                        " is outside [0, 1)");
    if (p > 0.0) {
      if (!seed || !offset)
        return make_error(ErrorCode::InvalidGraph, op_label(n), ": dropout needs inputs SEED and ",
                          "OFFSET; missing ", seed ? Role::OFFSET : Role::SEED);
    }
  }
  if (seed) DNNGRAPH_TRY(check_integer_scalar(n, Role::SEED, seed));
  if (offset) DNNGRAPH_TRY(check_integer_scalar(n, Role::OFFSET, offset));
  DNNGRAPH_TRY(check_dropout_mask(n, a, s));
  DNNGRAPH_TRY(check_sink(n, s));
  DNNGRAPH_TRY(check_ragged(n, a, s));

  if (a.left_bound && *a.left_bound < 1)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": left_bound ", *a.left_bound,
                      " is not a window length; expected at least 1 (a query sees the keys "
                      "diag - left_bound < col, so 1 keeps the diagonal only)");
  if (a.right_bound && *a.right_bound < 0)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": right_bound ", *a.right_bound,
                      " is negative");
  // NotSupported, as the frontend raises them (cudnnGraphNotSupportedError): the ALiBi term is
  // defined there only under these masks.
  if (a.alibi_mask) {
    const bool right_zero = a.right_bound ? *a.right_bound == 0 : a.causal;
    if (!right_zero)
      return make_error(ErrorCode::NotSupported, op_label(n),
                        ": use_alibi_mask needs causal masking (right bound 0) but ",
                        a.right_bound ? detail::cat("right_bound is ", *a.right_bound)
                                      : std::string("no causal mask is set"),
                        "; set use_causal_mask=True (or diagonal_band_right_bound=0)");
    if (a.diagonal_alignment != DiagonalAlignment::TopLeft)
      return make_error(ErrorCode::NotSupported, op_label(n),
                        ": use_alibi_mask needs the top-left diagonal but diagonal_alignment is "
                        "BOTTOM_RIGHT; the ALiBi bias slope * (col - row) is defined on the "
                        "top-left diagonal (as in the cuDNN frontend)");
  }
  if (a.causal && a.right_bound && *a.right_bound != 0)
    return make_error(ErrorCode::InvalidGraph, op_label(n),
                      ": causal masking means right_bound 0"
                      " but right_bound is ",
                      *a.right_bound);
  return Status::ok();
}

// A per-row output (STATS, SCORE_MAX, SCORE_SUM_EXP): packed [b, h_q, s_q, 1] whatever Q's
// layout, as the cuDNN frontend fills it (users allocate that shape), FLOAT unless set;
// strides the user set are kept, and every engine honours them.
Status infer_row_output(const Node& n, Role role, const Tensor& t, const InferContext& ctx) {
  const auto& q = n.input(Role::Q)->dim;
  DNNGRAPH_TRY(infer_output(n, role, t, {q[0], q[1], q[2], 1}, nullptr, ctx, DataType::Float,
                            DataType::Float));
  return check_floating(n, role, t);
}

// SCORE_MAX / SCORE_SUM_EXP (the frontend's score_max / score_sum_exp). cuDNN's composite
// softmax (the frontend's form before cuDNN 9.21, the one dnngraph lowers) outputs STATS alone,
// the row max with the sum of exponentials, or none of them: the same rule for every engine, so
// that a graph the reference engine runs also builds on the GPU.
Status infer_score_rows(const Node& n, const InferContext& ctx) {
  Tensor stats = n.output(Role::STATS);
  Tensor mx = n.output(Role::SCORE_MAX), se = n.output(Role::SCORE_SUM_EXP);
  if (!mx && !se) return Status::ok();
  if (stats || !mx || !se) {
    std::string given;
    for (auto [role, t] : {std::pair<Role, const Tensor&>{Role::STATS, stats},
                           {Role::SCORE_MAX, mx},
                           {Role::SCORE_SUM_EXP, se}})
      if (t) given += (given.empty() ? "" : " and ") + port_label(role, t);
    return make_error(
        ErrorCode::NotSupported, op_label(n), ": outputs ", given,
        stats ? " are given together" : " is given alone",
        "; cuDNN's softmax (composite, before 9.21) outputs STATS alone, SCORE_MAX with "
        "SCORE_SUM_EXP, or none of them: ",
        stats ? "set is_inference (generate_stats=False) to get SCORE_MAX and SCORE_SUM_EXP "
                "(STATS = SCORE_MAX + log(SCORE_SUM_EXP)), or drop them"
              : "give both score_max and score_sum_exp, or neither");
  }
  DNNGRAPH_TRY(infer_row_output(n, Role::SCORE_MAX, mx, ctx));
  return infer_row_output(n, Role::SCORE_SUM_EXP, se, ctx);
}

}  // namespace

std::vector<double> sdpa_alibi_slopes(int64_t heads) {
  std::vector<double> out;
  if (heads <= 0) return out;
  const int64_t n = int64_t{1} << static_cast<int>(std::log2(static_cast<double>(heads)));
  auto slope = [&](float x) {
    const float e = x * -8.0f / static_cast<float>(n);
    return static_cast<double>(std::pow(2.0f, e));
  };
  for (int64_t i = 0; i < n; ++i) out.push_back(slope(static_cast<float>(i + 1)));
  for (int64_t i = 0; i < heads - n; ++i) out.push_back(slope(static_cast<float>(i) + 0.5f));
  return out;
}

int64_t sdpa_kv_length(const Node& n) {
  Tensor k = n.input(Role::K), v = n.input(Role::V);
  Tensor tk = n.input(Role::PAGE_TABLE_K), tv = n.input(Role::PAGE_TABLE_V);
  if (!tk && !tv) return k->dim[2];
  const auto& a = n.as<SdpaAttrs>();
  if (a.paged_max_seq_len_kv) return *a.paged_max_seq_len_kv;
  if (!tk) return k->dim[2];
  if (!tv) return v->dim[2];
  return std::min(tk->dim[2] * k->dim[2], tv->dim[2] * v->dim[2]);
}

Status infer_sdpa(Node& n, const InferContext& ctx) {
  const auto& a = n.as<SdpaAttrs>();
  DNNGRAPH_ASSIGN_OR_RETURN(const SdpaFwdPorts ports, sdpa_forward_ports(n));
  const auto& [q, k, v, o] = ports;
  auto s = check_qkv(n, q, k, v);
  DNNGRAPH_TRY(s.status());
  DNNGRAPH_TRY(check_options(n, a, *s));
  DNNGRAPH_TRY(infer_output(n, Role::O, o, {s->b, s->hq, s->sq, s->dv}, q, ctx, q->data_type));
  DNNGRAPH_TRY(infer_sdpa_stats(n, a.is_inference, ctx));
  DNNGRAPH_TRY(infer_score_rows(n, ctx));
  if (Tensor dump = n.output(Role::RNG_DUMP)) {
    if (!a.dropout_probability || *a.dropout_probability <= 0.0)
      return make_error(
          ErrorCode::InvalidGraph, op_label(n), ": output ", port_label(Role::RNG_DUMP, dump),
          " needs dropout by probability (dropout_probability > 0, SEED, OFFSET) "
          "but dropout_probability is ",
          a.dropout_probability ? detail::cat(*a.dropout_probability) : std::string("unset"));
    // Packed row-major whatever Q's layout: the mask is a plain [b, h, s_q, s_kv] matrix.
    DNNGRAPH_TRY(infer_output(n, Role::RNG_DUMP, dump, {s->b, s->hq, s->sq, s->skv}, nullptr, ctx,
                              DataType::Float));
    DNNGRAPH_TRY(check_floating(n, Role::RNG_DUMP, dump));
  }
  return infer_score_mods(n, a, false, {s->b, s->hq, s->sq, s->skv}, ctx);
}

Result<SdpaFwdPorts> sdpa_forward_ports(const Node& n) {
  SdpaFwdPorts p;
  for (auto [role, t] :
       {std::pair<Role, Tensor*>{Role::Q, &p.q}, {Role::K, &p.k}, {Role::V, &p.v}}) {
    DNNGRAPH_ASSIGN_OR_RETURN(*t, required_input(n, role));
  }
  DNNGRAPH_ASSIGN_OR_RETURN(p.o, required_output(n, Role::O));
  return p;
}

Result<SdpaBwdPorts> sdpa_backward_ports(const Node& n) {
  SdpaBwdPorts p;
  for (auto [role, t] : {std::pair<Role, Tensor*>{Role::Q, &p.q},
                         {Role::K, &p.k},
                         {Role::V, &p.v},
                         {Role::O, &p.o},
                         {Role::DO, &p.d_o},
                         {Role::STATS, &p.stats}}) {
    DNNGRAPH_ASSIGN_OR_RETURN(*t, required_input(n, role));
  }
  for (auto [role, t] :
       {std::pair<Role, Tensor*>{Role::DQ, &p.dq}, {Role::DK, &p.dk}, {Role::DV, &p.dv}}) {
    DNNGRAPH_ASSIGN_OR_RETURN(*t, required_output(n, role));
  }
  return p;
}

Status check_sdpa_backward_dims(const Node& n, const SdpaBwdPorts& p) {
  const int64_t b = p.q->dim[0], hq = p.q->dim[1], sq = p.q->dim[2];
  const std::vector<int64_t> o_dims = {b, hq, sq, p.v->dim[3]};
  DNNGRAPH_TRY(expect_dims(n, Role::O, p.o, o_dims, "[b, h_q, s_q, d_v] from Q and V"));
  DNNGRAPH_TRY(expect_dims(n, Role::DO, p.d_o, o_dims, "the gradient has O's dims"));
  return expect_dims(n, Role::STATS, p.stats, {b, hq, sq, 1}, "[b, h_q, s_q, 1] from Q");
}

Status infer_sdpa_gradients(Node& n, const SdpaBwdPorts& p, const InferContext& ctx) {
  DNNGRAPH_TRY(infer_output(n, Role::DQ, p.dq, p.q->dim, p.q, ctx, p.q->data_type));
  DNNGRAPH_TRY(infer_output(n, Role::DK, p.dk, p.k->dim, p.k, ctx, p.k->data_type));
  return infer_output(n, Role::DV, p.dv, p.v->dim, p.v, ctx, p.v->data_type);
}

Status infer_sdpa_backward(Node& n, const InferContext& ctx) {
  const auto& a = n.as<SdpaBwdAttrs>();
  if (Tensor dump = n.output(Role::RNG_DUMP))
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": output ",
                      port_label(Role::RNG_DUMP, dump),
                      " is only for the forward sdpa; the backward replays the forward's mask "
                      "from SEED / OFFSET or DROPOUT_MASK");
  DNNGRAPH_ASSIGN_OR_RETURN(const SdpaBwdPorts p, sdpa_backward_ports(n));
  auto s = check_qkv(n, p.q, p.k, p.v);
  DNNGRAPH_TRY(s.status());
  DNNGRAPH_TRY(check_options(n, a, *s));
  DNNGRAPH_TRY(check_sdpa_backward_dims(n, p));
  DNNGRAPH_TRY(infer_sdpa_gradients(n, p, ctx));
  Tensor bias = n.input(Role::BIAS);
  if (Tensor dbias = n.output(Role::DBIAS)) {
    if (!bias)
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": output ",
                        port_label(Role::DBIAS, dbias), " needs input BIAS");
    DNNGRAPH_TRY(infer_output(n, Role::DBIAS, dbias, bias->dim, bias, ctx, bias->data_type));
  }
  if (Tensor dsink = n.output(Role::DSINK_TOKEN)) {
    if (!n.input(Role::SINK_TOKEN))
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": output ",
                        port_label(Role::DSINK_TOKEN, dsink),
                        " needs input SINK_TOKEN (the sink logits it is the gradient of)");
    DNNGRAPH_TRY(infer_output(n, Role::DSINK_TOKEN, dsink, {1, s->hq, 1, 1}, nullptr, ctx,
                              DataType::Float, DataType::Float));
    if (dsink->data_type != DataType::Float)
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": output ",
                        port_label(Role::DSINK_TOKEN, dsink), " must be FLOAT but is ",
                        data_type_name(dsink->data_type));
  }
  return infer_score_mods(n, a, true, {s->b, s->hq, s->sq, s->skv}, ctx);
}

Status infer_sdpa_stats(Node& n, bool is_inference, const InferContext& ctx) {
  Tensor stats = n.output(Role::STATS);
  if (is_inference && stats)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": output ",
                      port_label(Role::STATS, stats), " is given but is_inference is set");
  if (is_inference) return Status::ok();
  if (!stats)
    return make_error(ErrorCode::InvalidGraph, op_label(n),
                      ": training (is_inference false) needs output STATS");
  return infer_row_output(n, Role::STATS, stats, ctx);
}

Status check_sdpa_common(const Node& n, const SdpaOptions& a) {
  auto s = check_qkv(n, n.input(Role::Q), n.input(Role::K), n.input(Role::V));
  DNNGRAPH_TRY(s.status());
  return check_options(n, a, *s);
}

double sdpa_scale_of(const SdpaOptions& a, int64_t d) {
  return a.attn_scale ? *a.attn_scale : 1.0 / std::sqrt(static_cast<double>(d));
}

std::optional<Role> sdpa_ragged_role(OpKind kind, Role role) {
  const auto inputs = op_info(kind).inputs;
  for (auto [tensor, offset] : kSdpaRaggedRoles)
    if (tensor == role && std::find(inputs.begin(), inputs.end(), offset) != inputs.end())
      return offset;
  return std::nullopt;
}

}  // namespace dnngraph::ir
