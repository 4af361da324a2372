// Shape and type rules of FP8 attention with per-tensor scaling (sdpa_fp8, sdpa_fp8_backward;
// the maths is in include/dnngraph/ir/ops.hpp, SdpaFp8Attrs).
//   Q, K, V (backward: also DO) FP8_E4M3 / FP8_E5M2, shapes and masks as sdpa (sdpa.cpp,
//   check_sdpa_common); O (backward input) any floating type.
//   Each DESCALE_* / SCALE_* is required, one FLOAT element, rank 4 ([1,1,1,1]).
//   Outputs: O [b, hq, sq, dv] (Q's layout; Q's type unless set), STATS [b, hq, sq, 1] FLOAT
//   in training; DQ / DK / DV like Q / K / V; each AMAX_* FLOAT [1,1,1,1].
//   No bias, no dropout: the family has no such ports (validate() names them); a
//   dropout_probability attribute is refused here.
#include <string>
#include <string_view>

#include "ir/ops/common.hpp"

namespace dnngraph::ir {
namespace {

bool is_fp8(DataType t) { return t == DataType::FP8_E4M3 || t == DataType::FP8_E5M2; }

Status check_fp8(const Node& n, Role role, const Tensor& t) {
  if (!is_fp8(t->data_type))
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(role, t),
                      " must be FP8_E4M3 or FP8_E5M2 but is ", data_type_name(t->data_type),
                      "; quantize it to FP8 (and pass its descale) or use sdpa");
  return Status::ok();
}

// A descale / scale factor: one FLOAT element as [1,1,1,1].
Status check_factor(const Node& n, Role role) {
  DNNGRAPH_PORT(t, required_input(n, role));
  DNNGRAPH_TRY(check_rank(n, role, t, 4, 4));
  DNNGRAPH_TRY(check_scalar(n, role, t, false));
  if (t->data_type != DataType::Float)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(role, t),
                      " must be FLOAT (one float32 factor, dims [1,1,1,1]) but is ",
                      data_type_name(t->data_type));
  return Status::ok();
}

// An AMAX output: FLOAT [1,1,1,1], made by the builder (virtual unless marked as an output).
Status infer_amax(const Node& n, Role role, const InferContext& ctx) {
  DNNGRAPH_PORT(t, required_output(n, role));
  DNNGRAPH_TRY(
      infer_output(n, role, t, {1, 1, 1, 1}, nullptr, ctx, DataType::Float, DataType::Float));
  if (t->data_type != DataType::Float)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": output ", port_label(role, t),
                      " (an absolute maximum) must be FLOAT but is set to ",
                      data_type_name(t->data_type));
  return Status::ok();
}

Status check_no_dropout(const Node& n, const SdpaOptions& a) {
  if (a.dropout_probability && *a.dropout_probability > 0.0)
    return make_error(ErrorCode::NotSupported, op_label(n), ": dropout (dropout_probability ",
                      *a.dropout_probability,
                      ") is not supported by dnngraph's FP8 attention; use sdpa in "
                      "FP16/BF16 for dropout");
  return Status::ok();
}

Status check_floating_type(const Node& n, Role role, const Tensor& t) {
  if (!is_floating(t->data_type))
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(role, t),
                      " must have a floating data type but is ", data_type_name(t->data_type));
  return Status::ok();
}

// The node's scale factors (every DESCALE_* / SCALE_* port of its table entry, all required)
// and its AMAX_* outputs, read from the op table.
bool has_prefix(Role r, std::string_view prefix) { return role_name(r).starts_with(prefix); }

Status check_factors(const Node& n) {
  for (Role r : op_info(n.kind()).inputs)
    if (has_prefix(r, "DESCALE_") || has_prefix(r, "SCALE_")) DNNGRAPH_TRY(check_factor(n, r));
  return Status::ok();
}

Status infer_amaxes(const Node& n, const InferContext& ctx) {
  for (Role r : op_info(n.kind()).outputs)
    if (has_prefix(r, "AMAX_")) DNNGRAPH_TRY(infer_amax(n, r, ctx));
  return Status::ok();
}

}  // namespace

Status infer_sdpa_fp8(Node& n, const InferContext& ctx) {
  const auto& a = n.as<SdpaFp8Attrs>();
  DNNGRAPH_ASSIGN_OR_RETURN(const SdpaFwdPorts ports, sdpa_forward_ports(n));
  const auto& [q, k, v, o] = ports;
  DNNGRAPH_TRY(check_no_dropout(n, a));
  DNNGRAPH_TRY(check_sdpa_common(n, a));
  for (auto [role, t] : {std::pair<Role, const Tensor&>{Role::Q, q}, {Role::K, k}, {Role::V, v}})
    DNNGRAPH_TRY(check_fp8(n, role, t));
  DNNGRAPH_TRY(check_factors(n));
  const int64_t b = q->dim[0], hq = q->dim[1], sq = q->dim[2], dv = v->dim[3];
  DNNGRAPH_TRY(infer_output(n, Role::O, o, {b, hq, sq, dv}, q, ctx, q->data_type));
  DNNGRAPH_TRY(check_floating_type(n, Role::O, o));
  DNNGRAPH_TRY(infer_sdpa_stats(n, a.is_inference, ctx));
  return infer_amaxes(n, ctx);
}

Status infer_sdpa_fp8_backward(Node& n, const InferContext& ctx) {
  const auto& a = n.as<SdpaFp8BwdAttrs>();
  DNNGRAPH_ASSIGN_OR_RETURN(const SdpaBwdPorts p, sdpa_backward_ports(n));
  DNNGRAPH_TRY(check_no_dropout(n, a));
  DNNGRAPH_TRY(check_sdpa_common(n, a));
  for (auto [role, t] : {std::pair<Role, const Tensor&>{Role::Q, p.q},
                         {Role::K, p.k},
                         {Role::V, p.v},
                         {Role::DO, p.d_o}})
    DNNGRAPH_TRY(check_fp8(n, role, t));
  DNNGRAPH_TRY(check_floating_type(n, Role::O, p.o));
  DNNGRAPH_TRY(check_factors(n));
  DNNGRAPH_TRY(check_sdpa_backward_dims(n, p));
  if (p.stats->data_type != DataType::Float)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(Role::STATS, p.stats),
                      " must be FLOAT (the forward's log-sum-exp) but is ",
                      data_type_name(p.stats->data_type));
  DNNGRAPH_TRY(infer_sdpa_gradients(n, p, ctx));
  for (auto [role, t] :
       {std::pair<Role, const Tensor&>{Role::DQ, p.dq}, {Role::DK, p.dk}, {Role::DV, p.dv}})
    DNNGRAPH_TRY(check_floating_type(n, role, t));
  return infer_amaxes(n, ctx);
}

}  // namespace dnngraph::ir
