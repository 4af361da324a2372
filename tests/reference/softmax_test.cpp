// Reference softmax on hand-made nodes: hand-worked values, naive loops, stability with large
// inputs, -inf entries, low-precision storage and shape checks.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "dnngraph/dnngraph.hpp"
#include "engines/reference/kernel.hpp"

namespace dnngraph::reference {
namespace {

// ------------------------------------------------------------------ kernel-level harness
// One tensor of a hand-made node, with its own storage in its data type and strides.
struct Buf {
  ir::Tensor t;
  std::vector<unsigned char> mem;

  std::vector<int64_t> offsets() const {  // storage offset of each logical (row-major) element
    std::vector<int64_t> off{0};
    for (size_t k = 0; k < t->dim.size(); ++k) {
      std::vector<int64_t> next;
      for (int64_t o : off)
        for (int64_t i = 0; i < t->dim[k]; ++i) next.push_back(o + i * t->stride[k]);
      off.swap(next);
    }
    return off;
  }
  std::vector<double> get() const {
    std::vector<double> v;
    for (int64_t o : offsets()) v.push_back(load_element(mem.data(), t->data_type, o));
    return v;
  }
  void set(const std::vector<double>& v) {
    const auto off = offsets();
    for (size_t i = 0; i < off.size(); ++i) store_element(mem.data(), t->data_type, off[i], v[i]);
  }
  // Fresh random values in [lo, hi), rounded to the storage type; returns them.
  std::vector<double> fill(std::mt19937& gen, double lo, double hi) {
    std::uniform_real_distribution<double> d(lo, hi);
    std::vector<double> v(static_cast<size_t>(t->volume()));
    for (double& x : v) x = d(gen);
    set(v);
    return get();
  }
};

Buf make_buf(const std::string& name, std::vector<int64_t> dim, DataType dt,
             std::vector<int64_t> stride = {}) {
  Buf b;
  b.t = std::make_shared<ir::TensorAttrs>();
  b.t->set_name(name).set_data_type(dt).set_stride(stride.empty() ? row_major_strides(dim)
                                                                  : stride);
  b.t->set_dim(std::move(dim));
  b.mem.assign(static_cast<size_t>(b.t->storage_elements() * data_type_size(dt)), 0);
  return b;
}

struct Case {
  ir::Node node;
  std::map<std::string, Buf> in, out;

  Case(ir::OpAttrs attrs) {  // NOLINT
    node.name = "softmax0";
    node.compute_data_type = DataType::Float;
    node.attrs = std::move(attrs);
  }
  Buf& input(const std::string& role, Buf b) {
    node.inputs.push_back({role, b.t});
    return in[role] = std::move(b);
  }
  Buf& output(const std::string& role, Buf b) {  // poisoned with NaN
    b.set(std::vector<double>(static_cast<size_t>(b.t->volume()), NAN));
    node.outputs.push_back({role, b.t});
    return out[role] = std::move(b);
  }
  Status run() {
    DNNGRAPH_TRY(check_softmax(node));
    std::vector<std::pair<std::string_view, Bound>> i, o;
    for (const auto& p : node.inputs)
      i.emplace_back(p.role,
                     Bound{p.tensor.get(), p.tensor->value ? nullptr : in[p.role].mem.data()});
    for (const auto& p : node.outputs)
      o.emplace_back(p.role, Bound{p.tensor.get(), out[p.role].mem.data()});
    KernelContext ctx(node, std::move(i), std::move(o), node.compute_data_type);
    return run_softmax(ctx);
  }
  std::vector<double> result(const std::string& role) const { return out.at(role).get(); }
};

double tol_of(DataType t) {
  switch (t) {
    case DataType::Double:
      return 1e-10;
    case DataType::Float:
      return 1e-5;
    default:
      return 1e-2;
  }
}

// |got - want| <= rtol * (|want| + 1e-3 * max|want|), element by element.
void expect_close(const std::vector<double>& got, const std::vector<double>& want, double rtol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0.0;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i]) continue;
    if (!(std::fabs(got[i] - want[i]) <= rtol * (std::fabs(want[i]) + 1e-3 * scale)) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i];
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements differ";
}

// ------------------------------------------------------------------ tests
Case softmax_case(const std::vector<int64_t>& dim, DataType io, bool stats,
                  std::vector<int64_t> x_stride = {}) {
  Case c(ir::SoftmaxAttrs{});
  c.input("X", make_buf("x", dim, io, std::move(x_stride)));
  c.output("Y", make_buf("y", dim, io));
  if (stats) {
    std::vector<int64_t> sd = dim;
    sd.back() = 1;
    c.output("STATS", make_buf("stats", sd, io == DataType::Double ? io : DataType::Float));
  }
  return c;
}

// Naive: exp of each entry divided by the row's sum (fine for the small inputs used here).
void naive(const std::vector<double>& x, int64_t cols, std::vector<double>& y,
           std::vector<double>& lse) {
  y.assign(x.size(), 0.0);
  lse.clear();
  for (size_t r = 0; r < x.size() / static_cast<size_t>(cols); ++r) {
    double sum = 0.0;
    for (int64_t j = 0; j < cols; ++j) sum += std::exp(x[r * cols + j]);
    for (int64_t j = 0; j < cols; ++j) y[r * cols + j] = std::exp(x[r * cols + j]) / sum;
    lse.push_back(std::log(sum));
  }
}

TEST(RefSoftmax, HandWorked) {
  Case c = softmax_case({1, 3}, DataType::Double, true);
  c.in["X"].set({1, 2, 3});
  Status s = c.run();
  ASSERT_TRUE(s.is_ok()) << s.message();
  const double e1 = std::exp(1.0), e2 = std::exp(2.0), e3 = std::exp(3.0), sum = e1 + e2 + e3;
  expect_close(c.result("Y"), {e1 / sum, e2 / sum, e3 / sum}, 1e-14, "Y");
  expect_close(c.result("STATS"), {std::log(sum)}, 1e-14, "STATS");
}

TEST(RefSoftmax, RandomMatchesNaiveWithStridedInput) {
  std::mt19937 gen(1);
  // X stored as [2,3,7] with its last two dims transposed in memory.
  Case c = softmax_case({2, 3, 7}, DataType::Float, true, {21, 1, 3});
  const auto x = c.in["X"].fill(gen, -4, 4);
  ASSERT_TRUE(c.run().is_ok());
  std::vector<double> y, lse;
  naive(x, 7, y, lse);
  expect_close(c.result("Y"), y, 1e-5, "Y");
  expect_close(c.result("STATS"), lse, 1e-5, "STATS");
}

TEST(RefSoftmax, StableForLargeInputs) {
  // softmax(x + 1000) == softmax(x); stats shift by 1000. exp(1000) overflows a naive kernel.
  std::mt19937 gen(2);
  Case c = softmax_case({4, 5}, DataType::Double, true);
  std::uniform_real_distribution<double> d(-3, 3);
  std::vector<double> x(20), shifted(20);
  for (size_t i = 0; i < x.size(); ++i) shifted[i] = (x[i] = d(gen)) + 1000.0;
  c.in["X"].set(shifted);
  ASSERT_TRUE(c.run().is_ok());
  std::vector<double> y, lse;
  naive(x, 5, y, lse);
  for (double& v : lse) v += 1000.0;
  expect_close(c.result("Y"), y, 1e-12, "Y");
  expect_close(c.result("STATS"), lse, 1e-12, "STATS");
}

TEST(RefSoftmax, MinusInfinityGetsZeroProbability) {
  Case c = softmax_case({2, 3}, DataType::Float, true);
  const double ninf = -std::numeric_limits<double>::infinity();
  c.in["X"].set({0.5, ninf, -0.5, ninf, ninf, 2.0});
  ASSERT_TRUE(c.run().is_ok());
  const double a = std::exp(0.5), b = std::exp(-0.5);
  expect_close(c.result("Y"), {a / (a + b), 0.0, b / (a + b), 0.0, 0.0, 1.0}, 1e-6, "Y");
  expect_close(c.result("STATS"), {std::log(a + b), 2.0}, 1e-6, "STATS");
}

TEST(RefSoftmax, LowPrecisionStorage) {
  for (DataType t : {DataType::BFloat16, DataType::Half}) {
    SCOPED_TRACE(std::string(data_type_name(t)));
    std::mt19937 gen(3);
    Case c = softmax_case({3, 2, 16}, t, true);
    const auto x = c.in["X"].fill(gen, -3, 3);
    ASSERT_TRUE(c.run().is_ok());
    std::vector<double> y, lse;
    naive(x, 16, y, lse);
    expect_close(c.result("Y"), y, tol_of(t), "Y");
    expect_close(c.result("STATS"), lse, 1e-5, "STATS");
  }
}

TEST(RefSoftmax, WithoutStatsWritesY) {
  std::mt19937 gen(4);
  Case c = softmax_case({5, 9}, DataType::Float, false);
  const auto x = c.in["X"].fill(gen, -1, 1);
  ASSERT_TRUE(c.run().is_ok());
  std::vector<double> y, lse;
  naive(x, 9, y, lse);
  expect_close(c.result("Y"), y, 1e-5, "Y");
}

TEST(RefSoftmax, CheckRejectsBadStatsDims) {
  Case c(ir::SoftmaxAttrs{});
  c.input("X", make_buf("logits", {2, 3, 7}, DataType::Float));
  c.output("Y", make_buf("probs", {2, 3, 7}, DataType::Float));
  c.output("STATS", make_buf("lse", {2, 3, 7}, DataType::Float));
  Status s = check_softmax(c.node);
  EXPECT_EQ(s.code(), ErrorCode::InvalidGraph);
  EXPECT_NE(s.message().find("'lse'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("[2,3,1]"), std::string::npos) << s.message();
}

// ------------------------------------------------------------------ through dnngraph::Graph
ir::Tensor graph_tensor(Graph& g, const Buf& b, int64_t uid) {
  ir::TensorAttrs a = *b.t;
  return g.tensor(a.set_uid(uid));
}
void mark_output(const ir::Tensor& t, const Buf& b, int64_t uid) {
  t->set_output(true).set_uid(uid).set_dim(b.t->dim).set_stride(b.t->stride);
  t->set_data_type(b.t->data_type);
}
Status build_and_run(Graph& g, const VariantPack& pack) {
  auto h = Handle::create(Device::cpu());
  if (!h) return h.status();
  DNNGRAPH_TRY(g.build(*h));
  Result<int64_t> ws = g.get_workspace_size();
  if (!ws) return ws.status();
  std::vector<unsigned char> workspace(static_cast<size_t>(std::max<int64_t>(*ws, 1)));
  return g.execute(**h, pack, workspace.data(), static_cast<int64_t>(workspace.size()));
}
Buf poisoned(const std::string& name, std::vector<int64_t> dim, DataType dt) {
  Buf b = make_buf(name, std::move(dim), dt);
  b.set(std::vector<double>(static_cast<size_t>(b.t->volume()), NAN));
  return b;
}

TEST(RefSoftmaxGraph, SoftmaxWithStats) {
  std::mt19937 gen(400);
  Buf xb = make_buf("x", {2, 4, 33}, DataType::Half);
  const auto x = xb.fill(gen, -5, 5);
  Graph g;
  g.set_io_data_type(DataType::Half).set_compute_data_type(DataType::Float);
  auto out = g.softmax(graph_tensor(g, xb, 1), true);
  Buf yb = poisoned("y", {2, 4, 33}, DataType::Half);
  Buf sb = poisoned("stats", {2, 4, 1}, DataType::Float);
  mark_output(out[0], yb, 2);
  mark_output(out[1], sb, 3);
  Status st = build_and_run(g, {{1, xb.mem.data()}, {2, yb.mem.data()}, {3, sb.mem.data()}});
  ASSERT_TRUE(st.is_ok()) << st.message();
  std::vector<double> y, lse;
  naive(x, 33, y, lse);
  expect_close(yb.get(), y, tol_of(DataType::Half), "Y");
  expect_close(sb.get(), lse, 1e-5, "STATS");
}

}  // namespace
}  // namespace dnngraph::reference
