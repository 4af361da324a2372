// Slice on the reference engine: Y[i_0, i_1, ...] = X[start_0 + i_0 * stride_0, ...]. Values
// are copied (Y has X's data type), so the result is exact.
#include "engines/reference/kernel.hpp"

namespace dnngraph::reference {

Status run_slice(KernelContext& ctx) {
  const auto& a = ctx.node().as<ir::SliceAttrs>();
  const Dense x = ctx.load(Role::X);
  Dense y(ctx.tensor(Role::Y).dim);
  const size_t rank = x.dim.size();
  const std::vector<int64_t> xs = row_major_strides(x.dim);
  std::vector<int64_t> step(rank);
  int64_t base = 0;  // X's offset of Y's first element
  for (size_t d = 0; d < rank; ++d) {
    step[d] = (a.stride.empty() ? 1 : a.stride[d]) * xs[d];
    base += a.start[d] * xs[d];
  }
  gather_strided(x, base, step, y);
  ctx.store(Role::Y, y);
  return Status::ok();
}

}  // namespace dnngraph::reference
