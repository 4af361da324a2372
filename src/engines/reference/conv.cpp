// Reference convolution: fprop (X, W -> Y), dgrad (DY, W -> DX), wgrad (DY, X -> DW), with
// 1 to 3 spatial dims, groups, per-side padding, stride, dilation and true convolution.
//
// Everything is computed in fp64 on zero-padded channels-last copies, so every inner loop
// walks contiguous memory and needs no bounds checks; only the final sums are rounded to
// the compute type. 1-D and 2-D problems are 3-D problems with leading spatial dims of 1.
//
// The padded copy holds only what the taps read: along a spatial dim where out * ker is
// below the padded extent (a stride or padding much larger than the filter), it is laid out
// by (output position, tap) instead of by padded position, so its size follows the work and
// not the padding.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "engines/reference/kernel.hpp"

namespace dnngraph::reference {
namespace {

constexpr int kMaxSpatial = 3;
using Spatial = std::array<int64_t, kMaxSpatial>;

struct Geometry {
  int64_t N = 0, C = 0, K = 0, G = 1, Cg = 0, Kg = 0;
  Spatial in{1, 1, 1}, out{1, 1, 1}, ker{1, 1, 1};
  Spatial pre{0, 0, 0}, post{0, 0, 0}, str{1, 1, 1}, dil{1, 1, 1};
  Spatial padded{1, 1, 1};  // extent of the padded copy: in + pre + post, or out * ker
  bool flip = false;        // true convolution: the filter is read reversed
  // The problem's own stride and dilation; str/dil above address the padded copy (ker and 1
  // along a dim laid out by (output position, tap)).
  Spatial conv_str{1, 1, 1}, conv_dil{1, 1, 1};
  std::array<bool, kMaxSpatial> by_tap{false, false, false};

  int64_t out_volume() const { return out[0] * out[1] * out[2]; }
  int64_t in_volume() const { return in[0] * in[1] * in[2]; }
  int64_t ker_volume() const { return ker[0] * ker[1] * ker[2]; }
  int64_t padded_volume() const { return padded[0] * padded[1] * padded[2]; }
};

const ir::ConvAttrs& conv_attrs(const ir::Node& n) {
  switch (n.kind()) {
    case ir::OpKind::ConvDgrad:
      return n.as<ir::ConvDgradAttrs>();
    case ir::OpKind::ConvWgrad:
      return n.as<ir::ConvWgradAttrs>();
    default:
      return n.as<ir::ConvFpropAttrs>();
  }
}

// The activation-side (X), filter (W) and output-side (Y) roles of each direction.
struct Roles {
  Role x, w, y;
};
Roles roles_of(const ir::Node& n) {
  switch (n.kind()) {
    case ir::OpKind::ConvDgrad:
      return {Role::DX, Role::W, Role::DY};
    case ir::OpKind::ConvWgrad:
      return {Role::X, Role::DW, Role::DY};
    default:
      return {Role::X, Role::W, Role::Y};
  }
}

ir::Tensor port(const ir::Node& n, Role role) {
  ir::Tensor t = n.input(role);
  return t ? t : n.output(role);
}

// The problem of a validated node (src/ir/ops/conv.cpp checked every shape and filled every
// attribute, one value per spatial dim), as a 3-D problem.
Geometry geometry(const ir::Node& n) {
  const Roles r = roles_of(n);
  const ir::Tensor x = port(n, r.x), w = port(n, r.w), y = port(n, r.y);
  const size_t ns = x->dim.size() - 2, lead = kMaxSpatial - ns;
  const ir::ConvAttrs& a = conv_attrs(n);
  Geometry g;
  for (size_t i = 0; i < ns; ++i) {
    g.pre[lead + i] = a.pre_padding[i];
    g.post[lead + i] = a.post_padding[i];
    g.str[lead + i] = a.stride[i];
    g.dil[lead + i] = a.dilation[i];
    g.in[lead + i] = x->dim[2 + i];
    g.ker[lead + i] = w->dim[2 + i];
    g.out[lead + i] = y->dim[2 + i];
  }
  g.flip = !a.cross_correlation;
  g.N = x->dim[0];
  g.C = x->dim[1];
  g.K = w->dim[0];
  g.Cg = w->dim[1];
  g.G = g.C / g.Cg;
  g.Kg = g.K / g.G;
  for (int i = 0; i < kMaxSpatial; ++i) {
    g.padded[i] = g.in[i] + g.pre[i] + g.post[i];
    g.conv_str[i] = g.str[i];
    g.conv_dil[i] = g.dil[i];
    // Compare without overflow: out * ker < padded.
    if (g.ker[i] > 0 && g.out[i] < g.padded[i] / g.ker[i]) {
      g.by_tap[i] = true;
      g.padded[i] = g.out[i] * g.ker[i];
      g.str[i] = g.ker[i];
      g.dil[i] = 1;
    }
  }
  return g;
}

// The input coordinate that padded-copy position p of spatial dim i holds, or -1 for padding.
inline int64_t source_coord(const Geometry& g, int i, int64_t p) {
  const int64_t c = g.by_tap[i]
                        ? (p / g.ker[i]) * g.conv_str[i] + (p % g.ker[i]) * g.conv_dil[i] - g.pre[i]
                        : p - g.pre[i];
  return c >= 0 && c < g.in[i] ? c : -1;
}
// source_coord of every position of each spatial dim.
std::array<std::vector<int64_t>, kMaxSpatial> source_coords(const Geometry& g) {
  std::array<std::vector<int64_t>, kMaxSpatial> s;
  for (int i = 0; i < kMaxSpatial; ++i) {
    s[i].resize(static_cast<size_t>(g.padded[i]));
    for (int64_t p = 0; p < g.padded[i]; ++p) s[i][static_cast<size_t>(p)] = source_coord(g, i, p);
  }
  return s;
}

// Threads only pay off on real work: tiny problems (tests) run serially.
inline bool worth_threads(const Geometry& g) {
  return g.N * g.K * g.out_volume() * g.Cg * g.ker_volume() > (int64_t{1} << 18);
}

// Offset of padded position p (3 coords) in a [..][padded...][C] channels-last array.
inline int64_t padded_pixel(const Geometry& g, int64_t n, int64_t d, int64_t h, int64_t w) {
  return ((n * g.padded[0] + d) * g.padded[1] + h) * g.padded[2] + w;
}

// Calls f(plane, padded offset, source offset) for every padded position that holds an input
// element (the others are padding): plane = n * C + c; the padded offset indexes a
// channels-last [N, padded..., C] array, the source offset the plane's [in...] block. Planes
// run in parallel, so f may accumulate into its plane.
template <class F>
void for_each_held_position(const Geometry& g, F&& f) {
  const auto src = source_coords(g);
#pragma omp parallel for collapse(2) schedule(static) if (worth_threads(g))
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t c = 0; c < g.C; ++c)
      for (int64_t d = 0; d < g.padded[0]; ++d) {
        const int64_t sd = src[0][static_cast<size_t>(d)];
        if (sd < 0) continue;
        for (int64_t h = 0; h < g.padded[1]; ++h) {
          const int64_t sh = src[1][static_cast<size_t>(h)];
          if (sh < 0) continue;
          for (int64_t w = 0; w < g.padded[2]; ++w) {
            const int64_t sw = src[2][static_cast<size_t>(w)];
            if (sw >= 0)
              f(n * g.C + c, padded_pixel(g, n, d, h, w) * g.C + c,
                (sd * g.in[1] + sh) * g.in[2] + sw);
          }
        }
      }
}

// X [N, C, in...] row-major -> zero-padded channels-last [N, padded..., C].
std::vector<double> pad_channels_last(const Geometry& g, const Dense& x) {
  std::vector<double> xp(static_cast<size_t>(g.N * g.padded_volume() * g.C), 0.0);
  const int64_t iv = g.in_volume();
  for_each_held_position(g, [&](int64_t plane, int64_t p, int64_t s) {
    xp[static_cast<size_t>(p)] = x[plane * iv + s];
  });
  return xp;
}

// Filter tap index (kd, kh, kw) -> index into W's row-major spatial block, reversed for
// true convolution.
inline int64_t tap(const Geometry& g, int64_t kd, int64_t kh, int64_t kw) {
  if (g.flip) {
    kd = g.ker[0] - 1 - kd;
    kh = g.ker[1] - 1 - kh;
    kw = g.ker[2] - 1 - kw;
  }
  return (kd * g.ker[1] + kh) * g.ker[2] + kw;
}

// Visits every weight of the filters k0 <= k < k1: f(k, c, t, w) with c its input channel in
// the group, t its tap in correlation order and w its offset in W [K, Cg, taps].
template <class F>
void for_each_weight(const Geometry& g, int64_t k0, int64_t k1, F&& f) {
  const int64_t taps = g.ker_volume();
  for (int64_t k = k0; k < k1; ++k)
    for (int64_t c = 0; c < g.Cg; ++c)
      for (int64_t kd = 0; kd < g.ker[0]; ++kd)
        for (int64_t kh = 0; kh < g.ker[1]; ++kh)
          for (int64_t kw = 0; kw < g.ker[2]; ++kw)
            f(k, c, (kd * g.ker[1] + kh) * g.ker[2] + kw,
              (k * g.Cg + c) * taps + tap(g, kd, kh, kw));
}

// ---------------------------------------------------------------- fprop
// Register tile: kPix output positions along the last spatial dim x kKb output channels.
constexpr int64_t kPix = 4, kKb = 8;

// The clones' resolver is an IFUNC that the dynamic loader calls while relocating the library;
// under ThreadSanitizer it is instrumented and runs before the TSan runtime is initialized,
// which segfaulted every TSan test binary in ld.so before main. TSan builds take the default.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
// The hot loop: a 256-bit FMA clone where the CPU has it (chosen once at load time).
#define DNNGRAPH_FPROP_CLONES __attribute__((target_clones("fma", "default")))
#else
#define DNNGRAPH_FPROP_CLONES
#endif

// out[p][j] = sum over taps and channels of x(pixel p) * w(block channel j).
// wb is one block of kKb output channels: [taps][Cg][kKb]; xs[p] point at each pixel's
// first tap, group channel 0, in the padded channels-last input.
// Four doubles (GCC/Clang vector extension): one AVX register in the FMA clone, two SSE
// registers otherwise. Written explicitly because the auto-vectorizer picks the wrong loop.
typedef double V4 __attribute__((vector_size(32)));

DNNGRAPH_FPROP_CLONES void fprop_tile(const Geometry& g, const double* const* xs, const double* wb,
                                      double (*out)[kKb]) {
  static_assert(kPix == 4 && kKb == 8, "the tile below is written for 4 x 8");
  V4 acc[kPix][2] = {};  // local, so it lives in registers
  for (int64_t kd = 0; kd < g.ker[0]; ++kd)
    for (int64_t kh = 0; kh < g.ker[1]; ++kh)
      for (int64_t kw = 0; kw < g.ker[2]; ++kw) {
        const int64_t xo =
            ((kd * g.dil[0] * g.padded[1] + kh * g.dil[1]) * g.padded[2] + kw * g.dil[2]) * g.C;
        const double* x0 = xs[0] + xo;
        const double* x1 = xs[1] + xo;
        const double* x2 = xs[2] + xo;
        const double* x3 = xs[3] + xo;
        for (int64_t c = 0; c < g.Cg; ++c, wb += kKb) {
          V4 w0, w1;
          std::memcpy(&w0, wb, sizeof(V4));
          std::memcpy(&w1, wb + 4, sizeof(V4));
          acc[0][0] += x0[c] * w0;
          acc[0][1] += x0[c] * w1;
          acc[1][0] += x1[c] * w0;
          acc[1][1] += x1[c] * w1;
          acc[2][0] += x2[c] * w0;
          acc[2][1] += x2[c] * w1;
          acc[3][0] += x3[c] * w0;
          acc[3][1] += x3[c] * w1;
        }
      }
  for (int64_t p = 0; p < kPix; ++p) {
    std::memcpy(out[p], &acc[p][0], sizeof(V4));
    std::memcpy(out[p] + 4, &acc[p][1], sizeof(V4));
  }
}

Status fprop(KernelContext& ctx, const Geometry& g) {
  const Dense x = ctx.load(Role::X), w = ctx.load(Role::W);
  const std::vector<double> xp = pad_channels_last(g, x);
  // W [K, Cg, taps] -> wt [G][Kg blocks of kKb][taps][Cg][kKb] (taps in correlation order,
  // zero padded): one block is contiguous and stays in cache while a row of pixels sweeps.
  const int64_t taps = g.ker_volume();
  const int64_t blocks = (g.Kg + kKb - 1) / kKb;
  const int64_t block_size = taps * g.Cg * kKb;
  std::vector<double> wt(static_cast<size_t>(g.G * blocks * block_size), 0.0);
  for_each_weight(g, 0, g.K, [&](int64_t k, int64_t c, int64_t t, int64_t at) {
    const int64_t gi = k / g.Kg, kk = k % g.Kg;
    wt[static_cast<size_t>((gi * blocks + kk / kKb) * block_size + (t * g.Cg + c) * kKb +
                           kk % kKb)] = w[at];
  });
  Dense y(ctx.tensor(Role::Y).dim);
  const int64_t ov = g.out_volume();
  const int64_t rows = g.N * g.G * g.out[0] * g.out[1];
#pragma omp parallel for schedule(dynamic, 1) if (worth_threads(g))
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t oh = row % g.out[1], od = row / g.out[1] % g.out[0];
    const int64_t gi = row / (g.out[1] * g.out[0]) % g.G, n = row / (g.out[1] * g.out[0] * g.G);
    for (int64_t b = 0; b < blocks; ++b) {
      const double* wb = wt.data() + (gi * blocks + b) * block_size;
      for (int64_t ow0 = 0; ow0 < g.out[2]; ow0 += kPix) {
        const double* xs[kPix];
        for (int64_t p = 0; p < kPix; ++p) {
          const int64_t ow = std::min(ow0 + p, g.out[2] - 1);  // the tail recomputes the last
          xs[p] = xp.data() +
                  padded_pixel(g, n, od * g.str[0], oh * g.str[1], ow * g.str[2]) * g.C + gi * g.Cg;
        }
        double acc[kPix][kKb];
        fprop_tile(g, xs, wb, acc);
        for (int64_t j = 0; j < kKb && b * kKb + j < g.Kg; ++j) {
          double* dst = y.data.data() + (n * g.K + gi * g.Kg + b * kKb + j) * ov +
                        (od * g.out[1] + oh) * g.out[2];
          for (int64_t p = 0; p < kPix && ow0 + p < g.out[2]; ++p)
            dst[ow0 + p] = ctx.round_compute(acc[p][j]);
        }
      }
    }
  }
  ctx.store(Role::Y, y);
  return Status::ok();
}

// ---------------------------------------------------------------- dgrad
// Scatter form: each DY pixel adds dy[k] * w[k, :, tap] into the padded DX pixel it read.
Status dgrad(KernelContext& ctx, const Geometry& g) {
  const Dense dy = ctx.load(Role::DY), w = ctx.load(Role::W);
  const int64_t taps = g.ker_volume(), ov = g.out_volume();
  // wt [G][taps][Kg][Cg] in correlation order: the inner loop runs over channels.
  std::vector<double> wt(static_cast<size_t>(g.G * taps * g.Kg * g.Cg));
  for_each_weight(g, 0, g.K, [&](int64_t k, int64_t c, int64_t t, int64_t at) {
    const int64_t gi = k / g.Kg, kk = k % g.Kg;
    wt[static_cast<size_t>(((gi * taps + t) * g.Kg + kk) * g.Cg + c)] = w[at];
  });
  std::vector<double> dxp(static_cast<size_t>(g.N * g.padded_volume() * g.C), 0.0);
  // (n, group) pairs write disjoint channel ranges of DX. Per-thread scratch is allocated
  // here: nothing allocates inside the parallel region.
  std::vector<double> dyv_all(static_cast<size_t>(omp_get_max_threads() * g.Kg));
#pragma omp parallel for schedule(dynamic, 1) if (worth_threads(g))
  for (int64_t ng = 0; ng < g.N * g.G; ++ng) {
    const int64_t n = ng / g.G, gi = ng % g.G;
    double* dyv = dyv_all.data() + static_cast<size_t>(omp_get_thread_num() * g.Kg);
    for (int64_t od = 0; od < g.out[0]; ++od)
      for (int64_t oh = 0; oh < g.out[1]; ++oh)
        for (int64_t ow = 0; ow < g.out[2]; ++ow) {
          const int64_t o = (od * g.out[1] + oh) * g.out[2] + ow;
          for (int64_t k = 0; k < g.Kg; ++k)
            dyv[static_cast<size_t>(k)] = dy[(n * g.K + gi * g.Kg + k) * ov + o];
          for (int64_t kd = 0; kd < g.ker[0]; ++kd)
            for (int64_t kh = 0; kh < g.ker[1]; ++kh)
              for (int64_t kw = 0; kw < g.ker[2]; ++kw) {
                double* dst =
                    dxp.data() +
                    padded_pixel(g, n, od * g.str[0] + kd * g.dil[0], oh * g.str[1] + kh * g.dil[1],
                                 ow * g.str[2] + kw * g.dil[2]) *
                        g.C +
                    gi * g.Cg;
                const double* wr =
                    wt.data() + (gi * taps + (kd * g.ker[1] + kh) * g.ker[2] + kw) * g.Kg * g.Cg;
                for (int64_t k = 0; k < g.Kg; ++k) {
                  const double v = dyv[static_cast<size_t>(k)];
                  const double* wk = wr + k * g.Cg;
                  for (int64_t c = 0; c < g.Cg; ++c) dst[c] += v * wk[c];
                }
              }
        }
  }
  // Crop the padding and go back to [N, C, in...]: each padded position adds into the input
  // position it holds (several, along a dim laid out by (output position, tap)).
  Dense dx({g.N, g.C, g.in[0], g.in[1], g.in[2]});
  const int64_t iv = g.in_volume();
  for_each_held_position(g, [&](int64_t plane, int64_t p, int64_t s) {
    dx[plane * iv + s] += dxp[static_cast<size_t>(p)];
  });
  for (double& v : dx.data) v = ctx.round_compute(v);
  dx.dim = ctx.tensor(Role::DX).dim;
  ctx.store(Role::DX, dx);
  return Status::ok();
}

// ---------------------------------------------------------------- wgrad
// DW[k, c, tap] = sum over n and output pixels of dy[n, k, o] * x_padded[n, o*s + tap*d, c].
// Each thread owns a block of output channels, so an input patch read once from memory
// feeds the whole block.
constexpr int64_t kWgradKb = 8;

Status wgrad(KernelContext& ctx, const Geometry& g) {
  const Dense dy = ctx.load(Role::DY), x = ctx.load(Role::X);
  const std::vector<double> xp = pad_channels_last(g, x);
  const int64_t taps = g.ker_volume(), ov = g.out_volume();
  const int64_t kblocks = (g.K + kWgradKb - 1) / kWgradKb;
  Dense dw(ctx.tensor(Role::DW).dim);
  const size_t acc_size = static_cast<size_t>(kWgradKb * taps * g.Cg);
  std::vector<double> acc_all(static_cast<size_t>(omp_get_max_threads()) * acc_size);
#pragma omp parallel for schedule(dynamic, 1) if (worth_threads(g))
  for (int64_t kb = 0; kb < kblocks; ++kb) {
    const int64_t k0 = kb * kWgradKb, k1 = std::min(g.K, k0 + kWgradKb);
    double* acc =
        acc_all.data() + static_cast<size_t>(omp_get_thread_num()) * acc_size;  // [k][tap][c]
    std::fill(acc, acc + (k1 - k0) * taps * g.Cg, 0.0);
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t od = 0; od < g.out[0]; ++od)
        for (int64_t oh = 0; oh < g.out[1]; ++oh)
          for (int64_t ow = 0; ow < g.out[2]; ++ow) {
            const int64_t o = (od * g.out[1] + oh) * g.out[2] + ow;
            const int64_t pixel = padded_pixel(g, n, od * g.str[0], oh * g.str[1], ow * g.str[2]);
            for (int64_t k = k0; k < k1; ++k) {  // a block may straddle groups
              const double v = dy[(n * g.K + k) * ov + o];
              if (v == 0.0) continue;
              const double* base = xp.data() + pixel * g.C + (k / g.Kg) * g.Cg;
              double* ak = acc + (k - k0) * taps * g.Cg;
              for (int64_t kd = 0; kd < g.ker[0]; ++kd)
                for (int64_t kh = 0; kh < g.ker[1]; ++kh)
                  for (int64_t kw = 0; kw < g.ker[2]; ++kw) {
                    const double* xr =
                        base + ((kd * g.dil[0] * g.padded[1] + kh * g.dil[1]) * g.padded[2] +
                                kw * g.dil[2]) *
                                   g.C;
                    double* ar = ak + ((kd * g.ker[1] + kh) * g.ker[2] + kw) * g.Cg;
                    for (int64_t c = 0; c < g.Cg; ++c) ar[c] += v * xr[c];
                  }
            }
          }
    for_each_weight(g, k0, k1, [&](int64_t k, int64_t c, int64_t t, int64_t at) {
      dw[at] = ctx.round_compute(acc[static_cast<size_t>(((k - k0) * taps + t) * g.Cg + c)]);
    });
  }
  ctx.store(Role::DW, dw);
  return Status::ok();
}

}  // namespace

int64_t conv_padded_elements(const ir::Node& n) {
  const Geometry g = geometry(n);
  int64_t e = 0;
  if (__builtin_mul_overflow(g.N, g.padded_volume(), &e) || __builtin_mul_overflow(e, g.C, &e))
    return INT64_MAX;
  return e;
}

Status run_conv_fprop(KernelContext& ctx) { return fprop(ctx, geometry(ctx.node())); }
Status run_conv_dgrad(KernelContext& ctx) { return dgrad(ctx, geometry(ctx.node())); }
Status run_conv_wgrad(KernelContext& ctx) { return wgrad(ctx, geometry(ctx.node())); }

}  // namespace dnngraph::reference
