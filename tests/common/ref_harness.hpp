// Shared helpers for reference-engine tests: tensors with host storage, random fills,
// NaN poisoning, running one kernel or a whole graph on the CPU reference engine, and
// comparisons with per-dtype tolerances.
//
// Typical kernel test (no runtime needed):
//   ref_test::Rng rng(7);
//   auto x = ref_test::make_tensor("X", {2, 3, 5, 5}, DataType::Float, ref_test::nhwc(4));
//   ...build an ir::Node with ports X, W -> Y...
//   ref_test::Buffers bufs;
//   bufs.random(x, rng);                     // allocates and fills (values rounded to dtype)
//   ASSERT_OK(bufs.run_kernel(node));  // validated, built, run; outputs poisoned
//   EXPECT_TRUE(ref_test::all_close(bufs.values(y), want, ref_test::tol(DataType::Float)));
//
// Typical graph test:
//   dnngraph::Graph g; ... g.tensor(...) ... y->set_output(true);
//   ASSERT_OK(g.validate());                 // only if inputs rely on inferred type/strides
//   bufs.random(x, rng); ...
//   ASSERT_OK(bufs.run_graph(g));            // build + execute on Device::cpu()
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dnngraph/engines/handle.hpp"
#include "dnngraph/engines/interface.hpp"
#include "dnngraph/graph.hpp"
#include "dnngraph/ir/ops.hpp"
#include "dnngraph/ir/tensor.hpp"
#include "engines/reference/kernel.hpp"

// Fails the current test with the Status message when a Status/Result is not ok.
#define ASSERT_OK(expr)                                          \
  do {                                                           \
    const ::dnngraph::Status ref_test_s_ = (expr);               \
    ASSERT_TRUE(ref_test_s_.is_ok()) << ref_test_s_.to_string(); \
  } while (0)
#define EXPECT_OK(expr)                                          \
  do {                                                           \
    const ::dnngraph::Status ref_test_s_ = (expr);               \
    EXPECT_TRUE(ref_test_s_.is_ok()) << ref_test_s_.to_string(); \
  } while (0)

namespace ref_test {

using dnngraph::DataType;
using dnngraph::ir::Role;

// ---------------------------------------------------------------- random numbers
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  double uniform(double lo = -1.0, double hi = 1.0) {
    return std::uniform_real_distribution<double>(lo, hi)(gen_);
  }
  int64_t integer(int64_t lo, int64_t hi) {  // inclusive
    return std::uniform_int_distribution<int64_t>(lo, hi)(gen_);
  }
  std::mt19937_64& engine() { return gen_; }

 private:
  std::mt19937_64 gen_;
};

// ---------------------------------------------------------------- layouts and tensors
// Dim order (outermost first) of a channels-last layout for rank r: N, spatial..., C.
inline std::vector<int64_t> nhwc_order(size_t rank) {
  std::vector<int64_t> o{0};
  for (size_t i = 2; i < rank; ++i) o.push_back(static_cast<int64_t>(i));
  if (rank > 1) o.push_back(1);
  return o;
}
// Packed channels-last strides of dims ([N,C,H,W] -> [HWC,1,WC,C]).
inline std::vector<int64_t> nhwc_strides(const std::vector<int64_t>& dims) {
  return dnngraph::ir::packed_strides(dims, nhwc_order(dims.size()));
}
// Packed row-major strides of dims.
inline std::vector<int64_t> packed(const std::vector<int64_t>& dims) {
  return dnngraph::ir::packed_strides(dims);
}

// A tensor with dims, strides (row-major when empty), data type and a fresh uid.
inline dnngraph::ir::Tensor make_tensor(std::string name, std::vector<int64_t> dims, DataType t,
                                        std::vector<int64_t> strides = {}) {
  static int64_t next_uid = 1000;
  auto a = std::make_shared<dnngraph::ir::TensorAttrs>();
  a->set_name(std::move(name)).set_data_type(t).set_uid(next_uid++);
  a->set_stride(strides.empty() ? packed(dims) : std::move(strides));
  a->set_dim(std::move(dims));
  return a;
}

// Calls f(logical row-major index, storage offset) for every element of t.
template <class F>
void for_each_element(const dnngraph::ir::TensorAttrs& t, F&& f) {
  if (t.stride.size() != t.dim.size()) return;  // not inferred yet (reported by Buffers::add)
  const int64_t n = t.volume();
  const size_t r = t.dim.size();
  std::vector<int64_t> idx(r, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (size_t k = 0; k < r; ++k) off += idx[k] * t.stride[k];
    f(i, off);
    for (size_t k = r; k-- > 0;) {
      if (++idx[k] < t.dim[k]) break;
      idx[k] = 0;
    }
  }
}

// Host storage of one tensor (its whole strided span, in its own data type).
struct HostTensor {
  dnngraph::ir::Tensor attrs;
  std::vector<unsigned char> bytes;

  explicit HostTensor(dnngraph::ir::Tensor t) : attrs(std::move(t)) {
    // Whole bytes of the storage elements (FP4_E2M1: two per byte), at least one element.
    elements = std::max<int64_t>(attrs->storage_elements(), 1);
    const int64_t n = dnngraph::data_type_bytes(attrs->data_type, elements).value_or(elements);
    bytes.assign(static_cast<size_t>(std::max<int64_t>(n, 1)), 0);
  }
  void* data() { return bytes.data(); }
  int64_t storage_elements() const { return elements; }
  int64_t elements = 0;
  // Fills every storage element, gaps included, with NaN (floats) or a junk value (ints).
  void poison() {
    const double junk =
        dnngraph::is_floating(attrs->data_type) ? std::numeric_limits<double>::quiet_NaN() : -77.0;
    for (int64_t i = 0; i < storage_elements(); ++i)
      dnngraph::reference::store_element(bytes.data(), attrs->data_type, i, junk);
  }
  // Logical row-major values as stored.
  std::vector<double> values() const {
    std::vector<double> v(static_cast<size_t>(attrs->volume()));
    for_each_element(*attrs, [&](int64_t i, int64_t off) {
      v[static_cast<size_t>(i)] =
          dnngraph::reference::load_element(bytes.data(), attrs->data_type, off);
    });
    return v;
  }
  // Stores logical row-major values (rounded to the data type).
  void set(const std::vector<double>& v) {
    for_each_element(*attrs, [&](int64_t i, int64_t off) {
      dnngraph::reference::store_element(bytes.data(), attrs->data_type, off,
                                         v[static_cast<size_t>(i)]);
    });
  }
};

// Random values in [lo, hi), never all zero. integers=true draws whole numbers (exact sums).
inline std::vector<double> random_values(Rng& rng, int64_t n, double lo = -1.0, double hi = 1.0,
                                         bool integers = false) {
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v)
    x = integers ? static_cast<double>(rng.integer(static_cast<int64_t>(std::ceil(lo)),
                                                   static_cast<int64_t>(std::floor(hi))))
                 : rng.uniform(lo, hi);
  if (n > 0 && std::all_of(v.begin(), v.end(), [](double x) { return x == 0.0; })) v[0] = 1.0;
  return v;
}

// ---------------------------------------------------------------- buffers and running
class Buffers {
 public:
  // Storage for t (allocated on first use, poisoned). t's data type and strides must be
  // known: set them, or validate() the graph first so that they are inferred.
  HostTensor& add(const dnngraph::ir::Tensor& t) {
    auto it = map_.find(t.get());
    if (it == map_.end()) {
      if (t->data_type == DataType::NotSet || t->stride.size() != t->dim.size())
        ADD_FAILURE() << "ref_harness: tensor '" << t->name
                      << "' has no data type or strides yet; set them, or call validate() on "
                         "the graph before filling it";
      it = map_.emplace(t.get(), std::make_unique<HostTensor>(t)).first;
      it->second->poison();
    }
    return *it->second;
  }
  bool has(const dnngraph::ir::Tensor& t) const { return map_.count(t.get()) != 0; }
  HostTensor& operator[](const dnngraph::ir::Tensor& t) { return add(t); }

  // Allocates t and fills it with random values in [lo, hi) rounded to t's data type.
  // Returns the stored values (what the kernel will read), in logical row-major order.
  std::vector<double> random(const dnngraph::ir::Tensor& t, Rng& rng, double lo = -1.0,
                             double hi = 1.0, bool integers = false) {
    HostTensor& h = add(t);
    h.set(random_values(rng, t->volume(), lo, hi, integers));
    return h.values();
  }
  // Allocates t and stores v (logical row-major). Returns the stored (rounded) values.
  std::vector<double> set(const dnngraph::ir::Tensor& t, const std::vector<double>& v) {
    HostTensor& h = add(t);
    h.set(v);
    return h.values();
  }
  std::vector<double> values(const dnngraph::ir::Tensor& t) { return add(t).values(); }

  // uid -> pointer for every allocated tensor (uids as they are now).
  dnngraph::VariantPack pack() {
    dnngraph::VariantPack p;
    for (auto& [k, h] : map_) p[h->attrs->uid] = h->data();
    return p;
  }

  // Runs the one-node graph made of n (through Graph::add_node, validate, the reference
  // engine's build and execute: a kernel only ever sees what validation let through). Every
  // input of n must have been allocated; outputs are allocated and poisoned here when missing.
  dnngraph::Status run_kernel(const dnngraph::ir::Node& n) {
    for (const auto& p : n.inputs)
      if (!p.tensor->value && !has(p.tensor))
        return dnngraph::make_error(dnngraph::ErrorCode::InvalidArgument, "test harness: input '",
                                    p.tensor->name, "' of '", n.name, "' has no data");
    for (const auto& p : n.outputs) add(p.tensor);
    dnngraph::Graph g;
    g.add_node(n);
    return run_graph(g);
  }

  // Builds g on a CPU handle (reference engine) and executes it. Inputs must have been
  // allocated (random/set); non-virtual outputs are allocated and poisoned after build,
  // once their dims are inferred. Pass-by-value tensors with a value need no buffer.
  dnngraph::Status run_graph(dnngraph::Graph& g) {
    auto handle = dnngraph::Handle::create(dnngraph::Device::cpu());
    if (!handle) return handle.status();
    DNNGRAPH_TRY(g.build(handle.value()));
    for (const auto& t : g.io_tensors()) {
      if (t->value || has(t)) continue;
      if (!t->is_output && !produced(g, t))
        return dnngraph::make_error(dnngraph::ErrorCode::InvalidArgument,
                                    "test harness: graph input '", t->name, "' has no data");
      add(t);
    }
    auto ws = g.get_workspace_size();
    if (!ws) return ws.status();
    // Poison the workspace too: virtual intermediates must be written before being read.
    std::vector<double> workspace(static_cast<size_t>((ws.value() + 7) / 8) + 1,
                                  std::numeric_limits<double>::quiet_NaN());
    return g.execute(*handle.value(), pack(), workspace.data(), ws.value());
  }

 private:
  static bool produced(const dnngraph::Graph& g, const dnngraph::ir::Tensor& t) {
    for (const auto& n : g.nodes())
      for (const auto& p : n.outputs)
        if (p.tensor == t) return true;
    return false;
  }
  std::map<const dnngraph::ir::TensorAttrs*, std::unique_ptr<HostTensor>> map_;
};

// Validates the one-node graph made of n (what build and run_kernel do first).
inline dnngraph::Status validate_node(const dnngraph::ir::Node& n) {
  dnngraph::Graph g;
  g.add_node(n);
  return g.validate();
}

// ---------------------------------------------------------------- comparing
struct Tol {
  double rtol;
  double atol;
};
// Tolerance for results stored in t after fp64 (or fp32) computation: a few units of t's
// rounding plus slack for fp32 compute.
inline Tol tol(DataType t) {
  switch (t) {
    case DataType::Double:
      return {1e-12, 1e-12};
    case DataType::Float:
      return {1e-5, 1e-6};
    case DataType::Half:
      return {2e-3, 1e-4};
    case DataType::BFloat16:
      return {1e-2, 1e-3};
    case DataType::FP8_E4M3:
      return {7e-2, 2e-2};
    case DataType::FP8_E5M2:
      return {1.3e-1, 4e-2};
    default:
      return {0.0, 0.0};  // integers and Boolean: exact
  }
}

// got[i] matches want[i] when |got - want| <= atol + rtol * |want|; NaN matches only NaN,
// inf only the same inf. Reports the first few mismatches with their index.
inline ::testing::AssertionResult all_close(const std::vector<double>& got,
                                            const std::vector<double>& want, Tol t) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure()
           << "size differs: got " << got.size() << " want " << want.size();
  std::ostringstream os;
  int bad = 0;
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    bool ok;
    if (std::isnan(w) || std::isnan(g)) {
      ok = std::isnan(w) && std::isnan(g);
    } else if (std::isinf(w) || std::isinf(g)) {
      ok = g == w;
    } else {
      const double err = std::fabs(g - w);
      worst = std::max(worst, err / (t.atol + t.rtol * std::fabs(w)));
      ok = err <= t.atol + t.rtol * std::fabs(w);
    }
    if (!ok && bad++ < 8) os << "\n  [" << i << "] got " << g << " want " << w;
  }
  if (bad)
    return ::testing::AssertionFailure() << bad << " of " << got.size() << " elements differ (rtol "
                                         << t.rtol << ", atol " << t.atol << "):" << os.str();
  return ::testing::AssertionSuccess() << "max error/tolerance " << worst;
}

// Rounds every value to t (what storing into a t tensor does).
inline std::vector<double> rounded(DataType t, std::vector<double> v) {
  for (double& x : v) x = dnngraph::reference::round_to(t, x);
  return v;
}

// Row-major unravel/ravel helpers for naive loops in tests.
inline std::vector<int64_t> unravel(int64_t i, const std::vector<int64_t>& dims) {
  std::vector<int64_t> idx(dims.size());
  for (size_t k = dims.size(); k-- > 0;) {
    idx[k] = i % dims[k];
    i /= dims[k];
  }
  return idx;
}
inline int64_t ravel(const std::vector<int64_t>& idx, const std::vector<int64_t>& dims) {
  int64_t i = 0;
  for (size_t k = 0; k < dims.size(); ++k) i = i * dims[k] + idx[k];
  return i;
}

// ---------------------------------------------------------------- hand-made kernel cases
// For families whose tests build one node by hand, port by port (norm, softmax, sdpa); a
// test file takes them all with `using namespace ref_test::hand_made;`.
//
//   constexpr char kNode[] = "norm0";
//   using Case = NamedCase<kNode>;
//   Case c(ir::NormFwdAttrs{...});
//   auto x = c.input(Role::X, make_buf("x", {2, 3}, DataType::Float)).fill(gen, -1, 1);
//   c.output(Role::Y, make_buf("y", {2, 3}, DataType::Float));  // poisoned
//   ASSERT_OK(c.run());
//   expect_close(c.result(Role::Y), want, tol_of(DataType::Float), "Y");

namespace hand_made {

// A port's tensor with its host storage, plus a random fill that returns the values as stored.
struct Buf : HostTensor {
  explicit Buf(dnngraph::ir::Tensor t) : HostTensor(std::move(t)) {}
  std::vector<double> get() const { return values(); }
  std::vector<double> fill(std::mt19937& gen, double lo, double hi) {
    std::uniform_real_distribution<double> d(lo, hi);
    std::vector<double> v(static_cast<size_t>(attrs->volume()));
    for (double& x : v) x = d(gen);
    set(v);
    return values();
  }
};

inline Buf make_buf(const std::string& name, std::vector<int64_t> dim, DataType dt,
                    std::vector<int64_t> stride = {}) {
  return Buf(make_tensor(name, std::move(dim), dt, std::move(stride)));
}

// A pass-by-value float scalar (no storage is bound for it).
inline Buf make_scalar(const std::string& name, double v) {
  auto t = std::make_shared<dnngraph::ir::TensorAttrs>();
  t->set_name(name).set_value(dnngraph::ir::Scalar::of_float(v));
  return Buf(t);
}

inline dnngraph::Status build_and_run(dnngraph::Graph& g, const dnngraph::VariantPack& pack);

// A node of one family written port by port, with the storage of each port by role. run()
// puts it in a graph (Graph::add_node) that is validated, built on the reference engine and
// executed: what a user could not build, the kernel never sees.
struct KernelCase {
  dnngraph::ir::Node node;
  std::map<dnngraph::ir::Role, Buf> in, out;

  KernelCase(std::string name, dnngraph::ir::OpAttrs attrs) {
    node.name = std::move(name);
    node.compute_data_type = DataType::Float;
    node.attrs = std::move(attrs);
  }
  Buf& input(dnngraph::ir::Role role, Buf b) {
    node.inputs.push_back({role, b.attrs});
    return in.insert_or_assign(role, std::move(b)).first->second;
  }
  Buf& output(dnngraph::ir::Role role, Buf b) {  // poisoned with NaN
    b.poison();
    node.outputs.push_back({role, b.attrs});
    return out.insert_or_assign(role, std::move(b)).first->second;
  }
  // validate, build and execute the one-node graph.
  dnngraph::Status run() {
    dnngraph::Graph g;
    g.add_node(node);
    DNNGRAPH_TRY(g.validate());
    dnngraph::VariantPack pack;
    for (const auto& p : node.inputs)
      if (!p.tensor->value) pack[p.tensor->uid] = in.at(p.role).data();
    for (const auto& p : node.outputs) pack[p.tensor->uid] = out.at(p.role).data();
    return build_and_run(g, pack);
  }
  std::vector<double> result(dnngraph::ir::Role role) const { return out.at(role).get(); }
};

// A test file's KernelCase, its node named `Name`:
//   constexpr char kNode[] = "norm0";
//   using Case = NamedCase<kNode>;
template <const char* Name>
struct NamedCase : KernelCase {
  NamedCase(dnngraph::ir::OpAttrs attrs)  // NOLINT
      : KernelCase(Name, std::move(attrs)) {}
};

inline double tol_of(DataType t) { return tol(t).rtol; }

// |got - want| <= rtol * (|want| + 1e-3 * max|want|): relative per element, with an absolute
// floor tied to the result's scale (gradients mix large and nearly cancelled elements).
inline void expect_close(const std::vector<double>& got, const std::vector<double>& want,
                         double rtol, const std::string& what) {
  double scale = 0.0;
  for (double w : want)
    if (std::isfinite(w)) scale = std::max(scale, std::fabs(w));
  EXPECT_TRUE(all_close(got, want, {rtol, rtol * 1e-3 * scale})) << what;
}

// ---------------------------------------------------------------- KernelCase ports in a Graph
// A graph tensor: the attributes of `b` (its name, dims, strides, type) plus a uid.
inline dnngraph::ir::Tensor graph_tensor(dnngraph::Graph& g, const Buf& b, int64_t uid) {
  dnngraph::ir::TensorAttrs a = *b.attrs;
  return g.tensor(a.set_uid(uid));
}
// Makes t a graph output with uid `uid` and b's dims, strides and data type.
inline void mark_output(const dnngraph::ir::Tensor& t, const Buf& b, int64_t uid) {
  t->set_output(true).set_uid(uid).set_dim(b.attrs->dim).set_stride(b.attrs->stride);
  t->set_data_type(b.attrs->data_type);
}
// Builds g on a CPU handle and executes it with `pack` and a workspace of the size it asks.
inline dnngraph::Status build_and_run(dnngraph::Graph& g, const dnngraph::VariantPack& pack) {
  auto h = dnngraph::Handle::create(dnngraph::Device::cpu());
  if (!h) return h.status();
  DNNGRAPH_TRY(g.build(*h));
  dnngraph::Result<int64_t> ws = g.get_workspace_size();
  if (!ws) return ws.status();
  std::vector<unsigned char> workspace(static_cast<size_t>(std::max<int64_t>(*ws, 1)));
  return g.execute(**h, pack, workspace.data(), static_cast<int64_t>(workspace.size()));
}
// A buffer for an output, poisoned with NaN.
inline Buf poisoned(const std::string& name, std::vector<int64_t> dim, DataType dt) {
  Buf b = make_buf(name, std::move(dim), dt);
  b.poison();
  return b;
}

}  // namespace hand_made
}  // namespace ref_test
