// Reference pointwise kernel: every mode against an independent formula, broadcasting,
// mode parameters, backward modes against finite differences, storage types, and a graph.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>

#include "common/ref_harness.hpp"

namespace {

using dnngraph::DataType;
using dnngraph::PointwiseMode;
using dnngraph::ir::PointwiseAttrs;
using dnngraph::ir::Role;
using PM = PointwiseMode;
using Fn = std::function<double(double, double, double)>;

const double kPi = std::acos(-1.0);

PointwiseAttrs mk(PM m, const std::function<void(PointwiseAttrs&)>& set = {}) {
  PointwiseAttrs a;
  a.mode = m;
  if (set) set(a);
  return a;
}

double sig(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double gelu_erf(double x) { return x * 0.5 * std::erfc(-x / std::sqrt(2.0)); }
double gelu_tanh(double x) {
  const double u = std::sqrt(2.0 / kPi) * (x + 0.044715 * std::pow(x, 3));
  return 0.5 * x * (1.0 + std::tanh(u));
}

// Inputs: IN_0 [2,3,4], IN_1 [1,3,1] (broadcast), IN_2 [2,1,4] (broadcast).
struct Case {
  PM mode;
  double lo, hi;  // input range (integers for comparisons, logic and select)
  bool integers;
  Fn f;  // independent formula
};

std::vector<Case> forward_cases() {
  return {
      {PM::Add, -2, 2, false, [](double a, double b, double) { return a + b; }},
      {PM::Sub, -2, 2, false, [](double a, double b, double) { return a - b; }},
      {PM::Mul, -2, 2, false, [](double a, double b, double) { return a * b; }},
      {PM::Div, 0.5, 2, false, [](double a, double b, double) { return a / b; }},
      {PM::Max, -2, 2, false, [](double a, double b, double) { return a > b ? a : b; }},
      {PM::Min, -2, 2, false, [](double a, double b, double) { return a < b ? a : b; }},
      {PM::Pow, 0.5, 2, false,
       [](double a, double b, double) { return std::exp(b * std::log(a)); }},
      {PM::Abs, -2, 2, false, [](double a, double, double) { return a < 0 ? -a : a; }},
      {PM::Neg, -2, 2, false, [](double a, double, double) { return -a; }},
      {PM::Exp, -2, 2, false, [](double a, double, double) { return std::exp(a); }},
      {PM::Log, 0.1, 3, false, [](double a, double, double) { return std::log(a); }},
      {PM::Sqrt, 0.1, 3, false, [](double a, double, double) { return std::sqrt(a); }},
      {PM::Rsqrt, 0.1, 3, false, [](double a, double, double) { return std::pow(a, -0.5); }},
      {PM::Reciprocal, 0.5, 3, false, [](double a, double, double) { return 1.0 / a; }},
      {PM::Tanh, -2, 2, false,
       [](double a, double, double) { return (std::exp(2 * a) - 1) / (std::exp(2 * a) + 1); }},
      {PM::Sigmoid, -4, 4, false, [](double a, double, double) { return sig(a); }},
      {PM::Relu, -2, 2, false, [](double a, double, double) { return a > 0 ? a : 0.0; }},
      {PM::Gelu, -3, 3, false, [](double a, double, double) { return gelu_erf(a); }},
      {PM::GeluApproxTanh, -3, 3, false, [](double a, double, double) { return gelu_tanh(a); }},
      {PM::Silu, -3, 3, false, [](double a, double, double) { return a / (1 + std::exp(-a)); }},
      {PM::Elu, -3, 3, false,
       [](double a, double, double) { return a > 0 ? a : std::exp(a) - 1.0; }},
      {PM::Softplus, -3, 3, false,
       [](double a, double, double) { return std::log(1 + std::exp(a)); }},
      {PM::Erf, -2, 2, false, [](double a, double, double) { return 1.0 - std::erfc(a); }},
      {PM::Sin, -3, 3, false, [](double a, double, double) { return std::sin(a); }},
      {PM::Cos, -3, 3, false, [](double a, double, double) { return std::sin(a + kPi / 2); }},
      {PM::Floor, -3, 3, false,
       [](double a, double, double) { return a - std::fmod(std::fmod(a, 1.0) + 1.0, 1.0); }},
      {PM::Ceil, -3, 3, false, [](double a, double, double) { return -std::floor(-a); }},
      {PM::Identity, -2, 2, false, [](double a, double, double) { return a; }},
      {PM::CmpEq, -1, 1, true, [](double a, double b, double) { return double(a == b); }},
      {PM::CmpNeq, -1, 1, true, [](double a, double b, double) { return double(a != b); }},
      {PM::CmpGt, -1, 1, true, [](double a, double b, double) { return double(a > b); }},
      {PM::CmpGe, -1, 1, true, [](double a, double b, double) { return double(!(a < b)); }},
      {PM::CmpLt, -1, 1, true, [](double a, double b, double) { return double(b > a); }},
      {PM::CmpLe, -1, 1, true, [](double a, double b, double) { return double(!(a > b)); }},
      {PM::LogicalAnd, -1, 1, true,
       [](double a, double b, double) { return (a != 0 ? 1.0 : 0.0) * (b != 0 ? 1.0 : 0.0); }},
      {PM::LogicalOr, -1, 1, true,
       [](double a, double b, double) { return (a == 0 && b == 0) ? 0.0 : 1.0; }},
      {PM::LogicalNot, -1, 1, true, [](double a, double, double) { return a == 0 ? 1.0 : 0.0; }},
      {PM::BinarySelect, -2, 2, true, [](double a, double b, double c) { return c == 0 ? b : a; }},
      {PM::AddSquare, -2, 2, false, [](double a, double b, double) { return a + std::pow(b, 2); }},
      {PM::Mod, 0.5, 3, false,
       [](double a, double b, double) { return a - b * std::trunc(a / b); }},
      {PM::Tan, -1.2, 1.2, false,
       [](double a, double, double) { return std::sin(a) / std::cos(a); }},
  };
}

// Runs one pointwise node (inputs given as values, rounded to `in_type`) and returns the
// stored output and the broadcast inputs as the kernel read them.
struct PwRun {
  std::vector<double> out;
  std::vector<double> in[3];  // broadcast to the output dims
};

const std::vector<int64_t> kOut{2, 3, 4};
const std::vector<int64_t> kInDims[3] = {{2, 3, 4}, {1, 3, 1}, {2, 1, 4}};

std::vector<double> broadcast(const std::vector<double>& v, const std::vector<int64_t>& dims) {
  std::vector<double> out(24);
  for (int64_t i = 0; i < 24; ++i) {
    auto idx = ref_test::unravel(i, kOut);
    for (size_t k = 0; k < 3; ++k)
      if (dims[k] == 1) idx[k] = 0;
    out[static_cast<size_t>(i)] = v[static_cast<size_t>(ref_test::ravel(idx, dims))];
  }
  return out;
}

PwRun run_pointwise(PointwiseAttrs attrs, ref_test::Rng& rng, double lo, double hi, bool integers,
                    DataType in_type = DataType::Float, DataType out_type = DataType::Float,
                    DataType compute = DataType::Float, bool nhwc_out = false) {
  dnngraph::ir::Node n;
  n.name = "pw";
  n.compute_data_type = compute;
  n.attrs = attrs;
  ref_test::Buffers bufs;
  PwRun r;
  const int arity = dnngraph::pointwise_arity(attrs.mode);
  for (auto& v : r.in) v.assign(24, 0.0);  // unused inputs read as 0
  for (int i = 0; i < arity; ++i) {
    auto t = ref_test::make_tensor("IN_" + std::to_string(i), kInDims[i], in_type);
    n.inputs.push_back({static_cast<Role>(static_cast<int>(Role::IN_0) + i), t});
    r.in[i] = broadcast(bufs.random(t, rng, lo, hi, integers), kInDims[i]);
  }
  auto out = ref_test::make_tensor(
      "OUT_0", kOut, out_type, nhwc_out ? std::vector<int64_t>{12, 1, 3} : std::vector<int64_t>{});
  n.outputs.push_back({Role::OUT_0, out});
  const dnngraph::Status check = ref_test::validate_node(n);
  EXPECT_TRUE(check.is_ok()) << check.to_string();
  const dnngraph::Status s = bufs.run_kernel(n);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  r.out = bufs.values(out);
  return r;
}

TEST(RefPointwise, EveryForwardModeMatchesItsFormula) {
  ref_test::Rng rng(11);
  for (const Case& c : forward_cases()) {
    SCOPED_TRACE(std::string(dnngraph::pointwise_mode_name(c.mode)));
    const PwRun r = run_pointwise(mk(c.mode), rng, c.lo, c.hi, c.integers);
    std::vector<double> want(24);
    for (size_t i = 0; i < 24; ++i) want[i] = c.f(r.in[0][i], r.in[1][i], r.in[2][i]);
    EXPECT_TRUE(ref_test::all_close(r.out, ref_test::rounded(DataType::Float, want),
                                    ref_test::tol(DataType::Float)));
  }
}

// Backward modes (IN_0 = dy, IN_1 = x) against dy * central difference of the forward
// formula, computed in fp64 storage so the difference quotient is the only error.
TEST(RefPointwise, EveryBackwardModeMatchesFiniteDifferences) {
  struct Bwd {
    PointwiseAttrs attrs;
    std::function<double(double)> fwd;
  };
  const double L = -0.3, U = 0.8, slope = 0.1, alpha = 0.7, sp_beta = 2.0, sw_beta = 1.5;
  const std::vector<Bwd> cases = {
      {mk(PM::ReluBwd), [](double x) { return x > 0 ? x : 0.0; }},
      {mk(PM::ReluBwd,
          [=](PointwiseAttrs& p) {
            p.relu_lower_clip = L;
            p.relu_upper_clip = U;
            p.relu_lower_clip_slope = slope;
          }),
       [=](double x) { return x < L ? L + slope * (x - L) : (x > U ? U : x); }},
      {mk(PM::GeluBwd), gelu_erf},
      {mk(PM::GeluApproxTanhBwd), gelu_tanh},
      {mk(PM::SigmoidBwd), sig},
      {mk(PM::TanhBwd), [](double x) { return std::tanh(x); }},
      {mk(PM::SiluBwd), [](double x) { return x * sig(x); }},
      {mk(PM::SiluBwd, [=](PointwiseAttrs& p) { p.swish_beta = sw_beta; }),
       [=](double x) { return x * sig(sw_beta * x); }},
      {mk(PM::EluBwd), [](double x) { return x > 0 ? x : std::exp(x) - 1; }},
      {mk(PM::EluBwd, [=](PointwiseAttrs& p) { p.elu_alpha = alpha; }),
       [=](double x) { return x > 0 ? x : alpha * (std::exp(x) - 1); }},
      {mk(PM::SoftplusBwd), [](double x) { return std::log1p(std::exp(x)); }},
      {mk(PM::SoftplusBwd, [=](PointwiseAttrs& p) { p.softplus_beta = sp_beta; }),
       [=](double x) { return std::log1p(std::exp(sp_beta * x)) / sp_beta; }},
  };
  ref_test::Rng rng(12);
  const double h = 1e-6;
  for (const Bwd& c : cases) {
    SCOPED_TRACE(std::string(dnngraph::pointwise_mode_name(c.attrs.mode)));
    const PwRun r = run_pointwise(c.attrs, rng, -2.5, 2.5, false, DataType::Double,
                                  DataType::Double, DataType::Double);
    std::vector<double> want(24);
    for (size_t i = 0; i < 24; ++i) {
      const double x = r.in[1][i];
      // Keep away from kinks (relu clips, 0): the derivative is one-sided there.
      ASSERT_GT(std::min({std::fabs(x), std::fabs(x - L), std::fabs(x - U)}), 10 * h);
      want[i] = r.in[0][i] * (c.fwd(x + h) - c.fwd(x - h)) / (2 * h);
    }
    EXPECT_TRUE(ref_test::all_close(r.out, want, {1e-6, 1e-8}));
  }
}

TEST(RefPointwise, ModeParameters) {
  ref_test::Rng rng(13);
  struct P {
    PointwiseAttrs attrs;
    std::function<double(double)> f;
  };
  const std::vector<P> cases = {
      // Clipped relu: [0.2, 0.6], no slope.
      {mk(PM::Relu,
          [=](PointwiseAttrs& p) {
            p.relu_lower_clip = 0.2;
            p.relu_upper_clip = 0.6;
          }),
       [](double x) { return std::min(std::max(x, 0.2), 0.6); }},
      // Leaky relu.
      {mk(PM::Relu, [=](PointwiseAttrs& p) { p.relu_lower_clip_slope = 0.1; }),
       [](double x) { return x >= 0 ? x : 0.1 * x; }},
      // Upper clip only (relu6-like).
      {mk(PM::Relu, [=](PointwiseAttrs& p) { p.relu_upper_clip = 1.0; }),
       [](double x) { return x < 0 ? 0.0 : (x > 1 ? 1.0 : x); }},
      {mk(PM::Elu, [=](PointwiseAttrs& p) { p.elu_alpha = 0.5; }),
       [](double x) { return x >= 0 ? x : 0.5 * (std::exp(x) - 1); }},
      {mk(PM::Softplus, [=](PointwiseAttrs& p) { p.softplus_beta = 2.0; }),
       [](double x) { return std::log(1 + std::exp(2 * x)) / 2; }},
      {mk(PM::Silu, [=](PointwiseAttrs& p) { p.swish_beta = 1.5; }),
       [](double x) { return x * sig(1.5 * x); }},
  };
  for (const P& c : cases) {
    SCOPED_TRACE(std::string(dnngraph::pointwise_mode_name(c.attrs.mode)));
    const PwRun r = run_pointwise(c.attrs, rng, -2, 2, false);
    std::vector<double> want(24);
    for (size_t i = 0; i < 24; ++i) want[i] = c.f(r.in[0][i]);
    EXPECT_TRUE(ref_test::all_close(r.out, ref_test::rounded(DataType::Float, want),
                                    ref_test::tol(DataType::Float)));
  }
}

TEST(RefPointwise, EveryModeIsCovered) {
  std::set<int> seen;
  for (const Case& c : forward_cases()) seen.insert(static_cast<int>(c.mode));
  for (PM m : {PM::ReluBwd, PM::GeluBwd, PM::GeluApproxTanhBwd, PM::SigmoidBwd, PM::TanhBwd,
               PM::SiluBwd, PM::EluBwd, PM::SoftplusBwd, PM::GenIndex})  // GenIndex: below
    seen.insert(static_cast<int>(m));
  EXPECT_EQ(static_cast<int>(seen.size()), dnngraph::kPointwiseModeCount);
}

// GEN_INDEX writes each element's index along the axis (the input's values are unused), here
// into an INT32 output with the input's channels-last layout.
TEST(RefPointwise, GenIndexHandWorked) {
  for (int64_t axis : {0, 1, 2}) {
    dnngraph::Graph g;
    g.set_io_data_type(DataType::Float);
    auto x = g.tensor(
        dnngraph::ir::TensorAttrs().set_name("x").set_dim({2, 3, 2}).set_stride({6, 1, 3}));
    PointwiseAttrs a = dnngraph::Graph::pointwise_attrs(PM::GenIndex);
    a.axis = axis;
    auto y = g.pointwise(x, a);
    y->set_output(true).set_name("y").set_data_type(DataType::Int32);
    ASSERT_OK(g.validate());
    ref_test::Rng rng(3);
    ref_test::Buffers b;
    b.random(x, rng, -1, 1);
    ASSERT_OK(b.run_graph(g));
    std::vector<double> want;  // row-major over [2, 3, 2]
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t k = 0; k < 2; ++k)
          want.push_back(static_cast<double>(axis == 0 ? i : axis == 1 ? j : k));
    EXPECT_EQ(b.values(y), want) << "axis " << axis;
  }
}

// Reduced-precision storage and compute: bf16 in, fp16 out with strides, and a bf16
// compute type that rounds the result before it is stored.
TEST(RefPointwise, StorageAndComputeTypesRound) {
  ref_test::Rng rng(14);
  {
    const PwRun r = run_pointwise(mk(PM::Mul), rng, -2, 2, false, DataType::BFloat16,
                                  DataType::Half, DataType::Float, /*nhwc_out=*/true);
    std::vector<double> want(24);
    for (size_t i = 0; i < 24; ++i) want[i] = r.in[0][i] * r.in[1][i];
    EXPECT_TRUE(ref_test::all_close(r.out, ref_test::rounded(DataType::Half, want),
                                    {0.0, 0.0}));  // exact: one rounding of an exact product
  }
  {
    const PwRun r = run_pointwise(mk(PM::Exp), rng, -2, 2, false, DataType::Float, DataType::Float,
                                  DataType::BFloat16);
    std::vector<double> want(24);
    for (size_t i = 0; i < 24; ++i)
      want[i] = dnngraph::reference::round_to(DataType::BFloat16, std::exp(r.in[0][i]));
    EXPECT_TRUE(ref_test::all_close(r.out, want, {0.0, 0.0}));
  }
}

// A host scalar given at execute time (pass-by-value, no constant) of rank 1 broadcasts
// against a rank-3 input.
TEST(RefPointwise, HostScalarOfLowerRankBroadcasts) {
  auto x = ref_test::make_tensor("x", {2, 3, 4}, DataType::Float);
  auto s = ref_test::make_tensor("s", {1}, DataType::Float);
  s->set_is_pass_by_value(true);
  auto y = ref_test::make_tensor("y", {2, 3, 4}, DataType::Float);
  dnngraph::ir::Node n;
  n.name = "scale";
  n.attrs = mk(PM::Sub);
  n.inputs = {{Role::IN_0, x}, {Role::IN_1, s}};
  n.outputs = {{Role::OUT_0, y}};
  ASSERT_OK(ref_test::validate_node(n));
  ref_test::Rng rng(16);
  ref_test::Buffers bufs;
  const auto xv = bufs.random(x, rng);
  bufs.set(s, {0.75});
  ASSERT_OK(bufs.run_kernel(n));
  std::vector<double> want(24);
  for (size_t i = 0; i < 24; ++i) want[i] = xv[i] - 0.75;
  EXPECT_TRUE(ref_test::all_close(bufs.values(y), ref_test::rounded(DataType::Float, want),
                                  ref_test::tol(DataType::Float)));
}

TEST(RefPointwise, CheckRejectsBadShapes) {
  dnngraph::ir::Node n;
  n.name = "bad_add";
  n.attrs = mk(PM::Add);
  n.inputs = {{Role::IN_0, ref_test::make_tensor("a", {2, 3}, DataType::Float)},
              {Role::IN_1, ref_test::make_tensor("b", {2, 2}, DataType::Float)}};
  n.outputs = {{Role::OUT_0, ref_test::make_tensor("y", {2, 3}, DataType::Float)}};
  dnngraph::Status s = ref_test::validate_node(n);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("'b'"), std::string::npos) << s.message();
  n.inputs.pop_back();  // ADD without IN_1
  s = ref_test::validate_node(n);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("IN_1"), std::string::npos) << s.message();
}

// A whole graph on the reference engine: y = relu(x * s + b) with s a pass-by-value
// constant, b broadcast per channel, bf16 intermediate in the workspace, fp32 output.
TEST(RefPointwise, GraphWithVirtualIntermediates) {
  dnngraph::Graph g;
  g.set_io_data_type(DataType::Float).set_intermediate_data_type(DataType::BFloat16);
  auto x =
      g.tensor(dnngraph::ir::TensorAttrs().set_name("x").set_dim({2, 3, 4}).set_stride({12, 1, 3}));
  auto b =
      g.tensor(dnngraph::ir::TensorAttrs().set_name("b").set_dim({1, 3, 1}).set_stride({3, 1, 1}));
  auto s = g.scalar(dnngraph::ir::Scalar::of_float(0.5), "s");
  auto y = g.relu(g.add(g.mul(x, s), b));
  y->set_output(true).set_name("y");
  ASSERT_OK(g.validate());  // infers x's and b's data type
  ref_test::Rng rng(15);
  ref_test::Buffers bufs;
  const auto xv = bufs.random(x, rng, -2, 2);
  const auto bv = broadcast(bufs.random(b, rng, -1, 1), {1, 3, 1});
  ASSERT_OK(bufs.run_graph(g));
  std::vector<double> want(24);
  for (size_t i = 0; i < 24; ++i) {
    // Each op rounds to the compute type (fp32), then to the bf16 storage.
    auto store = [](double v) {
      return dnngraph::reference::round_to(DataType::BFloat16,
                                           dnngraph::reference::round_to(DataType::Float, v));
    };
    const double xs = store(xv[i] * 0.5);
    const double sum = store(xs + bv[i]);
    want[i] = sum > 0 ? sum : 0.0;
  }
  EXPECT_TRUE(ref_test::all_close(bufs.values(y), want, ref_test::tol(DataType::Float)));
}

}  // namespace
