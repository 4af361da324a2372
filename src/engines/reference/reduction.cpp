// Reference reduction: Y = reduce(X) over every dim where Y's dim is 1 and X's is not.
// Accumulates in fp64 and rounds the final value to the compute type.
#include <cmath>
#include <limits>

#include "engines/reference/kernel.hpp"

namespace dnngraph::reference {
namespace {

using RM = ReductionMode;

double initial(RM m) {
  switch (m) {
    case RM::Mul:
      return 1.0;
    case RM::Min:
      return std::numeric_limits<double>::infinity();
    case RM::Max:
      return -std::numeric_limits<double>::infinity();
    default:
      return 0.0;  // Add, Avg, Amax (of |x| >= 0), Norm1, Norm2 (sum of squares)
  }
}

double combine(RM m, double acc, double x) {
  switch (m) {
    case RM::Add:
    case RM::Avg:
      return acc + x;
    case RM::Mul:
      return acc * x;
    // NaN propagates (a max that silently dropped NaN would hide bad inputs).
    case RM::Min:
      return (std::isnan(x) || x < acc) ? x : acc;
    case RM::Max:
      return (std::isnan(x) || x > acc) ? x : acc;
    case RM::Amax:
      return (std::isnan(x) || std::fabs(x) > acc) ? std::fabs(x) : acc;
    case RM::Norm1:
      return acc + std::fabs(x);
    case RM::Norm2:
      return acc + x * x;
  }
  return acc;
}

double finish(RM m, double acc, int64_t count) {
  switch (m) {
    case RM::Avg:
      return acc / static_cast<double>(count);
    case RM::Norm2:
      return std::sqrt(acc);
    default:
      return acc;
  }
}

}  // namespace

Status run_reduction(KernelContext& ctx) {
  const RM mode = ctx.node().as<ir::ReductionAttrs>().mode;
  const Dense x = ctx.load(Role::X);
  const std::vector<int64_t>& ydim = ctx.tensor(Role::Y).dim;
  // Row-major strides of Y, zero on reduced dims: x's index maps to y's by a dot product.
  std::vector<int64_t> ystride = row_major_strides(ydim);
  int64_t count = 1;
  for (size_t k = 0; k < ydim.size(); ++k)
    if (ydim[k] == 1 && x.dim[k] != 1) {
      ystride[k] = 0;
      count *= x.dim[k];
    }
  Dense y(ydim, initial(mode));
  const size_t r = x.dim.size();
  std::vector<int64_t> idx(r, 0);
  int64_t yi = 0;
  for (int64_t i = 0; i < x.size(); ++i) {
    y[yi] = combine(mode, y[yi], x[i]);
    for (size_t k = r; k-- > 0;) {  // odometer over x's dims, tracking y's offset
      if (++idx[k] < x.dim[k]) {
        yi += ystride[k];
        break;
      }
      yi -= ystride[k] * (x.dim[k] - 1);
      idx[k] = 0;
    }
  }
  for (double& v : y.data) v = ctx.round_compute(finish(mode, v, count));
  ctx.store(Role::Y, y);
  return Status::ok();
}

}  // namespace dnngraph::reference
