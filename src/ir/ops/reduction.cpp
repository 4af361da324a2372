// Shape rules of reductions: Y has X's rank; each Y dim equals X's (kept) or is 1 (reduced).
// Y's dims default to all ones (reduce everything).
#include "ir/ops/common.hpp"

namespace dnngraph::ir {

Status infer_reduction(Node& n, const InferContext& ctx) {
  DNNGRAPH_PORT(x, required_input(n, Role::X));
  DNNGRAPH_PORT(y, required_output(n, Role::Y));
  const int mode = static_cast<int>(n.as<ReductionAttrs>().mode);
  if (mode < 0 || mode > static_cast<int>(ReductionMode::Norm2))
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": mode ", mode,
                      " is not a reduction mode (expected 0 to ",
                      static_cast<int>(ReductionMode::Norm2), ")");
  std::vector<int64_t> dims(x->dim.size(), 1);
  if (!y->dim.empty()) {
    if (y->dim.size() != x->dim.size())
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": output ", port_label(Role::Y, y),
                        " has rank ", y->dim.size(), " (dims ", dims_str(y->dim), ") but ",
                        port_label(Role::X, x), " has rank ", x->dim.size(), " (dims ",
                        dims_str(x->dim), ")");
    for (size_t d = 0; d < dims.size(); ++d)
      if (y->dim[d] != x->dim[d] && y->dim[d] != 1)
        return make_error(ErrorCode::InvalidGraph, op_label(n), ": output ", port_label(Role::Y, y),
                          " dim ", d, " is ", y->dim[d], " but must be ", x->dim[d],
                          " (kept, as in ", port_label(Role::X, x), ") or 1 (reduced)");
    dims = y->dim;
  }
  return infer_output(n, Role::Y, y, dims, x, ctx, x->data_type);
}

}  // namespace dnngraph::ir
