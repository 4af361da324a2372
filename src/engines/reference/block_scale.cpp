// block_scale_quantize / block_scale_dequantize on the reference engine (rules in
// include/dnngraph/ir/ops.hpp). Quantize, per block of X:
// - MX (SCALE FP8_E8M0; Y FP8_E4M3, FP8_E5M2 or FP4_E2M1), the OCP MX v1.0 rule: scale =
//   2^(floor(log2(amax)) - emax), emax the largest exponent of Y's type (8, 15, 2);
//   2^-127 for a block of zeros;
// - NVFP4 (SCALE FP8_E4M3, Y FP4_E2M1), the rule cuDNN's block scaling documents: scale =
//   amax / 6 rounded up to an FP8_E4M3 value (so that no element exceeds 6 once divided);
//   2^-9, the smallest positive E4M3 value, for a block of zeros; 448 (E4M3's largest) when
//   amax / 6 exceeds it, and the elements then saturate;
// then Y = X / scale, saturated to Y's largest finite value and rounded to nearest even by the
// store. A block holding NaN or an infinity gets a NaN scale (both scale types have a NaN code;
// its FP4 elements store NaN as +0, see src/core/storage.cpp). Dequantize: Y = X * the scale of
// X's block. FP4 outputs are written like every other: computed into an fp64 buffer, then
// stored serially by KernelContext::store (two FP4 elements share a byte).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "engines/reference/kernel.hpp"

namespace dnngraph::reference {

namespace {

struct Quantized {
  int emax;        // largest exponent of a finite value
  double max_fin;  // largest finite value
};
Quantized format_of(DataType t) {
  switch (t) {
    case DataType::FP8_E5M2:
      return {15, 57344.0};
    case DataType::FP4_E2M1:
      return {2, 6.0};
    default:
      return {8, 448.0};
  }
}

constexpr double kE4M3Max = 448.0;

// The smallest FP8_E4M3 value >= v, for 0 <= v <= 448.
double round_up_e4m3(double v) {
  const double r = round_to(DataType::FP8_E4M3, v);
  if (r >= v) return r;
  uint8_t code = 0;
  store_element(&code, DataType::FP8_E4M3, 0, r);
  ++code;  // positive codes grow with their values; r < v <= 448 keeps it below 448's code
  return load_element(&code, DataType::FP8_E4M3, 0);
}

// The scale of one block whose largest magnitude is amax (NaN when the block holds NaN).
double block_scale(double amax, bool nan, bool nvfp4, const Quantized& f) {
  if (nan || !std::isfinite(amax)) return std::numeric_limits<double>::quiet_NaN();
  if (nvfp4) {
    if (amax == 0.0) return std::ldexp(1.0, -9);
    return round_up_e4m3(std::min(amax / f.max_fin, kE4M3Max));
  }
  int e = amax > 0 ? std::ilogb(amax) - f.emax : -127;
  e = std::clamp(e, -127, 127);
  return std::ldexp(1.0, e);
}

Status quantize(KernelContext& ctx) {
  const auto& a = ctx.node().as<ir::BlockScaleQuantizeAttrs>();
  const Dense x = ctx.load(Role::X);
  const size_t axis = static_cast<size_t>(a.axis.value_or(static_cast<int64_t>(x.dim.size()) - 1));
  const Quantized f = format_of(ctx.tensor(Role::Y).data_type);
  const bool nvfp4 = ctx.tensor(Role::SCALE).data_type == DataType::FP8_E4M3;
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
        const double scale = block_scale(amax, nan, nvfp4, f);
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

Status run_block_scale_quantize(KernelContext& ctx) { return quantize(ctx); }
Status run_block_scale_dequantize(KernelContext& ctx) { return dequantize(ctx); }

}  // namespace dnngraph::reference
