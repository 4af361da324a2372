// transpose on the reference engine: Y[i_0, ..., i_r-1] = X at index j with
// j[permutation[k]] = i_k. Values are copied (Y has X's data type), so the result is exact.
#include "engines/reference/kernel.hpp"

namespace dnngraph::reference {

Status run_transpose(KernelContext& ctx) {
  const auto& p = ctx.node().as<ir::TransposeAttrs>().permutation;
  const Dense x = ctx.load(Role::X);
  Dense y(ctx.tensor(Role::Y).dim);
  const size_t rank = x.dim.size();
  const std::vector<int64_t> xs = row_major_strides(x.dim);
  std::vector<int64_t> step(rank);  // X's row-major step when Y's index k advances
  for (size_t k = 0; k < rank; ++k) step[k] = xs[static_cast<size_t>(p[k])];
  gather_strided(x, 0, step, y);
  ctx.store(Role::Y, y);
  return Status::ok();
}

}  // namespace dnngraph::reference
