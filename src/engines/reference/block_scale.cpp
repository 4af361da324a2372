// block_scale_quantize / block_scale_dequantize on the reference engine (the OCP MX scheme;
// rules in include/dnngraph/ir/ops.hpp). Quantize: per block, scale = 2^(floor(log2(amax)) -
// emax) (2^-127 for a block of zeros, NaN for a block holding NaN), Y = X / scale saturated
// to Y's largest finite value. Dequantize: Y = X * the scale of X's block.
#include <algorithm>
#include <cmath>
#include <limits>

#include "engines/reference/kernel.hpp"

namespace dnngraph::reference {

namespace {

struct Fp8 {
  int emax;        // largest exponent of a finite value
  double max_fin;  // largest finite value
};
Fp8 fp8_of(DataType t) { return t == DataType::FP8_E5M2 ? Fp8{15, 57344.0} : Fp8{8, 448.0}; }

Status quantize(KernelContext& ctx) {
  const auto& a = ctx.node().as<ir::BlockScaleQuantizeAttrs>();
  const Dense x = ctx.load(Role::X);
  const size_t axis = static_cast<size_t>(a.axis.value_or(static_cast<int64_t>(x.dim.size()) - 1));
  const Fp8 f = fp8_of(ctx.tensor(Role::Y).data_type);
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= x.dim[d];
  for (size_t d = axis + 1; d < x.dim.size(); ++d) inner *= x.dim[d];
  const int64_t extent = x.dim[axis], bs = a.block_size, blocks = extent / bs;
  Dense y(x.dim);
  Dense s(ctx.tensor(Role::SCALE).dim);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t blk = 0; blk < blocks; ++blk)
      for (int64_t in = 0; in < inner; ++in) {
        auto at = [&](int64_t k) { return (o * extent + blk * bs + k) * inner + in; };
        double amax = 0.0;
        bool nan = false;
        for (int64_t k = 0; k < bs; ++k) {
          const double v = x[at(k)];
          nan = nan || std::isnan(v);
          amax = std::fmax(amax, std::fabs(v));
        }
        double scale = std::numeric_limits<double>::quiet_NaN();
        if (!nan && std::isfinite(amax)) {
          int e = amax > 0 ? std::ilogb(amax) - f.emax : -127;
          e = std::clamp(e, -127, 127);
          scale = std::ldexp(1.0, e);
        }
        s[(o * blocks + blk) * inner + in] = scale;
        for (int64_t k = 0; k < bs; ++k) {
          const double q = x[at(k)] / scale;
          y[at(k)] = std::isnan(q) ? q : std::clamp(q, -f.max_fin, f.max_fin);
        }
      }
  ctx.store(Role::Y, y);
  ctx.store(Role::SCALE, s);
  return Status::ok();
}

Status dequantize(KernelContext& ctx) {
  const Dense x = ctx.load(Role::X);
  const Dense s = ctx.load(Role::SCALE);
  const size_t rank = x.dim.size();
  const std::vector<int64_t> ss = row_major_strides(s.dim);
  Dense y(x.dim);
  std::vector<int64_t> idx(rank, 0);
  for (int64_t i = 0; i < x.size(); ++i) {
    int64_t si = 0;
    for (size_t d = 0; d < rank; ++d) si += idx[d] / (x.dim[d] / s.dim[d]) * ss[d];
    y[i] = ctx.round_compute(x[i] * s[si]);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < x.dim[d]) break;
      idx[d] = 0;
    }
  }
  ctx.store(Role::Y, y);
  return Status::ok();
}

}  // namespace

Status run_block_scale(KernelContext& ctx) {
  return ctx.node().kind() == ir::OpKind::BlockScaleQuantize ? quantize(ctx) : dequantize(ctx);
}

}  // namespace dnngraph::reference
