// Shape rules of concatenate (the cuDNN frontend's): inputs IN_0, IN_1, ... without gaps, of
// one rank and data type, with equal dims but along `axis`; Y's dim along the axis is their
// sum. Y keeps the inputs' data type; its strides default to packed in IN_0's dim order.
// The input roles, in order, are the op table's (op_info(...).inputs).
#include "dnngraph/ir/graph.hpp"
#include "ir/ops/common.hpp"

namespace dnngraph::ir {

Tensor Graph::concatenate(const std::vector<Tensor>& inputs, ConcatAttrs a, OpOptions o) {
  const auto kIn = op_info(op_kind_of<ConcatAttrs>()).inputs;
  // More than kConcatMaxInputs inputs: the extra ones are bound as X, a role concatenate does
  // not know, so validate() refuses the node and names it.
  Node& n = push(std::move(a), o, "concatenate", {});
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i]) n.inputs.push_back({i < kIn.size() ? kIn[i] : Role::X, inputs[i]});
  return add_output(n, Role::Y);
}

Status infer_concatenate(Node& n, const InferContext& ctx) {
  const auto& a = n.as<ConcatAttrs>();
  const auto kIn = op_info(n.kind()).inputs;
  std::vector<Tensor> in;
  for (Role r : kIn) {
    Tensor t = n.input(r);
    if (!t) break;
    in.push_back(t);
  }
  if (in.empty())
    return make_error(ErrorCode::InvalidGraph, op_label(n),
                      ": no inputs; concatenate joins IN_0, IN_1, ... (1 to ", kConcatMaxInputs,
                      " tensors)");
  if (n.inputs.size() != in.size())
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", n.inputs.size(),
                      " inputs where IN_0 .. IN_", in.size() - 1,
                      " are bound without a gap; concatenate takes 1 to ", kConcatMaxInputs,
                      " tensors bound as IN_0, IN_1, ... (join more in two steps)");
  DNNGRAPH_PORT(y, required_output(n, Role::Y));
  const Tensor& x0 = in[0];
  const int64_t rank = static_cast<int64_t>(x0->dim.size());
  if (a.axis < 0 || a.axis >= rank)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": axis ", a.axis, " is not a dim of ",
                      port_label(Role::IN_0, x0), " (dims ", dims_str(x0->dim), "); expected 0 to ",
                      rank - 1);
  if (a.in_place_index &&
      (*a.in_place_index < 0 || *a.in_place_index >= static_cast<int64_t>(in.size())))
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": in_place_index ", *a.in_place_index,
                      " names no input; expected 0 to ", in.size() - 1);
  const size_t axis = static_cast<size_t>(a.axis);
  std::vector<int64_t> dims = x0->dim;
  dims[axis] = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const Tensor& t = in[i];
    const Role r = kIn[i];
    bool same = t->dim.size() == x0->dim.size();
    for (size_t d = 0; same && d < t->dim.size(); ++d) same = d == axis || t->dim[d] == x0->dim[d];
    if (!same)
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(r, t), " has dims ",
                        dims_str(t->dim), " but ", port_label(Role::IN_0, x0), " has ",
                        dims_str(x0->dim), "; inputs must agree on every dim but axis ", a.axis);
    if (t->data_type != x0->data_type)
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(r, t),
                        " has data type ", data_type_name(t->data_type), " but ",
                        port_label(Role::IN_0, x0), " has ", data_type_name(x0->data_type),
                        "; concatenate joins tensors of one data type");
    if (t->dim[axis] > INT64_MAX - dims[axis])
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": the sum of the inputs' dim ",
                        a.axis, " overflows int64");
    dims[axis] += t->dim[axis];
  }
  DNNGRAPH_TRY(check_keeps_data_type(n, "concatenate", Role::IN_0, x0, y));
  return infer_output(n, Role::Y, y, dims, x0, ctx, x0->data_type, x0->data_type);
}

}  // namespace dnngraph::ir
