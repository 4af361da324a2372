// concatenate on the reference engine: each input's elements land in Y at its offset along the
// axis (the sum of the earlier inputs' dims there). Values are copied, so the result is exact;
// in_place_index changes nothing here (every input is copied).
#include "engines/reference/kernel.hpp"

namespace dnngraph::reference {

Status run_concatenate(KernelContext& ctx) {
  const size_t axis = static_cast<size_t>(ctx.node().as<ir::ConcatAttrs>().axis);
  Dense y(ctx.tensor(Role::Y).dim);
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= y.dim[d];
  for (size_t d = axis + 1; d < y.dim.size(); ++d) inner *= y.dim[d];
  const int64_t y_row = y.dim[axis] * inner;              // elements of Y per outer index
  int64_t at = 0;                                         // offset along the axis, times inner
  for (Role r : ir::op_info(ctx.node().kind()).inputs) {  // IN_0, IN_1, ... in order
    if (!ctx.has_input(r)) break;
    const Dense x = ctx.load(r);
    const int64_t row = x.dim[axis] * inner;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k = 0; k < row; ++k) y[o * y_row + at + k] = x[o * row + k];
    at += row;
  }
  ctx.store(Role::Y, y);
  return Status::ok();
}

}  // namespace dnngraph::reference
