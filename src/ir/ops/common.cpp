#include "ir/ops/common.hpp"

#include <algorithm>

namespace dnngraph::ir {

std::string op_label(const Node& n) {
  return detail::cat(op_kind_name(n.kind()), " '", n.name, "'");
}

std::string port_label(Role role, const Tensor& t) {
  return detail::cat(role, " '", t ? t->name : std::string("<null>"), "'");
}

std::string dims_str(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

namespace {
Status check_role_list(const Node& n, const std::vector<Port>& ports, std::span<const Role> known,
                       const char* what) {
  for (size_t i = 0; i < ports.size(); ++i) {
    const Role role = ports[i].role;
    if (std::find(known.begin(), known.end(), role) == known.end()) {
      std::string list;
      for (auto k : known) list += (list.empty() ? "" : ", ") + std::string(role_name(k));
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": unknown ", what, " port '", role,
                        "' (", port_label(role, ports[i].tensor), "); expected one of ", list);
    }
    for (size_t j = 0; j < i; ++j)
      if (ports[j].role == role)
        return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", what, " port '", role,
                          "' is bound twice ('", ports[j].tensor->name, "' and '",
                          ports[i].tensor->name, "')");
  }
  return Status::ok();
}
}  // namespace

Status check_roles(const Node& n, std::span<const Role> inputs, std::span<const Role> outputs) {
  DNNGRAPH_TRY(check_role_list(n, n.inputs, inputs, "input"));
  return check_role_list(n, n.outputs, outputs, "output");
}

Result<Tensor> required_input(const Node& n, Role role) {
  if (Tensor t = n.input(role)) return t;
  return make_error(ErrorCode::InvalidGraph, op_label(n), ": missing input ", role);
}

Result<Tensor> required_output(const Node& n, Role role) {
  if (Tensor t = n.output(role)) return t;
  return make_error(ErrorCode::InvalidGraph, op_label(n), ": missing output ", role);
}

Status check_rank(const Node& n, Role role, const Tensor& t, size_t lo, size_t hi) {
  const size_t r = t->dim.size();
  if (r >= lo && r <= hi) return Status::ok();
  std::string expected = lo == hi         ? std::to_string(lo)
                         : hi == SIZE_MAX ? std::to_string(lo) + " or more"
                                          : std::to_string(lo) + " to " + std::to_string(hi);
  return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(role, t),
                    " must have rank ", expected, " but has rank ", r, " (dims ", dims_str(t->dim),
                    ")");
}

Status expect_dims(const Node& n, Role role, const Tensor& t, const std::vector<int64_t>& expected,
                   std::string_view why) {
  if (t->dim == expected) return Status::ok();
  return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(role, t), " has dims ",
                    dims_str(t->dim), " but expected ", dims_str(expected), " (", why, ")");
}

bool broadcastable(const std::vector<int64_t>& from, const std::vector<int64_t>& to) {
  if (from.size() != to.size()) return false;
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != to[i] && from[i] != 1) return false;
  return true;
}

Status expect_broadcastable(const Node& n, Role role, const Tensor& t,
                            const std::vector<int64_t>& target, std::string_view why) {
  if (broadcastable(t->dim, target)) return Status::ok();
  return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(role, t), " has dims ",
                    dims_str(t->dim), " which do not broadcast to ", dims_str(target), " (", why,
                    "; each dim must match or be 1)");
}

Status check_scalar(const Node& n, Role role, const Tensor& t, bool pass_by_value) {
  if (pass_by_value && !t->is_pass_by_value)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(role, t),
                      " must be a pass-by-value scalar (make it with Graph::scalar or "
                      "set_is_pass_by_value) but is a device tensor with dims ",
                      dims_str(t->dim));
  if (t->volume() != 1)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(role, t),
                      " must hold one element but has dims ", dims_str(t->dim));
  return Status::ok();
}

std::vector<int64_t> order_like(const Tensor& like, size_t rank) {
  if (like && like->dim.size() == rank && like->stride.size() == rank)
    return stride_order(like->stride);
  std::vector<int64_t> order(rank);
  for (size_t i = 0; i < rank; ++i) order[i] = static_cast<int64_t>(i);
  return order;
}

Status set_output_dims(const Node& n, Role role, const Tensor& out,
                       const std::vector<int64_t>& dims) {
  if (out->dim.empty()) {
    out->dim = dims;
    return Status::ok();
  }
  if (out->dim == dims) return Status::ok();
  return make_error(ErrorCode::InvalidGraph, op_label(n), ": output ", port_label(role, out),
                    " was set to dims ", dims_str(out->dim), " but the op produces ",
                    dims_str(dims));
}

Status infer_output(const Node& n, Role role, const Tensor& out, const std::vector<int64_t>& dims,
                    const Tensor& layout_like, const InferContext& ctx, DataType fallback,
                    DataType forced) {
  DNNGRAPH_TRY(set_output_dims(n, role, out, dims));
  if (out->stride.empty())
    out->stride = packed_strides(out->dim, order_like(layout_like, dims.size()));
  if (out->data_type == DataType::NotSet) {
    DataType t = forced;
    if (t == DataType::NotSet) {
      t = out->is_virtual ? ctx.intermediate : ctx.io;
      out->data_type_inferred = out->is_virtual;
    }
    if (t == DataType::NotSet) t = fallback;
    out->data_type = t;
  }
  return Status::ok();
}

Status check_keeps_data_type(const Node& n, std::string_view op, Role role, const Tensor& x,
                             const Tensor& y) {
  if (y->data_type == DataType::NotSet || x->data_type == DataType::NotSet ||
      y->data_type == x->data_type)
    return Status::ok();
  return make_error(ErrorCode::InvalidGraph, op_label(n), ": output ", port_label(Role::Y, y),
                    " has data type ", data_type_name(y->data_type), " but ", op, " keeps ",
                    port_label(role, x), "'s ", data_type_name(x->data_type),
                    "; leave Y's data type unset or make it equal");
}

}  // namespace dnngraph::ir
