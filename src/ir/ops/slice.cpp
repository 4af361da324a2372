// Shape rules of slice: Y = X[start_d : end_d : stride_d] per dim d. One start and one end per
// dim of X (stride: none, or one per dim); 0 <= start <= end <= X's dim; stride >= 1.
// Y's dim d is ceil((end - start) / stride), at least 1; Y is packed in X's dim order and
// keeps X's data type.
#include "dnngraph/ir/graph.hpp"
#include "ir/ops/common.hpp"

namespace dnngraph::ir {

Tensor Graph::slice(Tensor x, SliceAttrs a, OpOptions o) {
  return add_output(push(std::move(a), o, "slice", {{Role::X, x}}), Role::Y);
}

std::optional<StridedWindow> SliceAttrs::window(std::span<const int64_t> x_stride) const {
  const size_t rank = x_stride.size();
  if (start.size() != rank || (!stride.empty() && stride.size() != rank)) return std::nullopt;
  StridedWindow w;
  w.stride.resize(rank);
  for (size_t d = 0; d < rank; ++d) {
    // validate() bounds every extent in int64 and requires steps >= 1, so on a validated
    // graph these products stay inside X's own span.
    w.stride[d] = x_stride[d] * (stride.empty() ? 1 : stride[d]);
    w.offset += start[d] * x_stride[d];
  }
  return w;
}

Status infer_slice(Node& n, const InferContext& ctx) {
  auto& a = n.as<SliceAttrs>();
  DNNGRAPH_PORT(x, required_input(n, Role::X));
  DNNGRAPH_PORT(y, required_output(n, Role::Y));
  const size_t rank = x->dim.size();
  if (a.start.size() != rank || a.end.size() != rank)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": start ", dims_str(a.start),
                      " and end ", dims_str(a.end), " must have one entry per dim of ",
                      port_label(Role::X, x), " (dims ", dims_str(x->dim), ")");
  if (!a.stride.empty() && a.stride.size() != rank)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": stride ", dims_str(a.stride),
                      " must be empty (all 1) or have one entry per dim of ",
                      port_label(Role::X, x), " (dims ", dims_str(x->dim), ")");
  std::vector<int64_t> dims(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t start = a.start[d], end = a.end[d];
    const int64_t step = a.stride.empty() ? 1 : a.stride[d];
    if (step < 1)
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": stride of dim ", d, " is ", step,
                        "; strides must be 1 or more");
    if (start < 0 || start >= end || end > x->dim[d])
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": dim ", d, " slice [", start, ":",
                        end, "] must satisfy 0 <= start < end <= ", x->dim[d], " (dim ", d, " of ",
                        port_label(Role::X, x), "); an empty slice is not a tensor");
    dims[d] = (end - start + step - 1) / step;
  }
  DNNGRAPH_TRY(check_keeps_data_type(n, "slice", Role::X, x, y));
  return infer_output(n, Role::Y, y, dims, x, ctx, x->data_type, x->data_type);
}

}  // namespace dnngraph::ir
