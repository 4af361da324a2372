// The runtime every dnngraph torch op shares (runtime.hpp): checks, the cache key, handles, the
// graph cache, execution and the fallback policy.
#include "core/runtime.hpp"

#include "dnngraph/ir/json.hpp"

#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <list>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_map>

namespace dnngraph::torch_ops {

// ---------------------------------------------------------------- checks

DataType data_type_of(at::ScalarType t, const char* op, const char* name) {
  switch (t) {
    case at::kFloat:
      return DataType::Float;
    case at::kDouble:
      return DataType::Double;
    case at::kHalf:
      return DataType::Half;
    case at::kBFloat16:
      return DataType::BFloat16;
    default:
      TORCH_CHECK_TYPE(false, "dnngraph::", op, ": tensor '", name, "' has dtype ", t,
                       "; expected float32, float64, float16 or bfloat16 (convert it with .to())");
  }
}

void check_device(const char* op, const at::Tensor& x, const char* x_name,
                  std::initializer_list<std::pair<const at::Tensor*, const char*>> others) {
  const at::Device d = x.device();
  TORCH_CHECK_NOT_IMPLEMENTED(d.is_cpu() || d.is_cuda(), "dnngraph::", op, ": tensor '", x_name,
                              "' is on ", d, "; dnngraph runs on cpu (reference engine) and cuda",
                              " (cuDNN) tensors only");
  for (const auto& [t, name] : others) {
    if (t && t->defined())
      TORCH_CHECK_VALUE(t->device() == d, "dnngraph::", op, ": tensor '", name, "' is on ",
                        t->device(), " but '", x_name, "' is on ", d, "; move them to one device");
  }
}

void check_same_dtype(const char* op, const at::Tensor& x, const char* x_name, const at::Tensor& t,
                      const char* t_name) {
  TORCH_CHECK_TYPE(t.scalar_type() == x.scalar_type(), "dnngraph::", op, ": tensor '", t_name,
                   "' has dtype ", t.scalar_type(), " but '", x_name, "' has ", x.scalar_type(),
                   "; give both the same dtype");
}

std::vector<int64_t> dims_of(const at::Tensor& t) { return {t.sizes().begin(), t.sizes().end()}; }
std::vector<int64_t> strides_of(const at::Tensor& t) {
  return {t.strides().begin(), t.strides().end()};
}

void throw_status(const char* op, const Status& s) {
  switch (s.code()) {
    case ErrorCode::InvalidGraph:
    case ErrorCode::InvalidArgument:
      TORCH_CHECK_VALUE(false, "dnngraph::", op, ": ", s.message());
    case ErrorCode::NotSupported:
      TORCH_CHECK_NOT_IMPLEMENTED(false, "dnngraph::", op, ": ", s.message());
    default:
      TORCH_CHECK(false, "dnngraph::", op, ": ", s.to_string());
  }
}

// ---------------------------------------------------------------- key

Key& Key::add_str(std::string_view s) {
  add(static_cast<int64_t>(s.size()));
  int64_t w = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    w = (w << 8) | static_cast<unsigned char>(s[i]);
    if (i % 8 == 7) words_.push_back(w), w = 0;
  }
  return add(w);
}

Key& Key::add(const at::Tensor& t) {
  if (!t.defined()) return add(int64_t{-7});
  add(static_cast<int64_t>(t.dim()));
  add(static_cast<int64_t>(t.scalar_type()));
  for (int64_t s : t.sizes()) add(s);
  for (int64_t s : t.strides()) add(s);
  // Not the pointer's alignment: execute() binds a misaligned tensor through an aligned copy,
  // so one graph (its descriptors declare 16 bytes) serves both.
  return *this;
}

Key& Key::add(at::IntArrayRef v) {
  add(static_cast<int64_t>(v.size()));
  for (int64_t x : v) add(x);
  return *this;
}

Key& Key::add_device(const at::Device& d) {
  return add(static_cast<int64_t>(d.type()) * 1024 + d.index());
}

size_t Key::hash() const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the words
  for (int64_t w : words_) {
    h ^= static_cast<uint64_t>(w);
    h *= 1099511628211ull;
  }
  return static_cast<size_t>(h ^ (h >> 29));
}

// ---------------------------------------------------------------- handles

namespace {

constexpr int kMaxCudaDevices = 64;

struct DeviceSlot {
  std::once_flag once;
  HandlePtr handle;
  Status error;
  // set_stream + execute under one lock: two threads on two streams of one device must not
  // see each other's stream on the shared handle.
  std::mutex exec;
};

DeviceSlot& slot_for(const at::Device& d) {
  static DeviceSlot cpu;
  static std::array<DeviceSlot, kMaxCudaDevices> cuda;
  if (d.is_cpu()) return cpu;
  const int i = d.has_index() ? d.index() : 0;
  TORCH_CHECK(i >= 0 && i < kMaxCudaDevices, "dnngraph: CUDA device index ", i, " out of range");
  return cuda[i];
}

Device dnngraph_device(const at::Device& d) {
  return d.is_cpu() ? Device::cpu() : Device::cuda(d.has_index() ? d.index() : 0);
}

// The device's slot with its handle created (the handle is never replaced once made).
DeviceSlot& ready_slot(const at::Device& d, const char* op) {
  DeviceSlot& s = slot_for(d);
  std::call_once(s.once, [&] {
    std::optional<c10::DeviceGuard> guard;
    if (d.is_cuda()) guard.emplace(d);
    auto h = Handle::create(dnngraph_device(d));
    if (h.is_ok())
      s.handle = std::move(h).value();
    else
      s.error = h.status();
  });
  if (!s.handle) throw_status(op, s.error);
  return s;
}
const HandlePtr& handle_for(const at::Device& d, const char* op) {
  return ready_slot(d, op).handle;
}

// ---------------------------------------------------------------- cache

struct KeyHash {
  size_t operator()(const Key& k) const { return k.hash(); }
};

int64_t default_capacity() {
  if (const char* e = std::getenv("DNNGRAPH_TORCH_CACHE_SIZE")) {
    const long long v = std::atoll(e);
    if (v > 0) return v;
  }
  return 1024;
}

class GraphCache {
 public:
  std::shared_ptr<const BuiltGraph> find(const Key& k) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(k);
    if (it == map_.end()) {
      ++misses_;
      return nullptr;
    }
    ++hits_;
    lru_.splice(lru_.begin(), lru_, it->second.second);
    return it->second.first;
  }
  std::shared_ptr<const BuiltGraph> insert(const Key& k, std::shared_ptr<const BuiltGraph> g) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(k);
    if (it != map_.end()) return it->second.first;  // another thread built it first
    lru_.push_front(k);
    map_.emplace(k, std::make_pair(g, lru_.begin()));
    evict_locked();
    return g;
  }
  template <class F>
  void for_each(F&& f) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Key& k : lru_) f(*map_.at(k).first);
  }
  std::vector<int64_t> stats() {
    std::lock_guard<std::mutex> lock(mu_);
    CudaGraphExecuteStats replay;  // over the graphs cached now
    int64_t autotuned = 0;
    for (const auto& [k, v] : map_) {
      if (v.first->graph) replay += v.first->graph->cuda_graph_execute_stats();
      autotuned += v.first->autotuned;
    }
    return {static_cast<int64_t>(map_.size()),
            capacity_,
            hits_,
            misses_,
            replay.replayed,
            replay.recorded,
            replay.direct,
            autotuned};
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    map_.clear(), lru_.clear();
    hits_ = misses_ = 0;
  }
  void set_capacity(int64_t c) {
    std::lock_guard<std::mutex> lock(mu_);
    capacity_ = c;
    evict_locked();
  }

 private:
  void evict_locked() {
    while (static_cast<int64_t>(map_.size()) > capacity_) {
      map_.erase(lru_.back());
      lru_.pop_back();
    }
  }
  std::mutex mu_;
  std::list<Key> lru_;
  std::unordered_map<Key, std::pair<std::shared_ptr<const BuiltGraph>, std::list<Key>::iterator>,
                     KeyHash>
      map_;
  int64_t capacity_ = default_capacity();
  int64_t hits_ = 0, misses_ = 0;
};

// How the ops' plans execute on a GPU (set_cuda_graphs, DNNGRAPH_TORCH_CUDA_GRAPHS): "repeated"
// (the default) records a plan's work into a CUDA graph once the same pointers come back (a
// training loop's steady state) and replays it, which costs the host a graph launch instead of
// cuDNN's execute; "off" calls cuDNN's execute each time; "always" records every new set at once.
std::optional<CudaGraphExecute> parse_cuda_graphs(std::string_view v) {  // 0 and 1 as well
  return parse_cuda_graph_execute(v == "0" ? "off" : v == "1" ? "repeated" : v);
}

std::atomic<int>& cuda_graphs_slot() {
  static std::atomic<int> mode{[] {
    const char* e = std::getenv("DNNGRAPH_TORCH_CUDA_GRAPHS");
    if (!e || !*e) return static_cast<int>(CudaGraphExecute::Repeated);
    if (auto m = parse_cuda_graphs(e)) return static_cast<int>(*m);
    TORCH_WARN("dnngraph: DNNGRAPH_TORCH_CUDA_GRAPHS='", e,
               "' is not one of off, repeated, always (or 0, 1); using 'repeated'");
    return static_cast<int>(CudaGraphExecute::Repeated);
  }()};
  return mode;
}

CudaGraphExecute cuda_graph_mode() {
  return static_cast<CudaGraphExecute>(cuda_graphs_slot().load());
}

GraphCache& cache() {
  static GraphCache* c = new GraphCache();  // never destroyed: no teardown-order issues at exit
  return *c;
}

// torch.backends.cudnn.benchmark, as for ATen's convolutions: a CUDA graph built while it is set
// is autotuned once, on buffers of its own, on the current stream. The plan cache keeps the
// choice (a later build of the same graph, in this process or another, restores it). A graph
// that cannot be timed (first built inside a stream capture, out of memory) keeps the
// heuristics' plan, with a warning.
bool autotune_if_asked(Graph& g, const at::Device& device, const char* op) {
  if (!at::globalContext().benchmarkCuDNN()) return false;
  DeviceSlot& slot = ready_slot(device, op);
  const auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
  void* stream = impl->getStream(device).native_handle();
  Result<AutotuneReport> r = [&] {
    std::lock_guard<std::mutex> lock(slot.exec);
    slot.handle->set_stream(stream);
    AutotuneOptions o;
    o.keep_unselected = false;  // a cached graph runs one plan: the others' kernels would stay
    // Candidates are built as they are timed, and some engines compile kernels at build: the
    // time one graph may take (DNNGRAPH_TORCH_AUTOTUNE_BUDGET_MS, 0 for none), the heuristics'
    // first plan always timed.
    static const double budget_ms = [] {
      const char* e = std::getenv("DNNGRAPH_TORCH_AUTOTUNE_BUDGET_MS");
      return e && *e ? std::max(std::atof(e), 0.0) : 3000.0;
    }();
    o.budget_ms = budget_ms;
    return g.autotune(*slot.handle, o);
  }();
  if (r.is_ok()) return true;
  TORCH_WARN("dnngraph::", op, ": not autotuned although torch.backends.cudnn.benchmark is set (",
             r.status().message(), "); it runs the heuristics' first plan");
  return false;
}

}  // namespace

std::shared_ptr<const BuiltGraph> cached_graph(const Key& key, const at::Device& device,
                                               const char* op, GraphBuilder build) {
  if (auto g = cache().find(key)) return g;
  const HandlePtr& h = handle_for(device, op);
  auto built = std::make_shared<BuiltGraph>();
  // Tests of the ATen fallbacks (which a CPU machine never takes otherwise).
  static const bool force_fallback = std::getenv("DNNGRAPH_TORCH_FORCE_FALLBACK") != nullptr;
  if (force_fallback) {
    built->unsupported =
        make_error(ErrorCode::NotSupported, "DNNGRAPH_TORCH_FORCE_FALLBACK is set");
    return cache().insert(key, std::move(built));
  }
  auto g = std::make_unique<Graph>();
  g->set_name(op);
  build(*g);
  if (Status s = g->validate(); !s.is_ok()) throw_status(op, s);
  // Tests of the paths an engine without fusion takes (cuDNN has no fused plan for some
  // shapes): DNNGRAPH_TORCH_MAX_FUSED_NODES=N refuses every graph of more than N ops.
  static const int64_t max_nodes = [] {
    const char* e = std::getenv("DNNGRAPH_TORCH_MAX_FUSED_NODES");
    return e && *e ? std::max<int64_t>(std::atoll(e), 1) : int64_t{0};
  }();
  if (max_nodes > 0 && static_cast<int64_t>(g->nodes().size()) > max_nodes) {
    built->unsupported =
        make_error(ErrorCode::NotSupported,
                   "DNNGRAPH_TORCH_MAX_FUSED_NODES=" + std::to_string(max_nodes) +
                       " refuses this graph of " + std::to_string(g->nodes().size()) + " ops");
    return cache().insert(key, std::move(built));
  }
  {
    std::optional<c10::DeviceGuard> guard;
    if (device.is_cuda()) guard.emplace(device);
    Status s = g->build(h, {HeurMode::A, HeurMode::Fallback});
    if (!s.is_ok() && s.code() != ErrorCode::NotSupported) throw_status(op, s);
    if (s.is_ok()) {
      if (device.is_cuda()) {
        built->autotuned = autotune_if_asked(*g, device, op);
        g->set_cuda_graph_execute(cuda_graph_mode());
      }
      auto ws = g->get_workspace_size();  // of the plan autotune chose, if it ran
      if (!ws.is_ok()) throw_status(op, ws.status());
      built->workspace_bytes = ws.value();
      for (const auto& t : g->io_tensors()) {
        if (t->value) continue;
        built->io_uids.push_back(t->uid);
        if (t->is_output) built->output_uids.push_back(t->uid);
      }
      built->graph = std::move(g);
    } else {
      built->unsupported = s;
    }
  }
  return cache().insert(key, std::move(built));
}

namespace {

// The memory t reads, from its first element to its last (strides of torch tensors are >= 0),
// as a 1-D view of its storage.
at::Tensor span_of(const at::Tensor& t) {
  int64_t extent = 1;
  for (int64_t d = 0; d < t.dim(); ++d) extent += (t.size(d) - 1) * t.stride(d);
  return t.as_strided({extent}, {1}, t.storage_offset());
}

// A copy of what t spans in fresh (aligned) memory, viewed with t's sizes and strides, so the
// built graph's layout holds for it whatever its strides (overlapping ones too).
at::Tensor aligned_copy(const at::Tensor& t) {
  const at::Tensor span = span_of(t);
  return at::empty_like(span).copy_(span).as_strided(t.sizes(), t.strides(), 0);
}

void run(const BuiltGraph& g, const at::Device& device, const char* op,
         c10::ArrayRef<std::pair<int64_t, const at::Tensor*>> pack) {
  // One variant pack per thread, reused: a call of the same op finds the map's nodes for the
  // same uids and only overwrites the pointers (no allocation). It is rebuilt when the uids
  // differ, so that it never holds a uid the graph does not have or misses one it has.
  thread_local VariantPack vp;
  auto fill = [&] {
    size_t n = 0;
    for (const auto& [uid, t] : pack)
      if (t && t->defined() &&
          std::find(g.io_uids.begin(), g.io_uids.end(), uid) != g.io_uids.end()) {
        vp[uid] = t->data_ptr();
        ++n;
      }
    return n;
  };
  bool same_uids = vp.size() == g.io_uids.size();
  for (size_t i = 0; same_uids && i < g.io_uids.size(); ++i)
    same_uids = vp.count(g.io_uids[i]) != 0;
  if (!same_uids) vp.clear();
  if (fill() != vp.size()) {  // an io uid with no tensor this call: no stale pointer may stay
    vp.clear();
    fill();
  }
  at::Tensor ws;
  if (g.workspace_bytes > 0)
    ws = at::empty({g.workspace_bytes}, at::TensorOptions().dtype(at::kByte).device(device));
  DeviceSlot& slot = ready_slot(device, op);
  Handle* h = slot.handle.get();
  Status s;
  if (device.is_cuda()) {
    c10::DeviceGuard guard(device);
    const auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
    void* stream = impl->getStream(device).native_handle();
    std::lock_guard<std::mutex> lock(slot.exec);
    h->set_stream(stream);  // a no-op unless the stream changed
    s = g.graph->execute(*h, vp, ws.defined() ? ws.data_ptr() : nullptr, g.workspace_bytes);
  } else {
    std::lock_guard<std::mutex> lock(slot.exec);
    s = g.graph->execute(*h, vp, ws.defined() ? ws.data_ptr() : nullptr, g.workspace_bytes);
  }
  if (!s.is_ok()) throw_status(op, s);
}

}  // namespace

void execute(const BuiltGraph& g, const at::Device& device, const char* op,
             c10::ArrayRef<std::pair<int64_t, const at::Tensor*>> pack_in) {
  // Misaligned tensors through aligned copies (on the CPU too, where the reference engine would
  // read any address: one path on both), one copy per tensor however many uids bind it.
  c10::SmallVector<std::pair<const at::Tensor*, at::Tensor>, 2> copies;  // (caller's, copy)
  auto copy_of = [&](const at::Tensor* t) -> const at::Tensor* {
    for (const auto& c : copies)
      if (c.first == t) return &c.second;
    return nullptr;
  };
  auto is_output = [&](int64_t uid) {
    return std::find(g.output_uids.begin(), g.output_uids.end(), uid) != g.output_uids.end();
  };
  for (const auto& [uid, t] : pack_in)
    if (t && t->defined() && t->numel() > 0 && !aligned16(*t) && !copy_of(t))
      copies.emplace_back(t, at::Tensor());
  if (copies.empty()) return run(g, device, op, pack_in);
  for (auto& [orig, copy] : copies) copy = aligned_copy(*orig);
  // `copies` is complete: the pointers into it below stay valid.
  c10::SmallVector<std::pair<int64_t, const at::Tensor*>, 12> repacked;
  for (const auto& [uid, t] : pack_in) {
    const at::Tensor* c = copy_of(t);
    TORCH_CHECK_VALUE(!c || !is_output(uid) || at::has_internal_overlap(*t) != at::MemOverlap::Yes,
                      "dnngraph::", op, ": an output (uid ", uid,
                      ") has elements that share memory; give an output that does not overlap "
                      "itself");
    repacked.emplace_back(uid, c ? c : t);
  }
  run(g, device, op, repacked);
  for (const auto& [uid, t] : pack_in)  // outputs written into copies go back
    if (const at::Tensor* c = copy_of(t); c && is_output(uid))
      t->copy_(*c);  // element by element: other outputs may lie in the gaps
}

namespace {

enum class FallbackPolicy : int { Warn, Error };

FallbackPolicy parse_fallback_policy(std::string_view name, const char* source) {
  if (name == "warn") return FallbackPolicy::Warn;
  if (name == "error") return FallbackPolicy::Error;
  TORCH_CHECK_VALUE(false, "dnngraph: ", source, " is '", std::string(name),
                    "'; expected 'warn' (run on ATen with a warning when the engine has no plan)",
                    " or 'error' (raise instead)");
}

std::atomic<int>& fallback_policy_slot() {
  static std::atomic<int> policy{[] {
    const char* e = std::getenv("DNNGRAPH_TORCH_FALLBACK");
    return static_cast<int>(e && *e ? parse_fallback_policy(e, "DNNGRAPH_TORCH_FALLBACK")
                                    : FallbackPolicy::Warn);
  }()};
  return policy;
}

std::atomic<int64_t>& fallbacks_taken() {
  static std::atomic<int64_t> n{0};
  return n;
}

std::string policy_name(int p) {
  return static_cast<FallbackPolicy>(p) == FallbackPolicy::Error ? "error" : "warn";
}

}  // namespace

std::string fallback_policy() { return policy_name(fallback_policy_slot().load()); }

std::string set_fallback_policy(std::string_view policy) {
  const FallbackPolicy p = parse_fallback_policy(policy, "the fallback policy");
  return policy_name(fallback_policy_slot().exchange(static_cast<int>(p)));
}

int64_t fallback_count() { return fallbacks_taken().load(); }

void warn_fallback(const char* op, const Status& why) {
  fallbacks_taken().fetch_add(1);
  if (static_cast<FallbackPolicy>(fallback_policy_slot().load()) == FallbackPolicy::Error)
    TORCH_CHECK(false, "dnngraph::", op, ": the engine has no plan for these inputs and the ",
                "fallback policy is 'error', so the op does not run on ATen. Why: ", why.message(),
                ". Allow the ATen fallback with dnngraph.torch.set_fallback_policy('warn') or ",
                "DNNGRAPH_TORCH_FALLBACK=warn");
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mu);
  if (!warned.insert(op).second) return;
  TORCH_WARN("dnngraph::", op, ": the engine has no plan for these inputs, so the op runs on ",
             "ATen instead (warned once per op). Why: ", why.message());
}

std::vector<int64_t> cache_stats() { return cache().stats(); }

std::string cuda_graphs() { return std::string(cuda_graph_execute_name(cuda_graph_mode())); }

std::string set_cuda_graphs(std::string_view mode) {
  const auto m = parse_cuda_graphs(mode);
  TORCH_CHECK_VALUE(m.has_value(), "dnngraph: CUDA-graph mode '", std::string(mode),
                    "' is not one of 'off', 'repeated', 'always'");
  const auto old = static_cast<CudaGraphExecute>(cuda_graphs_slot().exchange(static_cast<int>(*m)));
  cache().for_each([&](const BuiltGraph& b) {          // the graphs built already follow too
    if (b.graph) b.graph->set_cuda_graph_execute(*m);  // the reference engine runs directly
  });
  return std::string(cuda_graph_execute_name(old));
}
std::vector<std::string> cached_graph_json(std::string_view op) {
  std::vector<std::string> out;
  cache().for_each([&](const BuiltGraph& b) {
    if (b.graph && b.graph->name() == op) out.push_back(ir::to_json(*b.graph));
  });
  return out;
}
void cache_clear() { cache().clear(); }
void cache_set_capacity(int64_t capacity) {
  TORCH_CHECK_VALUE(capacity >= 1, "dnngraph: cache capacity must be >= 1, got ", capacity);
  cache().set_capacity(capacity);
}

// ---------------------------------------------------------------- graph tensors

ir::Tensor tensor_like(Graph& g, int64_t uid, const char* name, std::vector<int64_t> dims,
                       std::vector<int64_t> strides, DataType type) {
  return g.tensor(ir::TensorAttrs()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim(std::move(dims))
                      .set_stride(std::move(strides))
                      .set_data_type(type));
}

ir::Tensor tensor_like(Graph& g, int64_t uid, const char* name, const at::Tensor& t) {
  return tensor_like(g, uid, name, dims_of(t), strides_of(t),
                     data_type_of(t, g.name().c_str(), name));
}

void output_like(const ir::Tensor& out, int64_t uid, const char* name, const at::Tensor& t) {
  out->set_output(true).set_name(name).set_uid(uid).set_dim(dims_of(t)).set_stride(strides_of(t));
  out->set_data_type(data_type_of(t, "output", name));
}

// ---------------------------------------------------------------- fallback controls

namespace {
std::string fallback_policy_op() { return fallback_policy(); }
std::string set_fallback_policy_op(const std::string& policy) {
  return set_fallback_policy(policy);
}
std::string set_cuda_graphs_op(const std::string& mode) { return set_cuda_graphs(mode); }
std::string cuda_graphs_op() { return cuda_graphs(); }
int64_t fallback_count_op() { return fallback_count(); }
}  // namespace

TORCH_LIBRARY_FRAGMENT(dnngraph, m) {
  // dnngraph.torch.fallback_policy / set_fallback_policy / fallback_count wrap these.
  m.def("_fallback_policy() -> str", &fallback_policy_op);
  m.def("_set_fallback_policy(str policy) -> str", &set_fallback_policy_op);
  m.def("_fallback_count() -> int", &fallback_count_op);
  // dnngraph.torch.cuda_graphs / set_cuda_graphs wrap these.
  m.def("_cuda_graphs() -> str", &cuda_graphs_op);
  m.def("_set_cuda_graphs(str mode) -> str", &set_cuda_graphs_op);
}

}  // namespace dnngraph::torch_ops
