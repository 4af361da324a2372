// Reference FP8 attention with per-tensor scaling (sdpa_fp8, sdpa_fp8_backward), in fp64 from
// the FP8 inputs' exact values, rounding where cuDNN's graph stores a value in FP8: the
// forward's unnormalised probabilities P8 = fp8(exp(S - rowmax) * SCALE_S) (Q's type) before
// P.V, whose result is then divided by the row sum of exp(S - rowmax) (flash attention's order,
// which cuDNN's FP8 kernel follows on an H200: rounding P after normalising is up to 44% off
// there), and the backward's
// dS8 = fp8(dS * SCALE_DP) (DO's type) before dS.K and dS^T.Q. The step-by-step maths is in
// include/dnngraph/ir/ops.hpp (SdpaFp8Attrs); masks, padding and ALiBi as the sdpa reference
// (sdpa.cpp): query i attends keys [lo, hi), a row attending nothing gives O = 0 and
// STATS = -inf. AMAX_* are the largest magnitudes before the output scale (0 when empty).
// GQA/MQA: DK / DV sum the query heads sharing a K / V head before their descales.
#include <algorithm>
#include <cmath>
#include <optional>

#include "engines/reference/sdpa_problem.hpp"

namespace dnngraph::reference {
namespace {

struct Fp8Problem : SdpaMasking {
  double scale = 1.0;  // attn_scale * DESCALE_Q * DESCALE_K

  // Scaled, descaled score of (bi, h, i, j) from the dot product <q_i, k_j>.
  double score(double dot, int64_t h, int64_t i, int64_t j) const {
    return scale * dot + alibi_at(h, i, j);
  }
};

Result<Fp8Problem> read_problem(const KernelContext& ctx, const ir::SdpaOptions& a) {
  Fp8Problem p;
  DNNGRAPH_TRY(read_sdpa_masking(ctx, a, p));
  p.scale =
      sdpa_attn_scale(ctx, a, p.d) * ctx.scalar(Role::DESCALE_Q) * ctx.scalar(Role::DESCALE_K);
  return p;
}

double dot(const double* x, const double* y, int64_t n) {
  double r = 0.0;
  for (int64_t c = 0; c < n; ++c) r += x[c] * y[c];
  return r;
}

// out = x * factor, amax = max |x| (before the factor).
void scale_out(Dense& x, double factor, double& amax) {
  amax = 0.0;
  for (double& e : x.data) {
    amax = std::max(amax, std::abs(e));
    e *= factor;
  }
}

void store_amax(const KernelContext& ctx, Role role, double amax) {
  if (ctx.has_output(role)) ctx.store(role, Dense({1, 1, 1, 1}, amax));
}

Status run_forward(KernelContext& ctx) {
  auto pr = read_problem(ctx, ctx.node().as<ir::SdpaFp8Attrs>());
  if (!pr) return pr.status();
  const Fp8Problem& p = *pr;
  const Dense q = ctx.load(Role::Q), k = ctx.load(Role::K), v = ctx.load(Role::V);
  const DataType p_type = ctx.tensor(Role::Q).data_type;
  const double scale_s = ctx.scalar(Role::SCALE_S);
  const double descale_o = ctx.scalar(Role::DESCALE_S) * ctx.scalar(Role::DESCALE_V);
  Dense o({p.b, p.hq, p.sq, p.dv}), stats({p.b, p.hq, p.sq, 1}, -INFINITY);
  const int64_t gk = p.hq / p.hk, gv = p.hq / p.hv;
  std::vector<double> s(static_cast<size_t>(p.skv));
  double amax_s = 0.0;
  for (int64_t bi = 0; bi < p.b; ++bi)
    for (int64_t h = 0; h < p.hq; ++h) {
      const double* kb = &k.data[static_cast<size_t>((bi * p.hk + h / gk) * p.skv * p.d)];
      const double* vb = &v.data[static_cast<size_t>((bi * p.hv + h / gv) * p.skv * p.dv)];
      for (int64_t i = 0; i < p.sq; ++i) {
        const int64_t row = (bi * p.hq + h) * p.sq + i;
        const double* qi = &q.data[static_cast<size_t>(row * p.d)];
        double* oi = &o.data[static_cast<size_t>(row * p.dv)];
        const auto [lo, hi, mx] = p.scores(bi, i, s.data(), [&](int64_t j) {
          return p.score(dot(qi, kb + j * p.d, p.d), h, i, j);
        });
        if (hi <= lo || mx == -INFINITY) continue;
        double sum = 0.0;
        for (int64_t j = lo; j < hi; ++j) sum += std::exp(s[static_cast<size_t>(j)] - mx);
        stats[row] = mx + std::log(sum);
        for (int64_t j = lo; j < hi; ++j) {
          const double ej = std::exp(s[static_cast<size_t>(j)] - mx);
          amax_s = std::max(amax_s, ej / sum);
          const double p8 = round_to(p_type, ej * scale_s);
          for (int64_t c = 0; c < p.dv; ++c) oi[c] += p8 * vb[j * p.dv + c];
        }
        for (int64_t c = 0; c < p.dv; ++c) oi[c] /= sum;
      }
    }
  for (double& e : o.data) e *= descale_o;
  double amax_o = 0.0;
  scale_out(o, ctx.scalar(Role::SCALE_O), amax_o);
  ctx.store(Role::O, o);
  if (ctx.has_output(Role::STATS)) ctx.store(Role::STATS, stats);
  store_amax(ctx, Role::AMAX_S, amax_s);
  store_amax(ctx, Role::AMAX_O, amax_o);
  return Status::ok();
}

Status run_backward(KernelContext& ctx) {
  const auto& a = ctx.node().as<ir::SdpaFp8BwdAttrs>();
  auto pr = read_problem(ctx, a);
  if (!pr) return pr.status();
  const Fp8Problem& p = *pr;
  const Dense q = ctx.load(Role::Q), k = ctx.load(Role::K), v = ctx.load(Role::V);
  const Dense o = ctx.load(Role::O), d_o = ctx.load(Role::DO), stats = ctx.load(Role::STATS);
  const DataType p_type = ctx.tensor(Role::Q).data_type;
  const DataType ds_type = ctx.tensor(Role::DO).data_type;
  auto f = [&](Role r) { return ctx.scalar(r); };
  const double attn = sdpa_attn_scale(ctx, a, p.d);
  const double dscale_d = f(Role::DESCALE_DO) * f(Role::DESCALE_O);
  const double dscale_dp = f(Role::DESCALE_DO) * f(Role::DESCALE_V);
  const double scale_s = f(Role::SCALE_S), scale_dp = f(Role::SCALE_DP);
  Dense dq(q.dim), dk(k.dim), dv(v.dim);
  const int64_t gk = p.hq / p.hk, gv = p.hq / p.hv;
  std::vector<double> e(static_cast<size_t>(p.skv));
  double amax_dp = 0.0;
  for (int64_t bi = 0; bi < p.b; ++bi)
    for (int64_t h = 0; h < p.hq; ++h) {
      const int64_t kh = bi * p.hk + h / gk, vh = bi * p.hv + h / gv;
      const double* kb = &k.data[static_cast<size_t>(kh * p.skv * p.d)];
      const double* vb = &v.data[static_cast<size_t>(vh * p.skv * p.dv)];
      double* dkb = &dk.data[static_cast<size_t>(kh * p.skv * p.d)];
      double* dvb = &dv.data[static_cast<size_t>(vh * p.skv * p.dv)];
      for (int64_t i = 0; i < p.sq; ++i) {
        const int64_t row = (bi * p.hq + h) * p.sq + i;
        const double* qi = &q.data[static_cast<size_t>(row * p.d)];
        const double* doi = &d_o.data[static_cast<size_t>(row * p.dv)];
        const double* oi = &o.data[static_cast<size_t>(row * p.dv)];
        double* dqi = &dq.data[static_cast<size_t>(row * p.d)];
        const auto [lo, hi] = p.key_range(bi, i);
        if (hi <= lo || !std::isfinite(stats[row])) continue;
        const double d_i = dot(doi, oi, p.dv) * dscale_d;
        for (int64_t j = lo; j < hi; ++j) {
          const double ej = std::exp(p.score(dot(qi, kb + j * p.d, p.d), h, i, j) - stats[row]);
          const double p8 = round_to(p_type, ej * scale_s);
          for (int64_t c = 0; c < p.dv; ++c) dvb[j * p.dv + c] += p8 * doi[c];
          const double dpj = dot(doi, vb + j * p.dv, p.dv) * dscale_dp;
          const double ds = (dpj - d_i) * ej * attn;
          amax_dp = std::max(amax_dp, std::abs(ds));
          const double ds8 = round_to(ds_type, ds * scale_dp);
          for (int64_t c = 0; c < p.d; ++c) {
            dqi[c] += ds8 * kb[j * p.d + c];
            dkb[j * p.d + c] += ds8 * qi[c];
          }
        }
      }
    }
  double amax_dq = 0.0, amax_dk = 0.0, amax_dv = 0.0;
  for (double& x : dq.data) x *= f(Role::DESCALE_DP) * f(Role::DESCALE_K);
  for (double& x : dk.data) x *= f(Role::DESCALE_DP) * f(Role::DESCALE_Q);
  for (double& x : dv.data) x *= f(Role::DESCALE_S) * f(Role::DESCALE_DO);
  scale_out(dq, f(Role::SCALE_DQ), amax_dq);
  scale_out(dk, f(Role::SCALE_DK), amax_dk);
  scale_out(dv, f(Role::SCALE_DV), amax_dv);
  ctx.store(Role::DQ, dq);
  ctx.store(Role::DK, dk);
  ctx.store(Role::DV, dv);
  store_amax(ctx, Role::AMAX_DQ, amax_dq);
  store_amax(ctx, Role::AMAX_DK, amax_dk);
  store_amax(ctx, Role::AMAX_DV, amax_dv);
  store_amax(ctx, Role::AMAX_DP, amax_dp);
  return Status::ok();
}

}  // namespace

Status run_sdpa_fp8(KernelContext& ctx) { return run_forward(ctx); }
Status run_sdpa_fp8_backward(KernelContext& ctx) { return run_backward(ctx); }

}  // namespace dnngraph::reference
