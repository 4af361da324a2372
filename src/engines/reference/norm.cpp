// Reference kernels of the norm family: layernorm, rmsnorm and batchnorm, forward (training and
// inference) and backward. Everything is computed in fp64; outputs are rounded once, on store.
//
// Semantics (x is one element, M the number of elements sharing one set of statistics):
//   layernorm  statistics per index of dim 0, over every other dim; MEAN / INV_VARIANCE have
//              dims [N,1,...,1]. inv_variance = 1/sqrt(var + eps) with the biased variance
//              (divided by M); y = (x - mean) * inv_variance * scale + bias.
//   rmsnorm    same grouping; inv_variance = 1/sqrt(mean(x^2) + eps); y = x * inv_variance *
//              scale (+ bias when BIAS is given). No MEAN.
//   batchnorm  statistics per channel (dim 1), over every other dim; stats dims [1,C,1,...,1].
//              Training normalizes with the biased variance and, when the running statistics
//              are wired, updates them as PyTorch does:
//                next_running_mean = (1 - momentum) * prev_running_mean + momentum * mean
//                next_running_var  = (1 - momentum) * prev_running_var + momentum * var * M/(M-1)
//              (the unbiased variance; with M == 1 the biased one, 0, is used).
//              Inference reads MEAN and INV_VARIANCE: y = (x - mean) * inv_variance * scale + bias.
//   SCALE and BIAS broadcast to X (same rank, each dim 1 or X's).
//
// Backward (exact gradients of the forward above, with mean and inv_variance functions of x).
// With r = inv_variance, xhat = (x - mean) * r (rmsnorm: x * r), g = dy * scale and
// <.> the mean over the M elements of a group:
//   layernorm, batchnorm: dx = r * (g - <g> - xhat * <g * xhat>)
//   rmsnorm:              dx = r * (g - xhat * <g * xhat>)
//   dscale = sum of dy * xhat, dbias = sum of dy, each over the dims where DSCALE / DBIAS is 1.
#include <cmath>

#include "engines/reference/kernel.hpp"

namespace dnngraph::reference {
namespace {

// Below this many elements, threads cost more than they save (and small test problems run
// many times on shared CI cores).
constexpr int64_t kParallelElements = 1 << 16;

// The dim that indexes the statistics: 0 for layer/rms norm (per sample), 1 for batchnorm.
size_t stats_axis(ir::NormKind k) { return k == ir::NormKind::BatchNorm ? 1 : 0; }

std::vector<int64_t> stats_dims(ir::NormKind k, const std::vector<int64_t>& xdim) {
  std::vector<int64_t> d(xdim.size(), 1);
  d[stats_axis(k)] = xdim[stats_axis(k)];
  return d;
}

// X (row major) seen as [outer, count, inner]: the statistics of group g cover the elements
// (o * count + g) * inner + s for every o and s.
struct Groups {
  int64_t outer = 1, count = 1, inner = 1;
  int64_t elements() const { return outer * inner; }
  template <class F>
  void for_each(int64_t g, F&& f) const {
    for (int64_t o = 0; o < outer; ++o) {
      const int64_t base = (o * count + g) * inner;
      for (int64_t s = 0; s < inner; ++s) f(base + s);
    }
  }
};

Groups groups_of(ir::NormKind k, const std::vector<int64_t>& xdim) {
  Groups g;
  const size_t axis = stats_axis(k);
  for (size_t i = 0; i < xdim.size(); ++i) {
    if (i < axis) g.outer *= xdim[i];
    if (i == axis) g.count = xdim[i];
    if (i > axis) g.inner *= xdim[i];
  }
  return g;
}

// Sums `full` over every dim where `dims` is 1 (dims has full's rank; each dim 1 or equal).
Dense reduce_to(const Dense& full, const std::vector<int64_t>& dims) {
  Dense out(dims);
  const size_t r = full.dim.size();
  std::vector<int64_t> ostride = row_major_strides(dims);
  for (size_t k = 0; k < r; ++k)
    if (dims[k] == 1) ostride[k] = 0;
  std::vector<int64_t> idx(r, 0);
  int64_t off = 0;
  for (int64_t i = 0; i < full.size(); ++i) {
    out[off] += full[i];
    for (size_t k = r; k-- > 0;) {
      if (++idx[k] < full.dim[k]) {
        off += ostride[k];
        break;
      }
      off -= ostride[k] * (full.dim[k] - 1);
      idx[k] = 0;
    }
  }
  return out;
}

Status run_forward(KernelContext& ctx) {
  const auto& a = ctx.node().as<ir::NormFwdAttrs>();
  const bool rms = a.kind == ir::NormKind::RmsNorm;
  const Dense x = ctx.load(Role::X);
  const Groups gr = groups_of(a.kind, x.dim);
  const Dense scale = ctx.load_broadcast(Role::SCALE, x.dim);
  const Dense bias =
      ctx.has_input(Role::BIAS) ? ctx.load_broadcast(Role::BIAS, x.dim) : Dense(x.dim);
  const std::vector<int64_t> sd = stats_dims(a.kind, x.dim);
  Dense mean(sd), inv(sd), var(sd);
  const double m = static_cast<double>(gr.elements());
  const bool parallel = x.size() >= kParallelElements;

  if (a.kind == ir::NormKind::BatchNorm && a.phase == NormForwardPhase::Inference) {
    mean = ctx.load(Role::MEAN);
    inv = ctx.load(Role::INV_VARIANCE);
  } else {
    const double eps = ctx.scalar(Role::EPSILON);
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t g = 0; g < gr.count; ++g) {
      double sum = 0.0;
      if (!rms) gr.for_each(g, [&](int64_t i) { sum += x[i]; });
      const double mu = sum / m;  // 0 for rmsnorm: it normalizes by the raw second moment
      double sq = 0.0;
      gr.for_each(g, [&](int64_t i) { sq += (x[i] - mu) * (x[i] - mu); });
      mean[g] = mu;
      var[g] = sq / m;
      inv[g] = 1.0 / std::sqrt(var[g] + eps);
    }
  }

  Dense y(x.dim);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t g = 0; g < gr.count; ++g)
    gr.for_each(g, [&](int64_t i) { y[i] = (x[i] - mean[g]) * inv[g] * scale[i] + bias[i]; });
  ctx.store(Role::Y, y);
  if (ctx.has_output(Role::MEAN)) ctx.store(Role::MEAN, mean);
  if (ctx.has_output(Role::INV_VARIANCE)) ctx.store(Role::INV_VARIANCE, inv);

  if (ctx.has_output(Role::NEXT_RUNNING_MEAN) || ctx.has_output(Role::NEXT_RUNNING_VAR)) {
    const double momentum = ctx.scalar(Role::MOMENTUM);
    const Dense prev_mean = ctx.load(Role::PREV_RUNNING_MEAN);
    const Dense prev_var = ctx.load(Role::PREV_RUNNING_VAR);
    const double unbias = m > 1.0 ? m / (m - 1.0) : 1.0;
    Dense next_mean(sd), next_var(sd);
    for (int64_t g = 0; g < gr.count; ++g) {
      next_mean[g] = (1.0 - momentum) * prev_mean[g] + momentum * mean[g];
      next_var[g] = (1.0 - momentum) * prev_var[g] + momentum * var[g] * unbias;
    }
    if (ctx.has_output(Role::NEXT_RUNNING_MEAN)) ctx.store(Role::NEXT_RUNNING_MEAN, next_mean);
    if (ctx.has_output(Role::NEXT_RUNNING_VAR)) ctx.store(Role::NEXT_RUNNING_VAR, next_var);
  }
  return Status::ok();
}

Status run_backward(KernelContext& ctx) {
  const auto& a = ctx.node().as<ir::NormBwdAttrs>();
  const bool rms = a.kind == ir::NormKind::RmsNorm;
  const Dense dy = ctx.load(Role::DY);
  const Dense x = ctx.load(Role::X);
  const Groups gr = groups_of(a.kind, x.dim);
  const Dense scale = ctx.load_broadcast(Role::SCALE, x.dim);
  const Dense inv = ctx.load(Role::INV_VARIANCE);
  const Dense mean = rms ? Dense(stats_dims(a.kind, x.dim)) : ctx.load(Role::MEAN);
  const double m = static_cast<double>(gr.elements());
  const bool parallel = x.size() >= kParallelElements;

  Dense dx(x.dim), xhat(x.dim);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t g = 0; g < gr.count; ++g) {
    const double r = inv[g];
    double sum_g = 0.0, sum_gx = 0.0;
    gr.for_each(g, [&](int64_t i) {
      xhat[i] = (x[i] - mean[g]) * r;
      const double gi = dy[i] * scale[i];
      sum_g += gi;
      sum_gx += gi * xhat[i];
    });
    // rmsnorm has no mean subtraction, hence no <g> term.
    const double mean_g = rms ? 0.0 : sum_g / m;
    const double mean_gx = sum_gx / m;
    gr.for_each(g, [&](int64_t i) { dx[i] = r * (dy[i] * scale[i] - mean_g - xhat[i] * mean_gx); });
  }
  ctx.store(Role::DX, dx);
  if (ctx.has_output(Role::DSCALE)) {
    Dense dyx(x.dim);
    for (int64_t i = 0; i < x.size(); ++i) dyx[i] = dy[i] * xhat[i];
    ctx.store(Role::DSCALE, reduce_to(dyx, ctx.tensor(Role::DSCALE).dim));
  }
  if (ctx.has_output(Role::DBIAS))
    ctx.store(Role::DBIAS, reduce_to(dy, ctx.tensor(Role::DBIAS).dim));
  return Status::ok();
}

}  // namespace

Status run_norm(KernelContext& ctx) {
  if (ctx.node().kind() == ir::OpKind::NormFwd) return run_forward(ctx);
  return run_backward(ctx);
}

}  // namespace dnngraph::reference
