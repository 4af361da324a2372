// reshape on the reference engine. LOGICAL: Y's row-major elements are X's row-major elements.
// VIEW_ONLY: Y reads X's memory through Y's own dims and strides (both packed, checked in
// src/ir/ops/reshape.cpp): the element of Y at memory offset o is X's at offset o. Values are
// copied (Y has X's data type), so the result is exact.
#include "engines/reference/kernel.hpp"

namespace dnngraph::reference {

namespace {

// The memory offset (in elements) of every row-major index of `dim` under `stride`.
std::vector<int64_t> offsets(const std::vector<int64_t>& dim, const std::vector<int64_t>& stride) {
  int64_t n = 1;
  for (int64_t d : dim) n *= d;
  std::vector<int64_t> out(static_cast<size_t>(n));
  std::vector<int64_t> idx(dim.size(), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    out[static_cast<size_t>(i)] = off;
    for (size_t k = dim.size(); k-- > 0;) {  // odometer: advance the innermost dim
      off += stride[k];
      if (++idx[k] < dim[k]) break;
      off -= stride[k] * dim[k];
      idx[k] = 0;
    }
  }
  return out;
}

}  // namespace

Status run_reshape(KernelContext& ctx) {
  const bool logical = ctx.node().as<ir::ReshapeAttrs>().logical;
  const Dense x = ctx.load(Role::X);
  const ir::TensorAttrs& yt = ctx.tensor(Role::Y);
  Dense y(yt.dim);
  if (logical) {
    y.data = x.data;
  } else {
    const ir::TensorAttrs& xt = ctx.tensor(Role::X);
    const std::vector<int64_t> xo = offsets(xt.dim, xt.stride);
    std::vector<double> by_offset(x.data.size());
    for (size_t i = 0; i < xo.size(); ++i) by_offset[static_cast<size_t>(xo[i])] = x.data[i];
    const std::vector<int64_t> yo = offsets(yt.dim, yt.stride);
    for (size_t j = 0; j < yo.size(); ++j) y.data[j] = by_offset[static_cast<size_t>(yo[j])];
  }
  ctx.store(Role::Y, y);
  return Status::ok();
}

}  // namespace dnngraph::reference
