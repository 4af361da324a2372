// Reference softmax: Y = softmax(X) along the last dim, computed in fp64 the numerically stable
// way (subtracting the row maximum). STATS, when wired, receives the log-sum-exp of each row,
// max + log(sum(exp(x - max))), with X's dims and a last dim of 1.
// A row without a finite maximum (all -inf, or holding +inf or NaN) gives NaN, as PyTorch does.
#include <cmath>

#include "engines/reference/kernel.hpp"

namespace dnngraph::reference {
namespace {

// Below this many elements, threads cost more than they save.
constexpr int64_t kParallelElements = 1 << 16;

}  // namespace

Status run_softmax(KernelContext& ctx) {
  const Dense x = ctx.load(Role::X);
  const int64_t cols = x.dim.back();
  const int64_t rows = cols == 0 ? 0 : x.size() / cols;
  Dense y(x.dim);
  std::vector<int64_t> sdim = x.dim;
  sdim.back() = 1;
  Dense stats(sdim);
#pragma omp parallel for schedule(static) if (x.size() >= kParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    const double* in = &x.data[static_cast<size_t>(r * cols)];
    double* out = &y.data[static_cast<size_t>(r * cols)];
    double mx = -INFINITY;
    for (int64_t j = 0; j < cols; ++j) mx = std::fmax(mx, in[j]);
    if (!std::isfinite(mx)) mx = NAN;  // documented: no finite maximum -> NaN row
    double sum = 0.0;
    for (int64_t j = 0; j < cols; ++j) sum += (out[j] = std::exp(in[j] - mx));
    for (int64_t j = 0; j < cols; ++j) out[j] /= sum;
    stats[r] = mx + std::log(sum);
  }
  ctx.store(Role::Y, y);
  if (ctx.has_output(Role::STATS)) ctx.store(Role::STATS, stats);
  return Status::ok();
}

}  // namespace dnngraph::reference
