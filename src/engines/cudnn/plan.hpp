// Internal types shared by engine.cpp (lowering, heuristics, candidates) and plan.cpp
// (execution): the lowered graph's state and the per-handle cuDNN state.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include <cuda_runtime_api.h>

#include "dnngraph/engines/handle.hpp"
#include "dnngraph/engines/interface.hpp"
#include "dnngraph/engines/kernel_cache.hpp"
#include "engines/cudnn/lowering.hpp"

namespace dnngraph::cudnn {

// Device addresses found on one GPU by cudaPointerGetAttributes (a driver call of about a
// microsecond that serialises on the runtime): execute asks about an address once, not on
// every call that binds it. A training step binds the same few hundred addresses of torch's
// caching allocator step after step, across every layer that shares a plan. Bounded: when full,
// one address makes room. (An address freed and then mapped again on another device or the host
// stays known; then cuDNN, not this check, meets it, as in the frontend, which checks none.)
class KnownDevicePointers {
 public:
  bool contains(const void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    return set_.count(reinterpret_cast<uintptr_t>(p)) != 0;
  }
  void add(const void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    if (set_.size() >= kCapacity) set_.erase(set_.begin());
    set_.insert(reinterpret_cast<uintptr_t>(p));
  }

 private:
  static constexpr size_t kCapacity = 4096;
  std::mutex mu_;
  std::unordered_set<uintptr_t> set_;
};

// The cuDNN engine's per-handle state (Handle::engine_state<HandleState>).
struct HandleState final : EngineState {
  cudnnHandle_t handle = nullptr;  // null on a deviceless handle
  int device = 0;
  // A deviceless handle's target (Handle::target()) as cuDNN's DEVICEPROP descriptor, given to
  // the heuristics, engines and plans instead of `handle` (device_properties.cpp).
  Descriptor device_properties;
  DevicePropertiesPtr target;      // the same, as given
  std::mutex mu;                   // one stream per handle: executes on it are serialised
  uint64_t applied_epoch = ~0ull;  // Handle::stream_epoch() last given to cudnnSetStream
  void* capture_stream = nullptr;  // cudaStream_t for CUDA graph capture, made on first use
  KnownDevicePointers on_device;   // addresses execute found on `device`
  ~HandleState() override;
};
Result<HandleState*> handle_state(Handle& handle);

// An attribute of CUDA device `device` (cached per device and attribute); -1 when the runtime
// cannot say.
int64_t device_attribute(int device, cudaDeviceAttr attr);

// A non-virtual tensor the variant pack must bind.
struct IoSlot {
  int64_t uid;
  std::string name;
  bool by_value;
  int constant = -1;  // index into LoweredState::constant_bytes when the plan supplies it
  int64_t elem_size = 0;
  int device_constant = -1;  // index into LoweredState::device_buffers when the plan owns it
  // A slice lowered as a view (LowerContext::derived): bound to the pointer the variant pack
  // gives graph input `source_uid`, plus `byte_offset`; -1 otherwise.
  int64_t source_uid = -1;
  std::string source_name{};
  int64_t byte_offset = 0;
  int64_t alignment = kTensorAlignment;  // what its descriptor declares (execute checks it)
  // A scratch tensor (LowerContext::scratch_tensor): bound to the workspace pointer plus
  // scratch_base(cuDNN's workspace size) plus this; -1 otherwise.
  int64_t scratch_offset = -1;
};

// Everything one lowered graph owns; shared by its candidates and plans.
struct LoweredState {
  std::unique_ptr<LowerContext> cx;  // owns tensor and operation descriptors
  Descriptor op_graph;
  std::string what;        // "graph 'name' (matmul 'mm0', pointwise ...)"
  std::vector<IoSlot> io;  // ordered by uid
  std::vector<std::array<unsigned char, 16>> constant_bytes;
  // Device copies of the lowering's device constants (LowerContext::device_constants), freed
  // with the state.
  std::vector<void*> device_buffers;
  int64_t scratch_bytes = 0;  // the scratch tensors' share of every plan's workspace
  int device = 0;
  cudnnHandle_t build_handle = nullptr;  // null when built deviceless
  // The deviceless target (HandleState::device_properties), else null.
  cudnnBackendDescriptor_t device_properties = nullptr;
  int64_t target_smem_optin = -1;  // the target's opt-in shared memory per block, when known
  // The graph's SM count target (ir::Graph::set_sm_count), -1 when unset: given to the
  // heuristics and to every engine finalized for this graph (sm_count.cpp).
  int32_t sm_count_target = -1;
  std::string device_name;          // "cuda:0", or the target's describe() when deviceless
  std::vector<Descriptor> engines;  // engines behind enumerated configs (engine.cpp)
  // Heuristics mode A's configs when lowering already asked for them (the SDPA variants).
  std::vector<Descriptor> configs_a;
  bool has_configs_a = false;
  // Shared by every plan of a dynamic-shape graph given one (kernel_cache.cpp).
  KernelCachePtr kernel_cache;
  LoweredState() = default;
  LoweredState(const LoweredState&) = delete;
  LoweredState& operator=(const LoweredState&) = delete;
  ~LoweredState();
};

// The workspace a plan of `st` needs: what cuDNN asks for, then the scratch tensors.
inline int64_t plan_workspace(const LoweredState& st, int64_t cudnn_workspace) {
  return st.scratch_bytes > 0 ? scratch_base(cudnn_workspace) + st.scratch_bytes : cudnn_workspace;
}

// Deviceless builds (device_properties.cpp): the DEVICEPROP descriptor of `props`
// (InvalidArgument when cuDNN rejects the JSON), and the one setter that hands it to a
// heuristics, engine or execution plan descriptor (nothing when `props` is null).
Result<Descriptor> device_properties_descriptor(const DeviceProperties& props);
enum class DevicePropUse { Heuristics, Engine, Plan };
Status set_device_properties(Descriptor& d, DevicePropUse use, cudnnBackendDescriptor_t props);
// NotSupported, saying why, when the CUDA driver library cuDNN needs to build plans is absent.
Status check_driver_library(const DeviceProperties& target);

// The graph's SM count target (ir::Graph::set_sm_count; sm_count.cpp): InvalidArgument when it
// exceeds the SM count of the handle's GPU (or of a deviceless handle's target); the one setter
// that gives it to a heuristics or engine descriptor (nothing when unset); and what cuDNN
// reports as an engine's target (-1 when it reports none).
Status check_sm_count_target(const ir::ValidatedGraph& g, const Handle& handle);
enum class SmCountUse { Heuristics, Engine };
Status set_sm_count_target(Descriptor& d, SmCountUse use, int32_t target);
int32_t reported_sm_count_target(const Descriptor& engine);

// The engine `engine` of the library for `st`'s operation graph, finalized (engine_knobs.cpp):
// InvalidArgument when out of range, NotSupported when that engine cannot run the graph.
Result<Descriptor> finalized_engine(const LoweredState& st, int64_t engine);

// Engines by global index for `st`'s operation graph (engine_knobs.cpp): how many, the knobs
// of one, and a finalized engine config of one with chosen knob values (the engine and knob
// descriptors it refers to are kept in st.engines).
Result<int64_t> engine_count(const LoweredState& st);
Result<std::vector<KnobInfo>> engine_knobs(const LoweredState& st, int64_t engine);
Result<Descriptor> engine_config(LoweredState& st, int64_t engine, const KnobChoices& knobs);

// Copies `values` into new device memory on `device` (freed by ~LoweredState when kept in
// device_buffers).
Result<void*> upload_device_constant(int device, const std::vector<float>& values,
                                     const std::string& what);

// The kernel cache of `st` (set), locked and set up for its operation graph. Plans are
// finalized with the lock held: builds that share a cache are serialised.
struct KernelCacheLock {
  std::unique_lock<std::mutex> lock;
  cudnnBackendDescriptor_t desc;
};
Result<KernelCacheLock> lock_kernel_cache(const LoweredState& st);

// The autotuner's timer (timer.cpp).
Result<std::unique_ptr<PlanTimer>> make_cuda_timer(Handle& handle);

// CUDA graphs (cuda_graph.cpp). Whether cudnnBackendPopulateCudaGraph may record `plan`: the
// loaded cuDNN has it (>= 9.5) and the plan's engine carries SUPPORTS_CUDA_GRAPH_NATIVE_API.
bool native_cuda_graph(cudnnBackendDescriptor_t plan);
// Records one execution of `plan` with variant pack `vp` into `graph` (void*: a cudaGraph_t):
// natively, or as one child-graph node captured on a private stream. `update`: `graph` holds
// an earlier recording of the same plan, which is replaced (native update or a new capture).
// The caller holds hs.mu.
Status record_cuda_graph(HandleState& hs, cudnnBackendDescriptor_t plan,
                         cudnnBackendDescriptor_t vp, bool native, void* graph, bool update,
                         const std::string& name);
// Instantiated graphs of one plan keyed by their pointers (graph-backed execute), bounded.
class ReplayCache {
 public:
  static constexpr size_t kCapacity = 16;
  // Repeated mode: the pointer sets of the last kSeen misses are remembered; a miss whose set is
  // among them is recorded. Recording stops for good once kCapacity graphs were evicted having
  // been replayed fewer than twice (more live pointer sets than the cache holds: each recording
  // would cost more than the executes it saves).
  static constexpr size_t kSeen = 64;
  ~ReplayCache();
  // Launches the graph recorded for `ptrs`/`workspace` on `stream`; false when there is none.
  Result<bool> launch(const std::vector<void*>& ptrs, void* workspace, void* stream);
  // Repeated mode, after a miss: whether to record this set now (else: execute directly).
  bool record_now(const std::vector<void*>& ptrs, void* workspace);
  // Instantiates `graph` (a cudaGraph_t, still owned by the caller) for `ptrs`, evicting the
  // least recently used entry when full, and launches it.
  Status add_and_launch(const std::vector<void*>& ptrs, void* workspace, void* graph, void* stream,
                        const std::string& name);
  void count_direct();
  CudaGraphExecuteStats stats() const;

 private:
  struct Entry {
    std::vector<void*> ptrs;
    void* workspace;
    void* exec;  // cudaGraphExec_t
    uint64_t used;
    int64_t replays = 0;
  };
  mutable std::mutex mu_;
  std::vector<Entry> entries_;
  uint64_t tick_ = 0;
  std::array<uint64_t, kSeen> seen_{};
  size_t seen_next_ = 0;
  int64_t wasted_ = 0;  // evicted after fewer than two replays
  CudaGraphExecuteStats stats_;
};

// Wraps a finalized execution plan.
Result<std::unique_ptr<Plan>> make_plan(std::shared_ptr<LoweredState> state, Descriptor plan,
                                        std::string name);

}  // namespace dnngraph::cudnn
