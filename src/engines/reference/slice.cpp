// Slice on the reference engine: Y[i_0, i_1, ...] = X[start_0 + i_0 * stride_0, ...]. Values
// are copied (Y has X's data type), so the result is exact.
#include "engines/reference/kernel.hpp"

namespace dnngraph::reference {

Status run_slice(KernelContext& ctx) {
  const auto& a = ctx.node().as<ir::SliceAttrs>();
  const Dense x = ctx.load(Role::X);
  Dense y(ctx.tensor(Role::Y).dim);
  const std::optional<ir::StridedWindow> w = a.window(row_major_strides(x.dim));
  if (!w)  // validate() gives the attributes one entry per dim of X
    return make_error(ErrorCode::Internal, "slice '", ctx.node().name,
                      "': its attributes do not have one entry per dim of its input");
  gather_strided(x, w->offset, w->stride, y);
  ctx.store(Role::Y, y);
  return Status::ok();
}

}  // namespace dnngraph::reference
