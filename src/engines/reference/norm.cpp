// Reference kernels of the norm family: layernorm, rmsnorm, batchnorm, instancenorm and
// adalayernorm, forward (training and inference) and backward. Everything is computed in fp64;
// outputs are rounded once, on store.
//
// Semantics (x is one element, M the number of elements sharing one set of statistics):
//   layernorm  statistics per index of dim 0, over every other dim; MEAN / INV_VARIANCE have
//              dims [N,1,...,1] (in general: over the dims where SCALE is not 1, the cuDNN
//              frontend's rule; X [B,S,E] with SCALE [1,1,E] has stats [B,S,1]). inv_variance =
//              1/sqrt(var + eps) with the biased variance (divided by M); y = (x - mean) *
//              inv_variance * scale + bias.
//   rmsnorm    same grouping; inv_variance = 1/sqrt(mean(x^2) + eps); y = x * inv_variance *
//              scale (+ bias when BIAS is given). No MEAN.
//   batchnorm  statistics per channel (dim 1), over every other dim; stats dims [1,C,1,...,1].
//              Training normalizes with the biased variance and, when the running statistics
//              are wired, updates them as PyTorch does:
//                next_running_mean = (1 - momentum) * prev_running_mean + momentum * mean
//                next_running_var  = (1 - momentum) * prev_running_var + momentum * var * M/(M-1)
//              (the unbiased variance; with M == 1 the biased one, 0, is used).
//              Inference reads MEAN and INV_VARIANCE: y = (x - mean) * inv_variance * scale + bias.
//   instancenorm statistics per (sample, channel), over the spatial dims; stats [N,C,1,...];
//              otherwise as layernorm.
//   adalayernorm as layernorm over the dims 1.. where SCALE is not 1, with SCALE / BIAS that
//              may differ per sample ([N|1, ...]); stats: X's dims with those dims set to 1.
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

// The statistics' dims: X's dims with 1 on every normalized dim.
//   layer/rms norm: X's dims with 1 wherever SCALE is not 1 ([N,1,..] for SCALE [1, X dims
//   1..]); batchnorm: [1,C,1,..]; instancenorm: [N,C,1,..];
//   adalayernorm: X's dims with 1 wherever SCALE is not 1 (dims 1..).
std::vector<int64_t> stats_dims(ir::NormKind k, const std::vector<int64_t>& xdim,
                                const std::vector<int64_t>& scale_dim) {
  std::vector<int64_t> d(xdim.size(), 1);
  switch (k) {
    case ir::NormKind::LayerNorm:
    case ir::NormKind::RmsNorm:
      // [N,1,..] for SCALE [1, X dims 1..]; in general the dims where SCALE is not 1 are
      // normalized (the IR checked SCALE: dim 0 is 1, each other dim 1 or X's).
      d = xdim;
      for (size_t i = 1; i < d.size(); ++i)
        if (i >= scale_dim.size() || scale_dim[i] != 1) d[i] = 1;
      break;
    case ir::NormKind::BatchNorm:
      d[1] = xdim[1];
      break;
    case ir::NormKind::InstanceNorm:
      d[0] = xdim[0];
      d[1] = xdim[1];
      break;
    case ir::NormKind::AdaLayerNorm:
      d = xdim;
      for (size_t i = 1; i < d.size(); ++i)
        if (scale_dim[i] != 1) d[i] = 1;
      break;
  }
  return d;
}

// The elements of X (row major) grouped by the statistics they share: group g (the row-major
// index into the statistics' dims) holds members[first[g] .. first[g + 1]).
struct Groups {
  int64_t count = 0;
  std::vector<int64_t> first, members;
  int64_t elements() const { return count ? static_cast<int64_t>(members.size()) / count : 0; }
  template <class F>
  void for_each(int64_t g, F&& f) const {
    for (int64_t k = first[static_cast<size_t>(g)]; k < first[static_cast<size_t>(g) + 1]; ++k)
      f(members[static_cast<size_t>(k)]);
  }
};

Groups groups_of(const std::vector<int64_t>& xdim, const std::vector<int64_t>& sd) {
  Groups gr;
  gr.count = 1;
  for (int64_t d : sd) gr.count *= d;
  int64_t total = 1;
  for (int64_t d : xdim) total *= d;
  // The group of each element: the row-major index into sd, dims of 1 not counted.
  std::vector<int64_t> step = row_major_strides(sd);
  for (size_t k = 0; k < sd.size(); ++k)
    if (sd[k] == 1) step[k] = 0;
  std::vector<int64_t> group(static_cast<size_t>(total));
  std::vector<int64_t> idx(xdim.size(), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < total; ++i) {
    group[static_cast<size_t>(i)] = off;
    for (size_t k = xdim.size(); k-- > 0;) {
      if (++idx[k] < xdim[k]) {
        off += step[k];
        break;
      }
      off -= step[k] * (xdim[k] - 1);
      idx[k] = 0;
    }
  }
  // Counting sort of the elements by group.
  gr.first.assign(static_cast<size_t>(gr.count) + 1, 0);
  for (int64_t g : group) ++gr.first[static_cast<size_t>(g) + 1];
  for (size_t g = 1; g < gr.first.size(); ++g) gr.first[g] += gr.first[g - 1];
  std::vector<int64_t> next(gr.first.begin(), gr.first.end() - 1);
  gr.members.resize(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i)
    gr.members[static_cast<size_t>(next[static_cast<size_t>(group[static_cast<size_t>(i)])]++)] = i;
  return gr;
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
  const std::vector<int64_t> sd = stats_dims(a.kind, x.dim, ctx.tensor(Role::SCALE).dim);
  const Groups gr = groups_of(x.dim, sd);
  const Dense scale = ctx.load_broadcast(Role::SCALE, x.dim);
  const Dense bias =
      ctx.has_input(Role::BIAS) ? ctx.load_broadcast(Role::BIAS, x.dim) : Dense(x.dim);
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
  const std::vector<int64_t> sd = stats_dims(a.kind, x.dim, ctx.tensor(Role::SCALE).dim);
  const Groups gr = groups_of(x.dim, sd);
  const Dense scale = ctx.load_broadcast(Role::SCALE, x.dim);
  const Dense inv = ctx.load(Role::INV_VARIANCE);
  const Dense mean = rms ? Dense(sd) : ctx.load(Role::MEAN);
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

Status run_norm_forward(KernelContext& ctx) { return run_forward(ctx); }
Status run_norm_backward(KernelContext& ctx) { return run_backward(ctx); }

}  // namespace dnngraph::reference
