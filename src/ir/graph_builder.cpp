// Builder methods of ir::Graph. They only wire tensors to ports; inference and checks run in
// validate() (src/ir/validate.cpp and src/ir/ops/*.cpp). The layout ops (slice, reshape,
// concatenate) define their builder method next to their rule, in src/ir/ops/<op>.cpp.
//
// The ports each family accepts are listed in the op table (include/dnngraph/ir/ops.hpp).
#include <algorithm>

#include "dnngraph/ir/graph.hpp"
#include "ir/builder_ports.hpp"

namespace dnngraph::ir {

void bind_leading_inputs(Node& n, std::initializer_list<Tensor> tensors) {
  const auto roles = op_info(n.kind()).inputs;
  size_t i = 0;
  for (const Tensor& t : tensors) {
    if (t && i < roles.size()) n.inputs.push_back({roles[i], t});
    ++i;
  }
}

Tensor Node::input(Role role) const {
  for (const auto& p : inputs)
    if (p.role == role) return p.tensor;
  return nullptr;
}
Tensor Node::output(Role role) const {
  for (const auto& p : outputs)
    if (p.role == role) return p.tensor;
  return nullptr;
}

Tensor Graph::tensor(const TensorAttrs& attrs) {
  auto t = std::make_shared<TensorAttrs>(attrs);
  if (t->name.empty()) t->name = "tensor" + std::to_string(tensors_.size());
  tensors_.push_back(t);
  validated_ = false;
  return t;
}

Tensor Graph::scalar(Scalar value, std::string name) {
  TensorAttrs a;
  a.set_name(name.empty() ? "scalar" + std::to_string(tensors_.size()) : std::move(name));
  a.set_value(value);
  return tensor(a);
}

std::string Graph::next_name(std::string_view op) {
  return std::string(op) + std::to_string(op_counter_++);
}

Tensor Graph::make_output(const std::string& node_name, Role role) {
  auto t = std::make_shared<TensorAttrs>();
  t->name = node_name + "::" + std::string(role_name(role));
  t->is_virtual = true;
  tensors_.push_back(t);
  return t;
}

Node& Graph::push(OpAttrs attrs, OpOptions& o, std::string_view op,
                  std::initializer_list<Port> inputs) {
  Node n;
  n.name = o.name.empty() ? next_name(op) : o.name;
  n.compute_data_type = o.compute_data_type;
  n.attrs = std::move(attrs);
  for (const Port& p : inputs)
    if (p.tensor) n.inputs.push_back(p);
  nodes_.push_back(std::move(n));
  validated_ = false;
  return nodes_.back();
}

Tensor Graph::add_output(Node& n, Role role) {
  Tensor t = make_output(n.name, role);
  n.outputs.push_back({role, t});
  return t;
}

void Graph::add_node(Node node) {
  auto known = [&](const Tensor& t) {
    return std::find(tensors_.begin(), tensors_.end(), t) != tensors_.end();
  };
  for (auto* ports : {&node.inputs, &node.outputs})
    for (auto& p : *ports)
      if (p.tensor && !known(p.tensor)) tensors_.push_back(p.tensor);
  nodes_.push_back(std::move(node));
  validated_ = false;
}

Tensor Graph::conv_fprop(Tensor x, Tensor w, ConvFpropAttrs a, OpOptions o) {
  return add_output(push(std::move(a), o, "conv_fprop", {{Role::X, x}, {Role::W, w}}), Role::Y);
}

Tensor Graph::conv_dgrad(Tensor dy, Tensor w, ConvDgradAttrs a, OpOptions o) {
  return add_output(push(std::move(a), o, "conv_dgrad", {{Role::DY, dy}, {Role::W, w}}), Role::DX);
}

Tensor Graph::conv_wgrad(Tensor dy, Tensor x, ConvWgradAttrs a, OpOptions o) {
  return add_output(push(std::move(a), o, "conv_wgrad", {{Role::DY, dy}, {Role::X, x}}), Role::DW);
}

Tensor Graph::matmul(Tensor a, Tensor b, MatmulAttrs attrs, OpOptions o) {
  return add_output(push(std::move(attrs), o, "matmul", {{Role::A, a}, {Role::B, b}}), Role::C);
}

Tensor Graph::pointwise(Tensor in0, PointwiseAttrs a, OpOptions o) {
  return pointwise(std::move(in0), nullptr, nullptr, std::move(a), std::move(o));
}
Tensor Graph::pointwise(Tensor in0, Tensor in1, PointwiseAttrs a, OpOptions o) {
  return pointwise(std::move(in0), std::move(in1), nullptr, std::move(a), std::move(o));
}
Tensor Graph::pointwise(Tensor in0, Tensor in1, Tensor in2, PointwiseAttrs a, OpOptions o) {
  std::string op = "pw_" + std::string(pointwise_mode_name(a.mode));
  std::transform(op.begin(), op.end(), op.begin(), [](unsigned char c) { return std::tolower(c); });
  Node& n = push(std::move(a), o, op, {{Role::IN_0, in0}, {Role::IN_1, in1}, {Role::IN_2, in2}});
  return add_output(n, Role::OUT_0);
}

Tensor Graph::reduction(Tensor x, ReductionAttrs a, OpOptions o) {
  return add_output(push(std::move(a), o, "reduction", {{Role::X, x}}), Role::Y);
}

Tensor Graph::transpose(Tensor x, TransposeAttrs a, OpOptions o) {
  return add_output(push(std::move(a), o, "transpose", {{Role::X, x}}), Role::Y);
}

std::array<Tensor, 2> Graph::block_scale_quantize(Tensor x, BlockScaleQuantizeAttrs a,
                                                  OpOptions o) {
  Node& n = push(std::move(a), o, "block_scale_quantize", {{Role::X, x}});
  Tensor y = add_output(n, Role::Y);
  return {y, add_output(n, Role::SCALE)};
}

Tensor Graph::block_scale_dequantize(Tensor x, Tensor scale, BlockScaleDequantizeAttrs a,
                                     OpOptions o) {
  return add_output(
      push(std::move(a), o, "block_scale_dequantize", {{Role::X, x}, {Role::SCALE, scale}}),
      Role::Y);
}

Tensor Graph::moe_grouped_matmul(Tensor token, Tensor weight, Tensor first_token_offset,
                                 MoeGroupedMatmulAttrs a, OpOptions o) {
  return add_output(push(std::move(a), o, "moe_grouped_matmul",
                         {{Role::TOKEN, token},
                          {Role::WEIGHT, weight},
                          {Role::FIRST_TOKEN_OFFSET, first_token_offset}}),
                    Role::OUTPUT);
}

std::array<Tensor, 2> Graph::genstats(Tensor x, OpOptions o) {
  Node& n = push(GenstatsAttrs{}, o, "genstats", {{Role::X, x}});
  Tensor sum = add_output(n, Role::SUM);
  return {sum, add_output(n, Role::SQ_SUM)};
}

std::array<Tensor, 3> Graph::layernorm(Tensor x, Tensor scale, Tensor bias, Tensor epsilon,
                                       NormForwardPhase phase, OpOptions o) {
  return norm_with_mean(NormKind::LayerNorm, x, scale, bias, epsilon, phase, o, "layernorm");
}
std::array<Tensor, 3> Graph::instancenorm(Tensor x, Tensor scale, Tensor bias, Tensor epsilon,
                                          NormForwardPhase phase, OpOptions o) {
  return norm_with_mean(NormKind::InstanceNorm, x, scale, bias, epsilon, phase, o, "instancenorm");
}
std::array<Tensor, 3> Graph::adalayernorm(Tensor x, Tensor scale, Tensor bias, Tensor epsilon,
                                          NormForwardPhase phase, OpOptions o) {
  return norm_with_mean(NormKind::AdaLayerNorm, x, scale, bias, epsilon, phase, o, "adalayernorm");
}
std::array<Tensor, 3> Graph::norm_with_mean(NormKind kind, Tensor x, Tensor scale, Tensor bias,
                                            Tensor epsilon, NormForwardPhase phase, OpOptions o,
                                            const char* prefix) {
  Node& n =
      push(NormFwdAttrs{kind, phase}, o, prefix,
           {{Role::X, x}, {Role::SCALE, scale}, {Role::BIAS, bias}, {Role::EPSILON, epsilon}});
  std::array<Tensor, 3> out{add_output(n, Role::Y), nullptr, nullptr};
  if (phase == NormForwardPhase::Training) {
    out[1] = add_output(n, Role::MEAN);
    out[2] = add_output(n, Role::INV_VARIANCE);
  }
  return out;
}

std::array<Tensor, 2> Graph::rmsnorm(Tensor x, Tensor scale, Tensor bias, Tensor epsilon,
                                     NormForwardPhase phase, OpOptions o) {
  Node& n =
      push(NormFwdAttrs{NormKind::RmsNorm, phase}, o, "rmsnorm",
           {{Role::X, x}, {Role::SCALE, scale}, {Role::BIAS, bias}, {Role::EPSILON, epsilon}});
  std::array<Tensor, 2> out{add_output(n, Role::Y), nullptr};
  if (phase == NormForwardPhase::Training) out[1] = add_output(n, Role::INV_VARIANCE);
  return out;
}

std::array<Tensor, 5> Graph::batchnorm(Tensor x, Tensor scale, Tensor bias,
                                       Tensor prev_running_mean, Tensor prev_running_var,
                                       Tensor epsilon, Tensor momentum, OpOptions o) {
  Node& n = push(NormFwdAttrs{NormKind::BatchNorm, NormForwardPhase::Training}, o, "batchnorm",
                 {{Role::X, x},
                  {Role::SCALE, scale},
                  {Role::BIAS, bias},
                  {Role::EPSILON, epsilon},
                  {Role::MOMENTUM, momentum},
                  {Role::PREV_RUNNING_MEAN, prev_running_mean},
                  {Role::PREV_RUNNING_VAR, prev_running_var}});
  std::array<Tensor, 5> out{add_output(n, Role::Y), nullptr, nullptr, nullptr, nullptr};
  out[1] = add_output(n, Role::MEAN);
  out[2] = add_output(n, Role::INV_VARIANCE);
  if (prev_running_mean && prev_running_var) {
    out[3] = add_output(n, Role::NEXT_RUNNING_MEAN);
    out[4] = add_output(n, Role::NEXT_RUNNING_VAR);
  }
  return out;
}

Tensor Graph::batchnorm_inference(Tensor x, Tensor mean, Tensor inv_variance, Tensor scale,
                                  Tensor bias, OpOptions o) {
  Node& n =
      push(NormFwdAttrs{NormKind::BatchNorm, NormForwardPhase::Inference}, o, "batchnorm_inference",
           {{Role::X, x},
            {Role::MEAN, mean},
            {Role::INV_VARIANCE, inv_variance},
            {Role::SCALE, scale},
            {Role::BIAS, bias}});
  return add_output(n, Role::Y);
}

std::array<Tensor, 3> Graph::layernorm_backward(Tensor dy, Tensor x, Tensor scale, Tensor mean,
                                                Tensor inv_variance, OpOptions o) {
  return norm_backward_with_mean(NormKind::LayerNorm, dy, x, scale, mean, inv_variance, o,
                                 "layernorm_backward");
}
std::array<Tensor, 3> Graph::instancenorm_backward(Tensor dy, Tensor x, Tensor scale, Tensor mean,
                                                   Tensor inv_variance, OpOptions o) {
  return norm_backward_with_mean(NormKind::InstanceNorm, dy, x, scale, mean, inv_variance, o,
                                 "instancenorm_backward");
}
std::array<Tensor, 3> Graph::adalayernorm_backward(Tensor dy, Tensor x, Tensor scale, Tensor mean,
                                                   Tensor inv_variance, OpOptions o) {
  return norm_backward_with_mean(NormKind::AdaLayerNorm, dy, x, scale, mean, inv_variance, o,
                                 "adalayernorm_backward");
}
std::array<Tensor, 3> Graph::batchnorm_backward(Tensor dy, Tensor x, Tensor scale, Tensor mean,
                                                Tensor inv_variance, OpOptions o) {
  return norm_backward_with_mean(NormKind::BatchNorm, dy, x, scale, mean, inv_variance, o,
                                 "batchnorm_backward");
}
std::array<Tensor, 3> Graph::norm_backward_with_mean(NormKind kind, Tensor dy, Tensor x,
                                                     Tensor scale, Tensor mean, Tensor inv_variance,
                                                     OpOptions o, const char* prefix) {
  Node& n = push(NormBwdAttrs{kind}, o, prefix,
                 {{Role::DY, dy},
                  {Role::X, x},
                  {Role::SCALE, scale},
                  {Role::MEAN, mean},
                  {Role::INV_VARIANCE, inv_variance}});
  Tensor dx = add_output(n, Role::DX);
  Tensor dscale = add_output(n, Role::DSCALE);
  return {dx, dscale, add_output(n, Role::DBIAS)};
}

std::array<Tensor, 3> Graph::rmsnorm_backward(Tensor dy, Tensor x, Tensor scale,
                                              Tensor inv_variance, bool has_dbias, OpOptions o) {
  Node& n = push(
      NormBwdAttrs{NormKind::RmsNorm}, o, "rmsnorm_backward",
      {{Role::DY, dy}, {Role::X, x}, {Role::SCALE, scale}, {Role::INV_VARIANCE, inv_variance}});
  Tensor dx = add_output(n, Role::DX);
  Tensor dscale = add_output(n, Role::DSCALE);
  return {dx, dscale, has_dbias ? add_output(n, Role::DBIAS) : nullptr};
}

std::array<Tensor, 2> Graph::softmax(Tensor x, bool generate_stats, OpOptions o) {
  Node& n = push(SoftmaxAttrs{}, o, "softmax", {{Role::X, x}});
  Tensor y = add_output(n, Role::Y);
  return {y, generate_stats ? add_output(n, Role::STATS) : nullptr};
}

namespace {
// Not named `bind`: with <functional> in sight, ADL finds std::bind, a better match for a
// non-const tensor argument, and the port would silently stay unbound.
void bind_port(std::vector<Port>& ports, Role role, const Tensor& t) {
  if (t) ports.push_back({role, t});
}
void bind_sdpa_extra(std::vector<Port>& in, const SdpaInputs& e) {
  bind_port(in, Role::ATTN_SCALE, e.attn_scale);
  bind_port(in, Role::BIAS, e.bias);
  bind_port(in, Role::SEQ_LEN_Q, e.seq_len_q);
  bind_port(in, Role::SEQ_LEN_KV, e.seq_len_kv);
  bind_port(in, Role::SEED, e.seed);
  bind_port(in, Role::OFFSET, e.offset);
  bind_port(in, Role::DROPOUT_MASK, e.dropout_mask);
  bind_port(in, Role::DROPOUT_SCALE, e.dropout_scale);
  bind_port(in, Role::SINK_TOKEN, e.sink_token);
  bind_port(in, Role::PAGE_TABLE_K, e.page_table_k);  // refused by the backward's validate()
  bind_port(in, Role::PAGE_TABLE_V, e.page_table_v);
}
}  // namespace

std::array<Tensor, 2> Graph::sdpa(Tensor q, Tensor k, Tensor v, SdpaAttrs attrs, SdpaInputs extra,
                                  OpOptions o) {
  if (extra.seq_len_q || extra.seq_len_kv) attrs.padding_mask = true;
  const bool inference = attrs.is_inference;
  if (o.name.empty()) o.name = next_name("sdpa");
  std::vector<Subgraph> mods = build_score_mods(o.name, extra);
  Node& n = push(std::move(attrs), o, "sdpa", {{Role::Q, q}, {Role::K, k}, {Role::V, v}});
  bind_sdpa_extra(n.inputs, extra);
  attach_subgraphs(n, std::move(mods));
  std::array<Tensor, 2> out{add_output(n, Role::O), nullptr};
  if (!inference) out[1] = add_output(n, Role::STATS);
  bind_port(n.outputs, Role::RNG_DUMP, extra.rng_dump);
  // The forward has no DBIAS: bound anyway, so validate() names the mistake.
  bind_port(n.outputs, Role::DBIAS, extra.dbias);
  bind_port(n.outputs, Role::DSINK_TOKEN, extra.dsink_token);  // likewise
  bind_port(n.outputs, Role::SCORE_MAX, extra.score_max);
  bind_port(n.outputs, Role::SCORE_SUM_EXP, extra.score_sum_exp);
  return out;
}

std::array<Tensor, 4> Graph::sdpa_backward(Tensor q, Tensor k, Tensor v, Tensor o, Tensor d_o,
                                           Tensor stats, SdpaBwdAttrs attrs, SdpaInputs extra,
                                           OpOptions opts) {
  if (extra.seq_len_q || extra.seq_len_kv) attrs.padding_mask = true;
  const bool has_bias = static_cast<bool>(extra.bias);
  if (opts.name.empty()) opts.name = next_name("sdpa_backward");
  std::vector<Subgraph> mods = build_score_mods(opts.name, extra);
  Node& n = push(std::move(attrs), opts, "sdpa_backward", {});
  bind_leading_inputs(n, {q, k, v, o, d_o, stats});
  bind_sdpa_extra(n.inputs, extra);
  attach_subgraphs(n, std::move(mods));
  Tensor dq = add_output(n, Role::DQ);
  Tensor dk = add_output(n, Role::DK);
  std::array<Tensor, 4> out{dq, dk, add_output(n, Role::DV), nullptr};
  if (extra.dbias) {
    out[3] = extra.dbias;
    bind_port(n.outputs, Role::DBIAS, out[3]);
  } else if (has_bias && extra.dbias_output) {
    out[3] = add_output(n, Role::DBIAS);
  }
  bind_port(n.outputs, Role::RNG_DUMP, extra.rng_dump);  // refused by validate()
  bind_port(n.outputs, Role::DSINK_TOKEN, extra.dsink_token);
  bind_port(n.outputs, Role::SCORE_MAX, extra.score_max);  // refused by validate(), like rng_dump
  bind_port(n.outputs, Role::SCORE_SUM_EXP, extra.score_sum_exp);
  return out;
}

}  // namespace dnngraph::ir
