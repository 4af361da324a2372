// Reference pointwise: OUT_0 = round_compute(f(IN_0[, IN_1[, IN_2]])), inputs broadcast to
// the output's dims. Backward modes take IN_0 = dy and IN_1 = x (the forward input).
#include <cmath>
#include <limits>
#include <numbers>

#include "engines/reference/kernel.hpp"

namespace dnngraph::reference {
namespace {

using PM = PointwiseMode;

double sigmoid(double x) {
  // Split by sign so exp never overflows.
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}

// log(1 + e^z) without overflow.
double log1pexp(double z) { return std::max(z, 0.0) + std::log1p(std::exp(-std::fabs(z))); }

constexpr double kSqrt2OverPi = 0.7978845608028654;  // sqrt(2/pi)
constexpr double kGeluTanhC = 0.044715;

// Parameters of the node's mode, with their defaults filled in.
struct Params {
  PM mode;
  double lower, upper, slope, alpha, softplus_beta, swish_beta;
};

Params params_of(const ir::PointwiseAttrs& a) {
  return {a.mode,
          a.relu_lower_clip.value_or(0.0),
          a.relu_upper_clip.value_or(std::numeric_limits<double>::infinity()),
          a.relu_lower_clip_slope.value_or(0.0),
          a.elu_alpha.value_or(1.0),
          a.softplus_beta.value_or(1.0),
          a.swish_beta.value_or(1.0)};
}

// Clipped leaky relu: slope * (x - lower) + lower below the lower clip, the upper clip above.
// A zero slope gives the lower clip itself, and x at the clip gives the clip, so that no
// infinite x (or infinite clip) meets a zero factor: relu(-inf) is 0, not 0 * -inf = NaN.
double relu(const Params& p, double x) {
  if (x <= p.lower)
    return p.slope == 0.0 || x == p.lower ? p.lower : p.lower + p.slope * (x - p.lower);
  return std::min(x, p.upper);
}
// Without an upper clip (+inf) every x above the lower clip passes, x = +inf included.
double relu_grad(const Params& p, double x) {
  if (x <= p.lower) return p.slope;
  return x < p.upper || p.upper == std::numeric_limits<double>::infinity() ? 1.0 : 0.0;
}

double gelu_grad(double x) {
  const double cdf = 0.5 * (1.0 + std::erf(x / std::numbers::sqrt2));
  const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi);
  return cdf + x * pdf;
}

double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + kGeluTanhC * x * x * x)));
}
double gelu_tanh_grad(double x) {
  const double t = std::tanh(kSqrt2OverPi * (x + kGeluTanhC * x * x * x));
  return 0.5 * (1.0 + t) +
         0.5 * x * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * kGeluTanhC * x * x);
}

double apply(const Params& p, double a, double b, double c) {
  switch (p.mode) {
    case PM::Add:
      return a + b;
    case PM::Sub:
      return a - b;
    case PM::Mul:
      return a * b;
    case PM::Div:
      return a / b;
    case PM::Max:
      return std::fmax(a, b);
    case PM::Min:
      return std::fmin(a, b);
    case PM::Pow:
      return std::pow(a, b);
    case PM::Abs:
      return std::fabs(a);
    case PM::Neg:
      return -a;
    case PM::Exp:
      return std::exp(a);
    case PM::Log:
      return std::log(a);
    case PM::Sqrt:
      return std::sqrt(a);
    case PM::Rsqrt:
      return 1.0 / std::sqrt(a);
    case PM::Reciprocal:
      return 1.0 / a;
    case PM::Tanh:
      return std::tanh(a);
    case PM::Sigmoid:
      return sigmoid(a);
    case PM::Relu:
      return relu(p, a);
    case PM::Gelu:
      return 0.5 * a * (1.0 + std::erf(a / std::numbers::sqrt2));
    case PM::GeluApproxTanh:
      return gelu_tanh(a);
    case PM::Silu:
      return a * sigmoid(p.swish_beta * a);
    case PM::Elu:
      return a > 0 ? a : p.alpha * std::expm1(a);
    case PM::Softplus:
      return log1pexp(p.softplus_beta * a) / p.softplus_beta;
    case PM::Erf:
      return std::erf(a);
    case PM::Sin:
      return std::sin(a);
    case PM::Cos:
      return std::cos(a);
    case PM::Floor:
      return std::floor(a);
    case PM::Ceil:
      return std::ceil(a);
    case PM::Identity:
      return a;
    case PM::CmpEq:
      return a == b ? 1.0 : 0.0;
    case PM::CmpNeq:
      return a != b ? 1.0 : 0.0;
    case PM::CmpGt:
      return a > b ? 1.0 : 0.0;
    case PM::CmpGe:
      return a >= b ? 1.0 : 0.0;
    case PM::CmpLt:
      return a < b ? 1.0 : 0.0;
    case PM::CmpLe:
      return a <= b ? 1.0 : 0.0;
    case PM::LogicalAnd:
      return (a != 0 && b != 0) ? 1.0 : 0.0;
    case PM::LogicalOr:
      return (a != 0 || b != 0) ? 1.0 : 0.0;
    case PM::LogicalNot:
      return a == 0 ? 1.0 : 0.0;
    case PM::BinarySelect:
      return c != 0 ? a : b;
    // Backward: a = dy, b = x.
    case PM::ReluBwd:
      return a * relu_grad(p, b);
    case PM::GeluBwd:
      return a * gelu_grad(b);
    case PM::GeluApproxTanhBwd:
      return a * gelu_tanh_grad(b);
    case PM::SigmoidBwd: {
      const double s = sigmoid(b);
      return a * s * (1.0 - s);
    }
    case PM::TanhBwd: {
      const double t = std::tanh(b);
      return a * (1.0 - t * t);
    }
    case PM::SiluBwd: {
      const double s = sigmoid(p.swish_beta * b);
      return a * (s + p.swish_beta * b * s * (1.0 - s));
    }
    case PM::EluBwd:
      return b > 0 ? a : a * p.alpha * std::exp(b);
    case PM::SoftplusBwd:
      return a * sigmoid(p.softplus_beta * b);
    case PM::AddSquare:
      return a + b * b;
    case PM::Mod:
      return std::fmod(a, b);
    case PM::Tan:
      return std::tan(a);
    case PM::GenIndex:
      break;  // run_gen_index: needs the element's position, not its value
  }
  return std::numeric_limits<double>::quiet_NaN();
}

constexpr Role kInputRoles[] = {Role::IN_0, Role::IN_1, Role::IN_2};

}  // namespace

double pointwise_value(const ir::PointwiseAttrs& a, double x, double y, double z) {
  return apply(params_of(a), x, y, z);
}

// GEN_INDEX: each element's index along `axis` (the output's dims; the input's values unused).
Status run_gen_index(KernelContext& ctx, int64_t axis) {
  const std::vector<int64_t>& dims = ctx.tensor(Role::OUT_0).dim;
  Dense out(dims);
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(axis) + 1; d < dims.size(); ++d) inner *= dims[d];
  const int64_t extent = dims[static_cast<size_t>(axis)];
  for (int64_t i = 0; i < out.size(); ++i)
    out[i] = ctx.round_compute(static_cast<double>((i / inner) % extent));
  ctx.store(Role::OUT_0, out);
  return Status::ok();
}

Status run_pointwise(KernelContext& ctx) {
  const auto& attrs = ctx.node().as<ir::PointwiseAttrs>();
  if (attrs.mode == PM::GenIndex) return run_gen_index(ctx, *attrs.axis);
  const Params p = params_of(attrs);
  const std::vector<int64_t>& dims = ctx.tensor(Role::OUT_0).dim;
  const int arity = pointwise_arity(p.mode);
  Dense in[3];
  for (int i = 0; i < arity; ++i) in[i] = ctx.load_broadcast(kInputRoles[i], dims);
  Dense out(dims);
  const int64_t n = out.size();
  const double* a = in[0].data.data();
  const double* b = arity > 1 ? in[1].data.data() : nullptr;
  const double* c = arity > 2 ? in[2].data.data() : nullptr;
#pragma omp parallel for schedule(static) if (n > 16384)
  for (int64_t i = 0; i < n; ++i)
    out[i] = ctx.round_compute(apply(p, a[i], b ? b[i] : 0.0, c ? c[i] : 0.0));
  ctx.store(Role::OUT_0, out);
  return Status::ok();
}

}  // namespace dnngraph::reference
