// Graph::sdpa_fp8 and Graph::sdpa_fp8_backward: bind the ports of the FP8 attention family.
// Every AMAX output is made (virtual until marked as an output), as the cuDNN frontend does.
#include "dnngraph/ir/graph.hpp"
#include "ir/builder_ports.hpp"

namespace dnngraph::ir {
namespace {

void bind_all(std::vector<Port>& ports, std::initializer_list<std::pair<Role, const Tensor*>> l) {
  for (const auto& [role, t] : l)
    if (*t) ports.push_back({role, *t});
}

// Whatever else the caller gave is bound too, so that validate() names what the family
// refuses (bias, dropout) instead of it being dropped silently.
void bind_extra(std::vector<Port>& in, const SdpaInputs& e) {
  bind_all(in, {{Role::ATTN_SCALE, &e.attn_scale},
                {Role::BIAS, &e.bias},
                {Role::SEQ_LEN_Q, &e.seq_len_q},
                {Role::SEQ_LEN_KV, &e.seq_len_kv},
                {Role::SEED, &e.seed},
                {Role::OFFSET, &e.offset},
                {Role::DROPOUT_MASK, &e.dropout_mask},
                {Role::DROPOUT_SCALE, &e.dropout_scale}});
}

}  // namespace

std::array<Tensor, 4> Graph::sdpa_fp8(Tensor q, Tensor k, Tensor v, const SdpaFp8Scales& sc,
                                      SdpaFp8Attrs attrs, SdpaInputs extra, OpOptions o) {
  if (extra.seq_len_q || extra.seq_len_kv) attrs.padding_mask = true;
  const bool inference = attrs.is_inference;
  Node& n = push(std::move(attrs), o, "sdpa_fp8", {{Role::Q, q}, {Role::K, k}, {Role::V, v}});
  bind_all(n.inputs, {{Role::DESCALE_Q, &sc.descale_q},
                      {Role::DESCALE_K, &sc.descale_k},
                      {Role::DESCALE_V, &sc.descale_v},
                      {Role::DESCALE_S, &sc.descale_s},
                      {Role::SCALE_S, &sc.scale_s},
                      {Role::SCALE_O, &sc.scale_o}});
  bind_extra(n.inputs, extra);
  std::array<Tensor, 4> out{add_output(n, Role::O), nullptr, nullptr, nullptr};
  if (!inference) out[1] = add_output(n, Role::STATS);
  out[2] = add_output(n, Role::AMAX_S);
  out[3] = add_output(n, Role::AMAX_O);
  // Not ports of sdpa_fp8: bound anyway, so that validate() names the mistake.
  if (extra.rng_dump) n.outputs.push_back({Role::RNG_DUMP, extra.rng_dump});
  if (extra.score_max) n.outputs.push_back({Role::SCORE_MAX, extra.score_max});
  if (extra.score_sum_exp) n.outputs.push_back({Role::SCORE_SUM_EXP, extra.score_sum_exp});
  return out;
}

std::array<Tensor, 7> Graph::sdpa_fp8_backward(Tensor q, Tensor k, Tensor v, Tensor o, Tensor d_o,
                                               Tensor stats, const SdpaFp8Scales& sc,
                                               SdpaFp8BwdAttrs attrs, SdpaInputs extra,
                                               OpOptions opts) {
  if (extra.seq_len_q || extra.seq_len_kv) attrs.padding_mask = true;
  Node& n = push(std::move(attrs), opts, "sdpa_fp8_backward", {});
  bind_leading_inputs(n, {q, k, v, o, d_o, stats});
  bind_all(n.inputs, {{Role::DESCALE_Q, &sc.descale_q},
                      {Role::DESCALE_K, &sc.descale_k},
                      {Role::DESCALE_V, &sc.descale_v},
                      {Role::DESCALE_O, &sc.descale_o},
                      {Role::DESCALE_DO, &sc.descale_do},
                      {Role::DESCALE_S, &sc.descale_s},
                      {Role::DESCALE_DP, &sc.descale_dp},
                      {Role::SCALE_S, &sc.scale_s},
                      {Role::SCALE_DQ, &sc.scale_dq},
                      {Role::SCALE_DK, &sc.scale_dk},
                      {Role::SCALE_DV, &sc.scale_dv},
                      {Role::SCALE_DP, &sc.scale_dp}});
  if (sc.scale_o) n.inputs.push_back({Role::SCALE_O, sc.scale_o});  // forward only: refused
  bind_extra(n.inputs, extra);
  std::array<Tensor, 7> out;
  size_t i = 0;
  for (Role r :
       {Role::DQ, Role::DK, Role::DV, Role::AMAX_DQ, Role::AMAX_DK, Role::AMAX_DV, Role::AMAX_DP})
    out[i++] = add_output(n, r);
  if (extra.dbias) n.outputs.push_back({Role::DBIAS, extra.dbias});  // refused by validate()
  return out;
}

}  // namespace dnngraph::ir
