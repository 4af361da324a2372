// Shape rules of transpose (the cuDNN frontend's): Y's dim i is X's dim permutation[i];
// permutation holds each of 0..rank-1 once. Y's strides default to X's strides permuted the
// same way (so a packed X and Y have the same memory), and Y keeps X's data type.
#include <string>

#include "ir/ops/common.hpp"

namespace dnngraph::ir {

Status infer_transpose(Node& n, const InferContext& ctx) {
  const auto& a = n.as<TransposeAttrs>();
  DNNGRAPH_PORT(x, required_input(n, Role::X));
  DNNGRAPH_PORT(y, required_output(n, Role::Y));
  const size_t rank = x->dim.size();
  const auto& p = a.permutation;
  std::vector<bool> seen(rank, false);
  bool valid = p.size() == rank;
  for (size_t i = 0; valid && i < p.size(); ++i) {
    valid = p[i] >= 0 && static_cast<size_t>(p[i]) < rank && !seen[static_cast<size_t>(p[i])];
    if (valid) seen[static_cast<size_t>(p[i])] = true;
  }
  if (!valid)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": permutation ", dims_str(p),
                      " is not a permutation of the ", rank, " dims of ", port_label(Role::X, x),
                      " (dims ", dims_str(x->dim), "); expected each of 0..", rank - 1, " once");
  DNNGRAPH_TRY(check_keeps_data_type(n, "transpose", Role::X, x, y));
  std::vector<int64_t> dims(rank), strides(rank);
  for (size_t i = 0; i < rank; ++i) {
    dims[i] = x->dim[static_cast<size_t>(p[i])];
    if (x->stride.size() == rank) strides[i] = x->stride[static_cast<size_t>(p[i])];
  }
  // Packed in X's memory order carried through the permutation (= X's strides permuted when
  // X is packed), whatever X's own gaps or broadcast strides.
  if (y->stride.empty() && x->stride.size() == rank)
    y->stride = packed_strides(dims, stride_order(strides));
  return infer_output(n, Role::Y, y, dims, x, ctx, x->data_type, x->data_type);
}

}  // namespace dnngraph::ir
