// Reference moe_grouped_matmul: OUTPUT[0,r,:] = TOKEN[0,r,:] x WEIGHT[g % E] for the rows r of
// group g, [offset[g], offset[g+1]) (the last group runs to S). The offsets are data, so
// they are checked here, before anything is computed or written: they must be whole numbers,
// start at 0, never decrease and stay within S. fp64 accumulation, rounded to the compute type
// at the end (as matmul).
#include <cmath>
#include <vector>

#include "engines/reference/kernel.hpp"

namespace dnngraph::reference {
namespace {

// The group boundaries: bounds[g] .. bounds[g+1] are group g's rows, bounds[G] = S.
Result<std::vector<int64_t>> expert_bounds(const KernelContext& ctx, int64_t rows) {
  const Dense off = ctx.load(Role::FIRST_TOKEN_OFFSET);
  const std::string& name = ctx.tensor(Role::FIRST_TOKEN_OFFSET).name;
  std::vector<int64_t> bounds;
  bounds.reserve(static_cast<size_t>(off.size()) + 1);
  for (int64_t e = 0; e < off.size(); ++e) {
    const double v = off[e];
    const int64_t prev = e == 0 ? 0 : bounds.back();
    const char* what = e == 0 && v != 0.0 ? "must be 0 (the first group starts at row 0)"
                       : v < static_cast<double>(prev)
                           ? "is below the previous group's start (offsets must not decrease)"
                       : v > static_cast<double>(rows)
                           ? "is past the last token row (offsets must be at most S)"
                       : v != std::floor(v) ? "is not a whole number"
                                            : nullptr;
    if (what)
      return make_error(ErrorCode::InvalidArgument, "moe_grouped_matmul '", ctx.name(),
                        "': FIRST_TOKEN_OFFSET '", name, "' element ", e, " (the first row of ",
                        "group ", e, ") is ", v, " and ", what, "; S=", rows,
                        ". Give each group's first token row, non-decreasing, in [0, S]");
    bounds.push_back(static_cast<int64_t>(v));
  }
  bounds.push_back(rows);
  return bounds;
}

}  // namespace

Status run_moe_grouped_matmul(KernelContext& ctx) {
  const std::vector<int64_t>& odim = ctx.tensor(Role::OUTPUT).dim;
  const int64_t S = odim[1], N = odim[2];
  DNNGRAPH_ASSIGN_OR_RETURN(const std::vector<int64_t> bounds, expert_bounds(ctx, S));
  const Dense token = ctx.load(Role::TOKEN), weight = ctx.load(Role::WEIGHT);
  const int64_t K = token.dim[2], E = weight.dim[0];
  Dense out(odim);
  for (size_t g = 0; g + 1 < bounds.size(); ++g) {
    const double* w = weight.data.data() + static_cast<int64_t>(g) % E * K * N;
#pragma omp parallel for schedule(static) if ((bounds[g + 1] - bounds[g]) * N * K > (1 << 18))
    for (int64_t r = bounds[g]; r < bounds[g + 1]; ++r) {
      std::vector<double> acc(static_cast<size_t>(N), 0.0);
      const double* t = token.data.data() + r * K;
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < N; ++j) acc[static_cast<size_t>(j)] += t[k] * w[k * N + j];
      for (int64_t j = 0; j < N; ++j)
        out[r * N + j] = ctx.round_compute(acc[static_cast<size_t>(j)]);
    }
  }
  ctx.store(Role::OUTPUT, out);
  return Status::ok();
}

}  // namespace dnngraph::reference
