// genstats on the reference engine: per channel (dim 1), SUM = sum of X and SQ_SUM = sum of
// X^2 over every other dim, in fp64, rounded once on store.
#include "engines/reference/kernel.hpp"

namespace dnngraph::reference {

Status run_genstats(KernelContext& ctx) {
  const Dense x = ctx.load(Role::X);
  const int64_t c = x.dim[1];
  int64_t outer = x.dim[0], inner = 1;
  for (size_t d = 2; d < x.dim.size(); ++d) inner *= x.dim[d];
  Dense sum(ctx.tensor(Role::SUM).dim), sq(ctx.tensor(Role::SQ_SUM).dim);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < inner; ++i) {
        const double v = x[(o * c + ch) * inner + i];
        sum[ch] += v;
        sq[ch] += v * v;
      }
  ctx.store(Role::SUM, sum);
  ctx.store(Role::SQ_SUM, sq);
  return Status::ok();
}

}  // namespace dnngraph::reference
