// Reference norm kernels (layernorm, rmsnorm, batchnorm; forward training / inference and
// backward) on hand-made nodes, against hand-worked values, naive fp64 loops written here and
// central finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <random>

#include "common/ref_harness.hpp"
#include "dnngraph/dnngraph.hpp"
#include "engines/reference/kernel.hpp"

namespace dnngraph::reference {
namespace {

// ------------------------------------------------------------------ kernel-level harness
// Ports with host storage, the hand-made node, expect_close and the graph helpers
// (graph_tensor, mark_output, build_and_run, poisoned): tests/common/ref_harness.hpp.
using namespace ref_test::hand_made;  // NOLINT(build/namespaces)

constexpr char kNode[] = "norm0";
using Case = NamedCase<kNode>;

// ------------------------------------------------------------------ naive norms
// X is [N, C, H, W]. A group is the list of element indices that share statistics; `pidx`
// maps an element to its SCALE / BIAS index.
struct Layout {
  int64_t n, c, h, w;
  int64_t idx(int64_t a, int64_t b, int64_t y, int64_t x) const {
    return ((a * c + b) * h + y) * w + x;
  }
  int64_t size() const { return n * c * h * w; }
};

struct Grouping {
  std::vector<std::vector<int64_t>> groups;
  std::vector<int64_t> pidx;  // element -> scale/bias index
};

// layer / rms: per sample, scale [1,C,H,W]; batch: per channel, scale [1,C,1,1].
Grouping grouping(ir::NormKind kind, const Layout& l) {
  Grouping g;
  const bool bn = kind == ir::NormKind::BatchNorm;
  g.groups.resize(static_cast<size_t>(bn ? l.c : l.n));
  g.pidx.resize(static_cast<size_t>(l.size()));
  for (int64_t a = 0; a < l.n; ++a)
    for (int64_t b = 0; b < l.c; ++b)
      for (int64_t y = 0; y < l.h; ++y)
        for (int64_t x = 0; x < l.w; ++x) {
          const int64_t i = l.idx(a, b, y, x);
          g.groups[static_cast<size_t>(bn ? b : a)].push_back(i);
          g.pidx[static_cast<size_t>(i)] = bn ? b : (b * l.h + y) * l.w + x;
        }
  return g;
}

struct FwdRef {
  std::vector<double> y, mean, inv, var_biased;
};

FwdRef naive_forward(ir::NormKind kind, const Grouping& g, const std::vector<double>& x,
                     const std::vector<double>& scale, const std::vector<double>& bias,
                     double eps) {
  FwdRef r;
  r.y.resize(x.size());
  for (const auto& grp : g.groups) {
    const double m = static_cast<double>(grp.size());
    double mu = 0.0, var = 0.0;
    if (kind != ir::NormKind::RmsNorm) {
      for (int64_t i : grp) mu += x[i] / m;
      for (int64_t i : grp) var += (x[i] - mu) * (x[i] - mu) / m;
    } else {
      for (int64_t i : grp) var += x[i] * x[i] / m;
    }
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t i : grp) {
      const int64_t p = g.pidx[i];
      r.y[i] = (x[i] - mu) * inv * scale[p] + (bias.empty() ? 0.0 : bias[p]);
    }
    r.mean.push_back(mu);
    r.inv.push_back(inv);
    r.var_biased.push_back(var);
  }
  return r;
}

struct BwdRef {
  std::vector<double> dx, dscale, dbias;
};

// Through the explicit Jacobian of xhat: O(M^2) per group, independent of the kernel's
// closed form. layer/batch: dxhat_j/dx_i = r (delta_ij - 1/M) - r xhat_i xhat_j / M;
// rms: dxhat_j/dx_i = r delta_ij - r xhat_i xhat_j / M.
BwdRef naive_backward(ir::NormKind kind, const Grouping& g, const std::vector<double>& dy,
                      const std::vector<double>& x, const std::vector<double>& scale,
                      const std::vector<double>& mean, const std::vector<double>& inv,
                      size_t params) {
  BwdRef r;
  r.dx.assign(x.size(), 0.0);
  r.dscale.assign(params, 0.0);
  r.dbias.assign(params, 0.0);
  for (size_t gi = 0; gi < g.groups.size(); ++gi) {
    const auto& grp = g.groups[gi];
    const double m = static_cast<double>(grp.size());
    const double mu = kind == ir::NormKind::RmsNorm ? 0.0 : mean[gi], rr = inv[gi];
    const double center = kind == ir::NormKind::RmsNorm ? 0.0 : 1.0 / m;
    for (int64_t i : grp) {
      const double xi = (x[i] - mu) * rr;
      double acc = 0.0;
      for (int64_t j : grp) {
        const double xj = (x[j] - mu) * rr;
        const double d = rr * ((i == j ? 1.0 : 0.0) - center) - rr * xi * xj / m;
        acc += dy[j] * scale[g.pidx[j]] * d;
      }
      r.dx[i] = acc;
      r.dscale[g.pidx[i]] += dy[i] * xi;
      r.dbias[g.pidx[i]] += dy[i];
    }
  }
  return r;
}

std::vector<int64_t> stats_dims(ir::NormKind kind, const Layout& l) {
  return kind == ir::NormKind::BatchNorm ? std::vector<int64_t>{1, l.c, 1, 1}
                                         : std::vector<int64_t>{l.n, 1, 1, 1};
}
std::vector<int64_t> param_dims(ir::NormKind kind, const Layout& l) {
  return kind == ir::NormKind::BatchNorm ? std::vector<int64_t>{1, l.c, 1, 1}
                                         : std::vector<int64_t>{1, l.c, l.h, l.w};
}

// ------------------------------------------------------------------ tests
TEST(RefNorm, LayerNormHandWorked) {
  // One row [1, 2, 3, 4]: mean 2.5, biased variance 1.25.
  Case c(ir::NormFwdAttrs{ir::NormKind::LayerNorm, NormForwardPhase::Training});
  c.input(Role::X, make_buf("x", {1, 4}, DataType::Float)).set({1, 2, 3, 4});
  c.input(Role::SCALE, make_buf("scale", {1, 4}, DataType::Float)).set({1, 1, 2, 2});
  c.input(Role::BIAS, make_buf("bias", {1, 4}, DataType::Float)).set({0, 1, 0, -1});
  c.input(Role::EPSILON, make_scalar("eps", 0.0));
  c.output(Role::Y, make_buf("y", {1, 4}, DataType::Double));
  c.output(Role::MEAN, make_buf("mean", {1, 1}, DataType::Double));
  c.output(Role::INV_VARIANCE, make_buf("inv", {1, 1}, DataType::Double));
  Status s = c.run();
  ASSERT_TRUE(s.is_ok()) << s.message();
  const double r = 1.0 / std::sqrt(1.25);
  expect_close(c.result(Role::Y), {-1.5 * r, -0.5 * r + 1.0, 2.0 * 0.5 * r, 2.0 * 1.5 * r - 1.0},
               1e-14, "Y");
  expect_close(c.result(Role::MEAN), {2.5}, 1e-14, "MEAN");
  expect_close(c.result(Role::INV_VARIANCE), {r}, 1e-14, "INV_VARIANCE");
}

TEST(RefNorm, RmsNormHandWorked) {
  // [3, 4]: mean square 12.5, eps 0.5 -> inv = 1/sqrt(13).
  Case c(ir::NormFwdAttrs{ir::NormKind::RmsNorm, NormForwardPhase::Training});
  c.input(Role::X, make_buf("x", {1, 2}, DataType::Float)).set({3, 4});
  c.input(Role::SCALE, make_buf("scale", {1, 2}, DataType::Float)).set({2, -1});
  c.input(Role::EPSILON, make_scalar("eps", 0.5));
  c.output(Role::Y, make_buf("y", {1, 2}, DataType::Double));
  c.output(Role::INV_VARIANCE, make_buf("inv", {1, 1}, DataType::Double));
  ASSERT_TRUE(c.run().is_ok());
  const double r = 1.0 / std::sqrt(13.0);
  expect_close(c.result(Role::Y), {6 * r, -4 * r}, 1e-14, "Y");
  expect_close(c.result(Role::INV_VARIANCE), {r}, 1e-14, "INV_VARIANCE");
}

// Forward training of every kind against the naive loops, with a non-packed (NHWC) X.
void forward_case(ir::NormKind kind, DataType io, bool with_bias, uint32_t seed) {
  SCOPED_TRACE(std::string(ir::norm_kind_name(kind)) + " " + std::string(data_type_name(io)));
  std::mt19937 gen(seed);
  const Layout l{3, 4, 2, 3};
  const std::vector<int64_t> xd{l.n, l.c, l.h, l.w};
  const std::vector<int64_t> nhwc{l.h * l.w * l.c, 1, l.w * l.c, l.c};
  Case c(ir::NormFwdAttrs{kind, NormForwardPhase::Training});
  const auto x = c.input(Role::X, make_buf("x", xd, io, nhwc)).fill(gen, -2.0, 3.0);
  const auto scale =
      c.input(Role::SCALE, make_buf("scale", param_dims(kind, l), io)).fill(gen, 0.5, 2);
  std::vector<double> bias;
  if (with_bias)
    bias = c.input(Role::BIAS, make_buf("bias", param_dims(kind, l), io)).fill(gen, -1, 1);
  const double eps = 1e-3, momentum = 0.25;
  c.input(Role::EPSILON, make_scalar("eps", eps));
  std::vector<double> prev_mean, prev_var;
  const auto sd = stats_dims(kind, l);
  if (kind == ir::NormKind::BatchNorm) {
    c.input(Role::MOMENTUM, make_scalar("momentum", momentum));
    prev_mean =
        c.input(Role::PREV_RUNNING_MEAN, make_buf("rm", sd, DataType::Float)).fill(gen, -1, 1);
    prev_var =
        c.input(Role::PREV_RUNNING_VAR, make_buf("rv", sd, DataType::Float)).fill(gen, 0.5, 2);
    c.output(Role::NEXT_RUNNING_MEAN, make_buf("nrm", sd, DataType::Float));
    c.output(Role::NEXT_RUNNING_VAR, make_buf("nrv", sd, DataType::Float));
  }
  c.output(Role::Y, make_buf("y", xd, io, nhwc));
  if (kind != ir::NormKind::RmsNorm) c.output(Role::MEAN, make_buf("mean", sd, DataType::Float));
  c.output(Role::INV_VARIANCE, make_buf("inv", sd, DataType::Float));
  Status s = c.run();
  ASSERT_TRUE(s.is_ok()) << s.message();

  const Grouping g = grouping(kind, l);
  const FwdRef r = naive_forward(kind, g, x, scale, bias, eps);
  expect_close(c.result(Role::Y), r.y, tol_of(io), "Y");
  if (kind != ir::NormKind::RmsNorm) expect_close(c.result(Role::MEAN), r.mean, 1e-5, "MEAN");
  expect_close(c.result(Role::INV_VARIANCE), r.inv, 1e-5, "INV_VARIANCE");
  if (kind == ir::NormKind::BatchNorm) {
    const double m = static_cast<double>(l.n * l.h * l.w);
    std::vector<double> nm, nv;
    for (size_t i = 0; i < r.mean.size(); ++i) {
      nm.push_back((1 - momentum) * prev_mean[i] + momentum * r.mean[i]);
      nv.push_back((1 - momentum) * prev_var[i] + momentum * r.var_biased[i] * m / (m - 1));
    }
    expect_close(c.result(Role::NEXT_RUNNING_MEAN), nm, 1e-5, "NEXT_RUNNING_MEAN");
    expect_close(c.result(Role::NEXT_RUNNING_VAR), nv, 1e-5, "NEXT_RUNNING_VAR");
  }
}

TEST(RefNorm, ForwardTrainingMatchesNaive) {
  forward_case(ir::NormKind::LayerNorm, DataType::Float, true, 1);
  forward_case(ir::NormKind::RmsNorm, DataType::Float, false, 2);
  forward_case(ir::NormKind::RmsNorm, DataType::Float, true, 3);
  forward_case(ir::NormKind::BatchNorm, DataType::Float, true, 4);
}

TEST(RefNorm, ForwardLowPrecisionStorage) {
  forward_case(ir::NormKind::LayerNorm, DataType::BFloat16, true, 5);
  forward_case(ir::NormKind::RmsNorm, DataType::Half, false, 6);
  forward_case(ir::NormKind::BatchNorm, DataType::BFloat16, true, 7);
}

TEST(RefNorm, LayerNormInferenceWritesOnlyY) {
  std::mt19937 gen(8);
  const Layout l{2, 3, 2, 2};
  Case c(ir::NormFwdAttrs{ir::NormKind::LayerNorm, NormForwardPhase::Inference});
  const auto x = c.input(Role::X, make_buf("x", {2, 3, 2, 2}, DataType::Float)).fill(gen, -1, 1);
  const auto s =
      c.input(Role::SCALE, make_buf("s", {1, 3, 2, 2}, DataType::Float)).fill(gen, -1, 1);
  const auto b = c.input(Role::BIAS, make_buf("b", {1, 3, 2, 2}, DataType::Float)).fill(gen, -1, 1);
  c.input(Role::EPSILON, make_scalar("eps", 1e-5));
  c.output(Role::Y, make_buf("y", {2, 3, 2, 2}, DataType::Float));
  ASSERT_TRUE(c.run().is_ok());
  const Grouping g = grouping(ir::NormKind::LayerNorm, l);
  expect_close(c.result(Role::Y), naive_forward(ir::NormKind::LayerNorm, g, x, s, b, 1e-5).y, 1e-5,
               "Y");
}

TEST(RefNorm, BatchNormInferenceUsesGivenStatistics) {
  std::mt19937 gen(9);
  const Layout l{2, 3, 2, 2};
  Case c(ir::NormFwdAttrs{ir::NormKind::BatchNorm, NormForwardPhase::Inference});
  const auto x = c.input(Role::X, make_buf("x", {2, 3, 2, 2}, DataType::Float)).fill(gen, -1, 1);
  const auto mean =
      c.input(Role::MEAN, make_buf("m", {1, 3, 1, 1}, DataType::Float)).fill(gen, -1, 1);
  const auto inv =
      c.input(Role::INV_VARIANCE, make_buf("iv", {1, 3, 1, 1}, DataType::Float)).fill(gen, 0.5, 2);
  const auto s =
      c.input(Role::SCALE, make_buf("s", {1, 3, 1, 1}, DataType::Float)).fill(gen, -1, 1);
  const auto b = c.input(Role::BIAS, make_buf("b", {1, 3, 1, 1}, DataType::Float)).fill(gen, -1, 1);
  c.output(Role::Y, make_buf("y", {2, 3, 2, 2}, DataType::Float));
  Status st = c.run();
  ASSERT_TRUE(st.is_ok()) << st.message();
  std::vector<double> want(x.size());
  for (int64_t a = 0; a < l.n; ++a)
    for (int64_t ch = 0; ch < l.c; ++ch)
      for (int64_t e = 0; e < l.h * l.w; ++e) {
        const int64_t i = (a * l.c + ch) * l.h * l.w + e;
        want[i] = (x[i] - mean[ch]) * inv[ch] * s[ch] + b[ch];
      }
  expect_close(c.result(Role::Y), want, 1e-5, "Y");
}

// Backward of every kind against the Jacobian loops.
void backward_case(ir::NormKind kind, DataType io, uint32_t seed) {
  SCOPED_TRACE(std::string(ir::norm_kind_name(kind)) + " " + std::string(data_type_name(io)));
  std::mt19937 gen(seed);
  const Layout l{3, 2, 2, 3};
  const std::vector<int64_t> xd{l.n, l.c, l.h, l.w};
  const Grouping g = grouping(kind, l);
  Case c(ir::NormBwdAttrs{kind});
  const auto dy = c.input(Role::DY, make_buf("dy", xd, io)).fill(gen, -1, 1);
  const auto x = c.input(Role::X, make_buf("x", xd, io)).fill(gen, -2, 2);
  const auto pd = param_dims(kind, l);
  const auto scale = c.input(Role::SCALE, make_buf("scale", pd, io)).fill(gen, 0.5, 2);
  // Statistics as the forward would have produced them (stored in fp32).
  const FwdRef f = naive_forward(kind, g, x, scale, {}, 1e-3);
  const auto sd = stats_dims(kind, l);
  std::vector<double> mean;
  if (kind != ir::NormKind::RmsNorm) {
    Buf& mb = c.input(Role::MEAN, make_buf("mean", sd, DataType::Float));
    mb.set(f.mean);
    mean = mb.get();
  }
  Buf& ib = c.input(Role::INV_VARIANCE, make_buf("inv", sd, DataType::Float));
  ib.set(f.inv);
  const auto inv = ib.get();
  c.output(Role::DX, make_buf("dx", xd, io));
  c.output(Role::DSCALE, make_buf("dscale", pd, io));
  c.output(Role::DBIAS, make_buf("dbias", pd, io));
  Status s = c.run();
  ASSERT_TRUE(s.is_ok()) << s.message();
  const BwdRef r = naive_backward(kind, g, dy, x, scale, mean, inv, scale.size());
  expect_close(c.result(Role::DX), r.dx, tol_of(io), "DX");
  expect_close(c.result(Role::DSCALE), r.dscale, tol_of(io), "DSCALE");
  expect_close(c.result(Role::DBIAS), r.dbias, tol_of(io), "DBIAS");
}

TEST(RefNorm, BackwardMatchesJacobian) {
  backward_case(ir::NormKind::LayerNorm, DataType::Float, 11);
  backward_case(ir::NormKind::RmsNorm, DataType::Float, 12);
  backward_case(ir::NormKind::BatchNorm, DataType::Float, 13);
  backward_case(ir::NormKind::LayerNorm, DataType::BFloat16, 14);
  backward_case(ir::NormKind::BatchNorm, DataType::Half, 15);
}

// Backward against central finite differences of the forward kernel itself (fp64 storage):
// loss = sum(dy * y(x, scale, bias)).
void finite_difference_case(ir::NormKind kind, uint32_t seed) {
  SCOPED_TRACE(std::string(ir::norm_kind_name(kind)));
  std::mt19937 gen(seed);
  const Layout l{2, 3, 2, 2};
  const std::vector<int64_t> xd{l.n, l.c, l.h, l.w}, pd = param_dims(kind, l);
  const std::vector<int64_t> sd = stats_dims(kind, l);
  const double eps = 1e-2;
  auto rnd = [&](size_t n, double lo, double hi) {
    std::uniform_real_distribution<double> d(lo, hi);
    std::vector<double> v(n);
    for (double& e : v) e = d(gen);
    return v;
  };
  const size_t np = static_cast<size_t>(pd[1] * pd[2] * pd[3]);
  const auto x = rnd(static_cast<size_t>(l.size()), -2, 2), dy = rnd(x.size(), -1, 1);
  const auto scale = rnd(np, 0.5, 2), bias = rnd(np, -1, 1);

  struct Fwd {
    std::vector<double> y, mean, inv;
  };
  auto forward = [&](const std::vector<double>& xv, const std::vector<double>& sv,
                     const std::vector<double>& bv) {
    Case c(ir::NormFwdAttrs{kind, NormForwardPhase::Training});
    c.input(Role::X, make_buf("x", xd, DataType::Double)).set(xv);
    c.input(Role::SCALE, make_buf("scale", pd, DataType::Double)).set(sv);
    c.input(Role::BIAS, make_buf("bias", pd, DataType::Double)).set(bv);
    c.input(Role::EPSILON, make_scalar("eps", eps));
    c.output(Role::Y, make_buf("y", xd, DataType::Double));
    if (kind != ir::NormKind::RmsNorm) c.output(Role::MEAN, make_buf("m", sd, DataType::Double));
    c.output(Role::INV_VARIANCE, make_buf("iv", sd, DataType::Double));
    EXPECT_TRUE(c.run().is_ok());
    return Fwd{c.result(Role::Y),
               kind != ir::NormKind::RmsNorm ? c.result(Role::MEAN) : std::vector<double>{},
               c.result(Role::INV_VARIANCE)};
  };
  auto loss = [&](const std::vector<double>& xv, const std::vector<double>& sv,
                  const std::vector<double>& bv) {
    const auto y = forward(xv, sv, bv).y;
    double acc = 0.0;
    for (size_t i = 0; i < y.size(); ++i) acc += dy[i] * y[i];
    return acc;
  };
  auto numeric = [&](std::vector<double> v,
                     const std::function<double(const std::vector<double>&)>& f) {
    std::vector<double> grad(v.size());
    const double h = 1e-5;
    for (size_t i = 0; i < v.size(); ++i) {
      const double keep = v[i];
      v[i] = keep + h;
      const double up = f(v);
      v[i] = keep - h;
      const double down = f(v);
      v[i] = keep;
      grad[i] = (up - down) / (2 * h);
    }
    return grad;
  };

  const Fwd f = forward(x, scale, bias);
  Case c(ir::NormBwdAttrs{kind});
  c.input(Role::DY, make_buf("dy", xd, DataType::Double)).set(dy);
  c.input(Role::X, make_buf("x", xd, DataType::Double)).set(x);
  c.input(Role::SCALE, make_buf("scale", pd, DataType::Double)).set(scale);
  if (kind != ir::NormKind::RmsNorm)
    c.input(Role::MEAN, make_buf("m", sd, DataType::Double)).set(f.mean);
  c.input(Role::INV_VARIANCE, make_buf("iv", sd, DataType::Double)).set(f.inv);
  c.output(Role::DX, make_buf("dx", xd, DataType::Double));
  c.output(Role::DSCALE, make_buf("ds", pd, DataType::Double));
  c.output(Role::DBIAS, make_buf("db", pd, DataType::Double));
  ASSERT_TRUE(c.run().is_ok());
  expect_close(c.result(Role::DX), numeric(x, [&](const auto& v) { return loss(v, scale, bias); }),
               1e-6, "DX");
  expect_close(c.result(Role::DSCALE),
               numeric(scale, [&](const auto& v) { return loss(x, v, bias); }), 1e-6, "DSCALE");
  expect_close(c.result(Role::DBIAS),
               numeric(bias, [&](const auto& v) { return loss(x, scale, v); }), 1e-6, "DBIAS");
}

TEST(RefNorm, BackwardMatchesFiniteDifferences) {
  finite_difference_case(ir::NormKind::LayerNorm, 21);
  finite_difference_case(ir::NormKind::RmsNorm, 22);
  finite_difference_case(ir::NormKind::BatchNorm, 23);
}

// Large enough for the kernel's threaded path; backward checked against the closed form
// (the Jacobian loops would be too slow here).
TEST(RefNorm, ThreadedPathMatchesNaive) {
  for (ir::NormKind kind :
       {ir::NormKind::LayerNorm, ir::NormKind::RmsNorm, ir::NormKind::BatchNorm}) {
    SCOPED_TRACE(std::string(ir::norm_kind_name(kind)));
    std::mt19937 gen(32);
    const Layout l{4, 16, 32, 40};  // 81920 elements
    const std::vector<int64_t> xd{l.n, l.c, l.h, l.w}, pd = param_dims(kind, l);
    const Grouping g = grouping(kind, l);
    Case fwd(ir::NormFwdAttrs{kind, NormForwardPhase::Training});
    const auto x = fwd.input(Role::X, make_buf("x", xd, DataType::Float)).fill(gen, -2, 2);
    const auto sc = fwd.input(Role::SCALE, make_buf("s", pd, DataType::Float)).fill(gen, 0.5, 2);
    // Layer and batch norm take a BIAS; training outputs the statistics (the IR's rules).
    std::vector<double> bias;
    if (kind != ir::NormKind::RmsNorm)
      bias = fwd.input(Role::BIAS, make_buf("b", pd, DataType::Float)).fill(gen, -1, 1);
    fwd.input(Role::EPSILON, make_scalar("eps", 1e-4));
    fwd.output(Role::Y, make_buf("y", xd, DataType::Float));
    if (kind != ir::NormKind::RmsNorm)
      fwd.output(Role::MEAN, make_buf("m", stats_dims(kind, l), DataType::Float));
    fwd.output(Role::INV_VARIANCE, make_buf("iv", stats_dims(kind, l), DataType::Float));
    ASSERT_OK(fwd.run());
    const FwdRef r = naive_forward(kind, g, x, sc, bias, 1e-4);
    expect_close(fwd.result(Role::Y), r.y, 1e-5, "Y");

    Case bwd(ir::NormBwdAttrs{kind});
    const auto dy = bwd.input(Role::DY, make_buf("dy", xd, DataType::Float)).fill(gen, -1, 1);
    bwd.input(Role::X, make_buf("x", xd, DataType::Float)).set(x);
    bwd.input(Role::SCALE, make_buf("s", pd, DataType::Float)).set(sc);
    const auto sd = stats_dims(kind, l);
    if (kind != ir::NormKind::RmsNorm)
      bwd.input(Role::MEAN, make_buf("m", sd, DataType::Double)).set(r.mean);
    bwd.input(Role::INV_VARIANCE, make_buf("iv", sd, DataType::Double)).set(r.inv);
    bwd.output(Role::DX, make_buf("dx", xd, DataType::Float));
    bwd.output(Role::DSCALE, make_buf("ds", pd, DataType::Float));
    ASSERT_TRUE(bwd.run().is_ok());
    std::vector<double> dx(x.size());
    for (size_t gi = 0; gi < g.groups.size(); ++gi) {
      const auto& grp = g.groups[gi];
      const double mu = kind == ir::NormKind::RmsNorm ? 0.0 : r.mean[gi], inv = r.inv[gi];
      double sg = 0.0, sgx = 0.0;
      for (int64_t i : grp) {
        sg += dy[i] * sc[g.pidx[i]];
        sgx += dy[i] * sc[g.pidx[i]] * (x[i] - mu) * inv;
      }
      const double m = static_cast<double>(grp.size());
      for (int64_t i : grp)
        dx[i] = inv * (dy[i] * sc[g.pidx[i]] - (kind == ir::NormKind::RmsNorm ? 0.0 : sg / m) -
                       (x[i] - mu) * inv * sgx / m);
    }
    expect_close(bwd.result(Role::DX), dx, 1e-5, "DX");
  }
}

TEST(RefNorm, CheckNamesTheTensor) {
  Case c(ir::NormFwdAttrs{ir::NormKind::LayerNorm, NormForwardPhase::Training});
  c.input(Role::X, make_buf("x", {2, 3, 4}, DataType::Float));
  c.input(Role::SCALE, make_buf("gamma", {1, 3, 5}, DataType::Float));
  c.input(Role::EPSILON, make_scalar("eps", 1e-5));
  c.output(Role::Y, make_buf("y", {2, 3, 4}, DataType::Float));
  Status s = ref_test::validate_node(c.node);
  EXPECT_EQ(s.code(), ErrorCode::InvalidGraph);
  EXPECT_NE(s.message().find("'gamma'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("norm0"), std::string::npos) << s.message();

  Case b(ir::NormFwdAttrs{ir::NormKind::BatchNorm, NormForwardPhase::Inference});
  b.input(Role::X, make_buf("x", {2, 3, 4}, DataType::Float));
  b.input(Role::SCALE, make_buf("gamma", {1, 3, 1}, DataType::Float));
  b.input(Role::BIAS, make_buf("beta", {1, 3, 1}, DataType::Float));
  b.output(Role::Y, make_buf("y", {2, 3, 4}, DataType::Float));
  s = ref_test::validate_node(b.node);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("MEAN"), std::string::npos) << s.message();
}

// ------------------------------------------------------------------ through dnngraph::Graph
// Layernorm training forward, then its backward, each as a graph on the CPU handle (bf16 io).
TEST(RefNormGraph, LayerNormForwardAndBackward) {
  std::mt19937 gen(300);
  const Layout l{4, 8, 2, 2};
  const std::vector<int64_t> xd{l.n, l.c, l.h, l.w}, pd = param_dims(ir::NormKind::LayerNorm, l);
  const std::vector<int64_t> sd = stats_dims(ir::NormKind::LayerNorm, l);
  const DataType io = DataType::BFloat16;
  Buf xb = make_buf("x", xd, io), sb = make_buf("scale", pd, io), bb = make_buf("bias", pd, io);
  const auto x = xb.fill(gen, -2, 2), scale = sb.fill(gen, 0.5, 2), bias = bb.fill(gen, -1, 1);

  Graph fwd;
  fwd.set_io_data_type(io).set_compute_data_type(DataType::Float);
  auto out =
      fwd.layernorm(graph_tensor(fwd, xb, 1), graph_tensor(fwd, sb, 2), graph_tensor(fwd, bb, 3),
                    fwd.scalar(ir::Scalar::of_float(1e-5), "eps"), NormForwardPhase::Training);
  Buf yb = poisoned("y", xd, io), mb = poisoned("mean", sd, DataType::Float),
      ib = poisoned("inv", sd, DataType::Float);
  mark_output(out[0], yb, 4);
  mark_output(out[1], mb, 5);
  mark_output(out[2], ib, 6);
  Status st = build_and_run(fwd, {{1, xb.data()},
                                  {2, sb.data()},
                                  {3, bb.data()},
                                  {4, yb.data()},
                                  {5, mb.data()},
                                  {6, ib.data()}});
  ASSERT_TRUE(st.is_ok()) << st.message();
  const Grouping g = grouping(ir::NormKind::LayerNorm, l);
  const FwdRef r = naive_forward(ir::NormKind::LayerNorm, g, x, scale, bias, 1e-5);
  expect_close(yb.get(), r.y, tol_of(io), "Y");
  expect_close(mb.get(), r.mean, 1e-5, "MEAN");
  expect_close(ib.get(), r.inv, 1e-5, "INV_VARIANCE");

  Graph bwd;
  bwd.set_io_data_type(io).set_compute_data_type(DataType::Float);
  Buf dyb = make_buf("dy", xd, io);
  const auto dy = dyb.fill(gen, -1, 1);
  auto grads = bwd.layernorm_backward(graph_tensor(bwd, dyb, 7), graph_tensor(bwd, xb, 1),
                                      graph_tensor(bwd, sb, 2), graph_tensor(bwd, mb, 5),
                                      graph_tensor(bwd, ib, 6));
  Buf dxb = poisoned("dx", xd, io), dsb = poisoned("dscale", pd, io),
      dbb = poisoned("dbias", pd, io);
  mark_output(grads[0], dxb, 8);
  mark_output(grads[1], dsb, 9);
  mark_output(grads[2], dbb, 10);
  st = build_and_run(bwd, {{7, dyb.data()},
                           {1, xb.data()},
                           {2, sb.data()},
                           {5, mb.data()},
                           {6, ib.data()},
                           {8, dxb.data()},
                           {9, dsb.data()},
                           {10, dbb.data()}});
  ASSERT_TRUE(st.is_ok()) << st.message();
  const BwdRef br =
      naive_backward(ir::NormKind::LayerNorm, g, dy, x, scale, mb.get(), ib.get(), scale.size());
  expect_close(dxb.get(), br.dx, tol_of(io), "DX");
  expect_close(dsb.get(), br.dscale, tol_of(io), "DSCALE");
  expect_close(dbb.get(), br.dbias, tol_of(io), "DBIAS");
}

// Batchnorm training with running statistics as a graph (fp32).
TEST(RefNormGraph, BatchNormTrainingWithRunningStats) {
  std::mt19937 gen(301);
  const Layout l{4, 3, 3, 2};
  const std::vector<int64_t> xd{l.n, l.c, l.h, l.w}, pd{1, l.c, 1, 1};
  const DataType io = DataType::Float;
  Buf xb = make_buf("x", xd, io), sb = make_buf("scale", pd, io), bb = make_buf("bias", pd, io);
  Buf rmb = make_buf("running_mean", pd, io), rvb = make_buf("running_var", pd, io);
  const auto x = xb.fill(gen, -2, 2), scale = sb.fill(gen, 0.5, 2), bias = bb.fill(gen, -1, 1);
  const auto rm = rmb.fill(gen, -1, 1), rv = rvb.fill(gen, 0.5, 1.5);
  Graph g;
  g.set_io_data_type(io).set_compute_data_type(DataType::Float);
  auto out = g.batchnorm(graph_tensor(g, xb, 1), graph_tensor(g, sb, 2), graph_tensor(g, bb, 3),
                         graph_tensor(g, rmb, 4), graph_tensor(g, rvb, 5),
                         g.scalar(ir::Scalar::of_float(1e-3), "eps"),
                         g.scalar(ir::Scalar::of_float(0.1), "momentum"));
  Buf yb = poisoned("y", xd, io), mb = poisoned("mean", pd, io), ib = poisoned("inv", pd, io),
      nmb = poisoned("next_mean", pd, io), nvb = poisoned("next_var", pd, io);
  mark_output(out[0], yb, 6);
  mark_output(out[1], mb, 7);
  mark_output(out[2], ib, 8);
  mark_output(out[3], nmb, 9);
  mark_output(out[4], nvb, 10);
  Status st = build_and_run(g, {{1, xb.data()},
                                {2, sb.data()},
                                {3, bb.data()},
                                {4, rmb.data()},
                                {5, rvb.data()},
                                {6, yb.data()},
                                {7, mb.data()},
                                {8, ib.data()},
                                {9, nmb.data()},
                                {10, nvb.data()}});
  ASSERT_TRUE(st.is_ok()) << st.message();
  const FwdRef r = naive_forward(ir::NormKind::BatchNorm, grouping(ir::NormKind::BatchNorm, l), x,
                                 scale, bias, 1e-3);
  expect_close(yb.get(), r.y, 1e-5, "Y");
  expect_close(mb.get(), r.mean, 1e-5, "MEAN");
  expect_close(ib.get(), r.inv, 1e-5, "INV_VARIANCE");
  const double m = static_cast<double>(l.n * l.h * l.w);
  std::vector<double> nm, nv;
  for (size_t c = 0; c < rm.size(); ++c) {
    nm.push_back(0.9 * rm[c] + 0.1 * r.mean[c]);
    nv.push_back(0.9 * rv[c] + 0.1 * r.var_biased[c] * m / (m - 1));
  }
  expect_close(nmb.get(), nm, 1e-5, "NEXT_RUNNING_MEAN");
  expect_close(nvb.get(), nv, 1e-5, "NEXT_RUNNING_VAR");
}

}  // namespace
}  // namespace dnngraph::reference
