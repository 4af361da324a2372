// Shape rules of reshape (the cuDNN frontend's): Y's dims are the caller's and hold as many
// elements as X's. VIEW_ONLY reinterprets X's memory, so X and Y must both be packed; LOGICAL
// copies in row-major order. Y's strides default to packed channels-last from rank 2 up
// (row-major below), as the frontend fills them; Y keeps X's data type.
#include "dnngraph/ir/graph.hpp"
#include "ir/ops/common.hpp"

namespace dnngraph::ir {

Tensor Graph::reshape(Tensor x, ReshapeAttrs a, OpOptions o) {
  return add_output(push(std::move(a), o, "reshape", {{Role::X, x}}), Role::Y);
}

namespace {

// The frontend's default order for a reshape output: dim 0 outermost, dim 1 innermost.
std::vector<int64_t> channels_last_order(size_t rank) {
  std::vector<int64_t> order;
  if (rank < 2) {
    for (size_t i = 0; i < rank; ++i) order.push_back(static_cast<int64_t>(i));
    return order;
  }
  order.push_back(0);
  for (size_t i = 2; i < rank; ++i) order.push_back(static_cast<int64_t>(i));
  order.push_back(1);
  return order;
}

}  // namespace

Status infer_reshape(Node& n, const InferContext& ctx) {
  const auto& a = n.as<ReshapeAttrs>();
  DNNGRAPH_PORT(x, required_input(n, Role::X));
  DNNGRAPH_PORT(y, required_output(n, Role::Y));
  const auto xv = checked_volume(x->dim);
  if (y->dim.empty())
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": output ", port_label(Role::Y, y),
                      " has no dims; reshape takes its target shape from Y: call set_dim on the "
                      "tensor reshape returned (",
                      xv.value_or(-1), " elements, as ", port_label(Role::X, x), " has)");
  const auto yv = checked_volume(y->dim);
  if (!xv || !yv || *xv != *yv)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": output ", port_label(Role::Y, y),
                      " has dims ", dims_str(y->dim), " but ", port_label(Role::X, x), " has dims ",
                      dims_str(x->dim), "; a reshape keeps the number of elements");
  DNNGRAPH_TRY(check_keeps_data_type(n, "reshape", Role::X, x, y));
  if (y->stride.empty()) y->stride = packed_strides(y->dim, channels_last_order(y->dim.size()));
  if (!a.logical) {
    if (x->stride.size() == x->dim.size() && !x->is_packed())
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(Role::X, x),
                        " (dims ", dims_str(x->dim), ", strides ", dims_str(x->stride),
                        ") is not packed; a VIEW_ONLY reshape reinterprets X's memory, so it "
                        "needs a dense X: pass packed strides, or use reshape_mode LOGICAL");
    if (y->stride.size() == y->dim.size() && !y->is_packed())
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": output ", port_label(Role::Y, y),
                        " (dims ", dims_str(y->dim), ", strides ", dims_str(y->stride),
                        ") is not packed; a VIEW_ONLY reshape describes X's memory with Y's "
                        "dims, so Y's strides must be dense");
  }
  return infer_output(n, Role::Y, y, y->dim, x, ctx, x->data_type, x->data_type);
}

}  // namespace dnngraph::ir
