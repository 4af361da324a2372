// Execution of a built cuDNN plan. A call gathers the pointers (uids fixed, constants bound),
// finds the variant pack prepared for them before or validates them and prepares one, applies
// the handle's stream only when its epoch moved, and launches. Several threads may execute one
// plan: the prepared packs are used under try_lock and a contended call builds its own.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <unordered_map>
#include <vector>

#include "engines/cudnn/plan.hpp"

namespace dnngraph::cudnn {

HandleState::~HandleState() {
  if (capture_stream) (void)cudaStreamDestroy(static_cast<cudaStream_t>(capture_stream));
  if (handle && api()) api()->cudnnDestroy(handle);
}

Result<HandleState*> handle_state(Handle& h) {
  // Made once per handle, under the handle's lock (Handle::engine_state).
  return h.engine_state<HandleState>([&h]() -> Result<std::unique_ptr<HandleState>> {
    const Api* a = api();
    if (!a) return make_error(ErrorCode::NotSupported, "cuDNN is not usable: ", load_info().error);
    if (h.device().kind != Device::Kind::CUDA)
      return make_error(ErrorCode::InvalidArgument, "the cuDNN engine needs a CUDA handle, got ",
                        h.device().to_string());
    if (h.target()) {  // deviceless: no GPU is touched, the target stands in for it
      auto st = std::make_unique<HandleState>();
      st->device = h.device().index;
      st->target = h.target();
      DNNGRAPH_ASSIGN_OR_RETURN(st->device_properties, device_properties_descriptor(*st->target));
      DNNGRAPH_TRY(check_driver_library(*st->target));
      return st;
    }
    int prev = 0;
    if (cudaGetDevice(&prev) != cudaSuccess) prev = 0;
    if (cudaError_t e = cudaSetDevice(h.device().index); e != cudaSuccess)
      return make_error(ErrorCode::BackendError, "cannot use ", h.device().to_string(), ": ",
                        cudaGetErrorString(e));
    auto st = std::make_unique<HandleState>();
    st->device = h.device().index;
    Status s = check(a->cudnnCreate(&st->handle), h.device().to_string(), "cudnnCreate");
    (void)cudaSetDevice(prev);
    if (!s) return s;
    return st;
  });
}

LoweredState::~LoweredState() {
  if (device_buffers.empty()) return;
  int prev = 0;
  if (cudaGetDevice(&prev) != cudaSuccess) prev = 0;
  if (cudaSetDevice(device) == cudaSuccess)
    for (void* p : device_buffers) (void)cudaFree(p);
  (void)cudaSetDevice(prev);
}

Result<void*> upload_device_constant(int device, const std::vector<float>& values,
                                     const std::string& what) {
  int prev = 0;
  if (cudaGetDevice(&prev) != cudaSuccess) prev = 0;
  void* p = nullptr;
  cudaError_t e = cudaSetDevice(device);
  if (e == cudaSuccess) e = cudaMalloc(&p, std::max<size_t>(values.size(), 1) * sizeof(float));
  if (e == cudaSuccess)
    e = cudaMemcpy(p, values.data(), values.size() * sizeof(float), cudaMemcpyHostToDevice);
  if (e != cudaSuccess && p) (void)cudaFree(p);
  (void)cudaSetDevice(prev);
  if (e != cudaSuccess)
    return make_error(ErrorCode::BackendError, what, ": cannot place ", values.size(),
                      " constant values on cuda:", device, ": ", cudaGetErrorString(e));
  return p;
}

namespace {

// cuDNN's runtime-compiled engines call the CUDA driver API at execute, which needs a context
// current in the calling thread. A thread that has made no CUDA runtime call yet has none (the
// autograd engine's device thread: it only checks the current device), and cuDNN then fails with
// CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER (invalid device context). cudaSetDevice on the
// thread's own current device makes its primary context current; done once per thread and
// device.
void make_context_current(int device) {
  thread_local uint64_t done = 0;  // bit d: done for device d
  const bool tracked = device >= 0 && device < 64;
  if (tracked && ((done >> device) & 1)) return;
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess || current != device) {
    (void)cudaGetLastError();
    return;  // the caller chose another device: not this function's to change
  }
  if (cudaSetDevice(device) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  if (tracked) done |= uint64_t{1} << device;
}

// The variant packs one plan prepared (validated and finalized), by what they bind: its
// pointers, then the workspace. The layers of a model that share a plan each find theirs again
// step after step, as torch's caching allocator hands out the same addresses. Bounded: when
// full, one pack makes room (its descriptor is filled again for the new pointers), so a model
// with more layers than that still finds most of its packs.
class PreparedPacks {
 public:
  using Key = std::vector<void*>;
  cudnnBackendDescriptor_t find(const Key& key) const {
    auto it = packs_.find(key);
    return it == packs_.end() ? nullptr : it->second.get();
  }
  // Prepares a pack for `key` with fill(Descriptor&) (a fresh descriptor, or an evicted one to
  // fill again) and keeps it.
  template <class Fill>
  Result<cudnnBackendDescriptor_t> add(const Key& key, const Fill& fill) {
    Descriptor d;
    if (packs_.size() >= kCapacity) {
      auto victim = packs_.begin();
      std::advance(victim, static_cast<std::ptrdiff_t>(next_victim_++ % packs_.size()));
      d = std::move(victim->second);
      packs_.erase(victim);
    }
    DNNGRAPH_TRY(fill(d));
    return packs_.emplace(key, std::move(d)).first->second.get();
  }

 private:
  static constexpr size_t kCapacity = 128;
  size_t next_victim_ = 0;
  struct Hash {
    size_t operator()(const Key& k) const {
      uint64_t h = 1469598103934665603ull;  // FNV-1a over the addresses
      for (void* p : k) h = (h ^ reinterpret_cast<uintptr_t>(p)) * 1099511628211ull;
      return static_cast<size_t>(h ^ (h >> 29));
    }
  };
  std::unordered_map<Key, Descriptor, Hash> packs_;
};

class CudnnPlan final : public Plan {
 public:
  // ws: what cuDNN asks for; the plan's workspace adds the scratch tensors after it.
  CudnnPlan(std::shared_ptr<LoweredState> st, Descriptor plan, std::string name, int64_t ws)
      : st_(std::move(st)),
        plan_(std::move(plan)),
        name_(std::move(name)),
        workspace_(plan_workspace(*st_, ws)),
        scratch_at_(scratch_base(ws)) {
    for (const auto& s : st_->io) uids_.push_back(s.uid);
  }

  std::string name() const override { return name_; }
  int64_t workspace_size() const override { return workspace_; }

  Status execute(Handle& handle, const VariantPack& pack, void* workspace) override {
    // Gather pointers in uid order (small: the vector is reused per thread).
    thread_local std::vector<void*> ptrs;
    DNNGRAPH_ASSIGN_OR_RETURN(auto hs, gather(handle, pack, workspace, ptrs));
    return execute_gathered(handle, *hs, ptrs, workspace);
  }

  // execute() once the pointers are gathered (uid order).
  Status execute_gathered(Handle& handle, HandleState& hs, const std::vector<void*>& ptrs,
                          void* workspace) {
    thread_local std::vector<void*> key;  // the pointers, then the workspace
    key.assign(ptrs.begin(), ptrs.end());
    key.push_back(workspace);

    std::unique_lock<std::mutex> prepared(mu_, std::try_to_lock);
    cudnnBackendDescriptor_t vp = prepared.owns_lock() ? packs_.find(key) : nullptr;
    Descriptor own;  // used when another thread holds the prepared packs
    if (!vp) {
      DNNGRAPH_TRY(validate(ptrs, workspace, hs));
      if (prepared.owns_lock()) {
        DNNGRAPH_ASSIGN_OR_RETURN(
            vp, packs_.add(key, [&](Descriptor& d) { return fill_pack(d, ptrs, workspace); }));
      } else {
        DNNGRAPH_TRY(fill_pack(own, ptrs, workspace));
        vp = own.get();
      }
    }
    std::lock_guard<std::mutex> on_stream(hs.mu);
    const uint64_t epoch = handle.stream_epoch();
    if (hs.applied_epoch != epoch) {
      DNNGRAPH_TRY(
          check(api()->cudnnSetStream(hs.handle, static_cast<cudaStream_t>(handle.stream())), name_,
                "cudnnSetStream"));
      hs.applied_epoch = epoch;
    }
    make_context_current(hs.device);
    const cudnnStatus_t rc = api()->cudnnBackendExecute(hs.handle, plan_.get(), vp);
    if (rc == CUDNN_STATUS_SUCCESS) return Status::ok();  // no message built on the hot path
    return check(rc, "plan '" + name_ + "'", "cudnnBackendExecute");
  }

  // CUDA graphs (cuda_graph.cpp): native where the engine allows it, else stream capture.
  Status populate_cuda_graph(Handle& handle, const VariantPack& pack, void* workspace,
                             void* cuda_graph) override {
    return record(handle, pack, workspace, cuda_graph, false);
  }
  Status update_cuda_graph(Handle& handle, const VariantPack& pack, void* workspace,
                           void* cuda_graph) override {
    return record(handle, pack, workspace, cuda_graph, true);
  }

  // Graph-backed execute: replays the graph recorded for these pointers; on a miss records one
  // (Always) or, in Repeated mode, only for a set seen before (else executes directly). Inside a
  // caller's stream capture it executes directly (the capture records that).
  Status execute_replayed(Handle& handle, const VariantPack& pack, void* workspace,
                          CudaGraphExecute mode) override {
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(static_cast<cudaStream_t>(handle.stream()), &cap) != cudaSuccess) {
      (void)cudaGetLastError();
      cap = cudaStreamCaptureStatusNone;
    }
    if (cap != cudaStreamCaptureStatusNone) {
      replays_.count_direct();
      return execute(handle, pack, workspace);
    }
    thread_local std::vector<void*> ptrs, key;
    DNNGRAPH_ASSIGN_OR_RETURN(auto hs, gather(handle, pack, workspace, ptrs));
    make_context_current(hs->device);  // a launch from a thread without one (autograd's)
    // A recorded graph holds the values of pass-by-value tensors, not their host addresses: the
    // key carries those values.
    key = ptrs;
    for (size_t i = 0; i < st_->io.size(); ++i)
      if (st_->io[i].by_value) {
        uintptr_t v = 0;
        std::memcpy(&v, ptrs[i],
                    std::min<size_t>(sizeof v, static_cast<size_t>(st_->io[i].elem_size)));
        key[i] = reinterpret_cast<void*>(v);
      }
    DNNGRAPH_ASSIGN_OR_RETURN(auto hit, replays_.launch(key, workspace, handle.stream()));
    if (hit) return Status::ok();
    if (mode == CudaGraphExecute::Repeated && !replays_.record_now(key, workspace)) {
      replays_.count_direct();
      return execute_gathered(handle, *hs, ptrs, workspace);
    }
    cudaGraph_t graph = nullptr;
    if (cudaGraphCreate(&graph, 0) != cudaSuccess) {
      (void)cudaGetLastError();
      return make_error(ErrorCode::BackendError, "plan '", name_, "': cudaGraphCreate failed");
    }
    Status s = record(handle, pack, workspace, graph, false);
    if (s) s = replays_.add_and_launch(key, workspace, graph, handle.stream(), name_);
    (void)cudaGraphDestroy(graph);
    return s;
  }

  CudaGraphExecuteStats cuda_graph_execute_stats() const override { return replays_.stats(); }

  Result<std::string> serialize() const override {
    int64_t n = 0;
    DNNGRAPH_TRY(
        plan_.get(CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, 0, &n, nullptr));
    std::string json(static_cast<size_t>(n), '\0');
    DNNGRAPH_TRY(plan_.get(CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, n, &n,
                           json.data()));
    while (!json.empty() && json.back() == '\0') json.pop_back();
    return json;
  }

 private:
  // The handle's state and the pack's pointers in uid order (constants bound), checked for
  // presence; the workspace is checked against the plan's need.
  Result<HandleState*> gather(Handle& handle, const VariantPack& pack, void* workspace,
                              std::vector<void*>& ptrs) const {
    DNNGRAPH_ASSIGN_OR_RETURN(auto hs, handle_state(handle));
    if (hs->device != st_->device)
      return make_error(ErrorCode::InvalidArgument, "plan '", name_,
                        "' was built for cuda:", st_->device, " but the handle is ",
                        handle.device().to_string());
    ptrs.resize(uids_.size());
    for (size_t i = 0; i < st_->io.size(); ++i) {
      const IoSlot& s = st_->io[i];
      if (s.constant >= 0) {
        ptrs[i] = st_->constant_bytes[static_cast<size_t>(s.constant)].data();
        continue;
      }
      if (s.device_constant >= 0) {
        ptrs[i] = st_->device_buffers[static_cast<size_t>(s.device_constant)];
        continue;
      }
      if (s.scratch_offset >= 0) {  // a null workspace is refused below
        ptrs[i] =
            workspace ? static_cast<char*>(workspace) + scratch_at_ + s.scratch_offset : nullptr;
        continue;
      }
      // A slice's view is bound to its source's pointer plus the offset (0 for the others):
      // one lookup and one add, as for any tensor.
      auto it = pack.find(s.source_uid >= 0 ? s.source_uid : s.uid);
      if (it == pack.end() || it->second == nullptr) {
        const char* what = it == pack.end() ? "no entry in the variant pack" : "a null pointer";
        if (s.source_uid >= 0)
          return make_error(ErrorCode::InvalidArgument, "plan '", name_, "': tensor '",
                            s.source_name, "' (uid ", s.source_uid, "), which slice output '",
                            s.name, "' is a view of, has ", what);
        return make_error(ErrorCode::InvalidArgument, "plan '", name_, "': tensor '", s.name,
                          "' (uid ", s.uid, ") has ", what);
      }
      ptrs[i] = static_cast<char*>(it->second) + s.byte_offset;
    }
    if (workspace_ > 0 && workspace == nullptr)
      return make_error(ErrorCode::InvalidArgument, "plan '", name_, "' needs ", workspace_,
                        " bytes of workspace but got a null pointer");
    return hs;
  }

  // Records this plan for `pack` into a caller's CUDA graph (a new variant pack: the prepared
  // one may be in use by an execute on another thread).
  Status record(Handle& handle, const VariantPack& pack, void* workspace, void* graph,
                bool update) {
    std::vector<void*> ptrs;
    DNNGRAPH_ASSIGN_OR_RETURN(auto hs, gather(handle, pack, workspace, ptrs));
    DNNGRAPH_TRY(validate(ptrs, workspace, *hs));
    Descriptor vp;
    DNNGRAPH_TRY(fill_pack(vp, ptrs, workspace));
    int native = native_.load(std::memory_order_relaxed);
    if (native < 0) {
      native = native_cuda_graph(plan_.get()) ? 1 : 0;
      native_.store(native, std::memory_order_relaxed);
    }
    std::lock_guard<std::mutex> on_stream(hs->mu);
    return record_cuda_graph(*hs, plan_.get(), vp.get(), native == 1, graph, update, name_);
  }

  // Non-null was checked by the caller; here: alignment and that device pointers (and the
  // workspace) live on the plan's GPU, asked once per address (hs.on_device). Pass-by-value
  // tensors point to host scalars.
  Status validate(const std::vector<void*>& ptrs, void* workspace, HandleState& hs) const {
    for (size_t i = 0; i < st_->io.size(); ++i) {
      const IoSlot& s = st_->io[i];
      if (s.by_value) continue;
      const auto addr = reinterpret_cast<uintptr_t>(ptrs[i]);
      if (addr % static_cast<uintptr_t>(s.alignment) != 0) {
        if (s.source_uid >= 0)  // the offset is a multiple of the alignment: the source is not
          return make_error(ErrorCode::InvalidArgument, "plan '", name_, "': slice output '",
                            s.name, "' is a view of tensor '", s.source_name, "' (uid ",
                            s.source_uid, ") at byte offset ", s.byte_offset, ", at ", ptrs[i],
                            ", aligned to less than the ", s.alignment,
                            " bytes its descriptor declares; bind '", s.source_name,
                            "' at an address aligned to ", kTensorAlignment, " bytes");
        return make_error(ErrorCode::InvalidArgument, "plan '", name_, "': tensor '", s.name,
                          "' (uid ", s.uid, ") is at ", ptrs[i], ", aligned to less than the ",
                          s.alignment, " bytes its descriptor declares");
      }
      DNNGRAPH_TRY(on_plan_device(
          hs, ptrs[i], [&] { return detail::cat("tensor '", s.name, "' (uid ", s.uid, ")"); }));
    }
    if (workspace)
      DNNGRAPH_TRY(on_plan_device(hs, workspace, [] { return std::string("workspace"); }));
    return Status::ok();
  }

  template <class Who>
  Status on_plan_device(HandleState& hs, void* ptr, const Who& who) const {
    if (hs.on_device.contains(ptr)) return Status::ok();
    cudaPointerAttributes attr{};
    cudaError_t e = cudaPointerGetAttributes(&attr, ptr);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return make_error(ErrorCode::InvalidArgument, "plan '", name_, "': ", who(),
                        ": cannot query pointer ", ptr, ": ", cudaGetErrorString(e));
    }
    const bool on_device = attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
    if (!on_device || attr.device != st_->device)
      return make_error(
          ErrorCode::InvalidArgument, "plan '", name_, "': ", who(), " points to ",
          on_device ? "memory of cuda:" + std::to_string(attr.device) : std::string("host memory"),
          " but the plan runs on cuda:", st_->device);
    hs.on_device.add(ptr);
    return Status::ok();
  }

  Status fill_pack(Descriptor& vp, const std::vector<void*>& ptrs, void* workspace) const {
    // Re-initialise a descriptor made before (one evicted from packs_) in place; create one when
    // there is none or cuDNN refuses to re-initialise.
    if (!vp || api()->cudnnBackendInitialize(vp.get()) != CUDNN_STATUS_SUCCESS) {
      DNNGRAPH_ASSIGN_OR_RETURN(auto d, Descriptor::create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR,
                                                           "variant pack of plan '" + name_ + "'"));
      vp = std::move(d);
    }
    DNNGRAPH_TRY(vp.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids_));
    DNNGRAPH_TRY(vp.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, ptrs));
    DNNGRAPH_TRY(vp.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, workspace));
    return vp.finalize(ErrorCode::InvalidArgument);
  }

  std::shared_ptr<LoweredState> st_;
  Descriptor plan_;
  std::string name_;
  int64_t workspace_;
  int64_t scratch_at_;  // where the scratch tensors start in the workspace
  std::vector<int64_t> uids_;
  std::mutex mu_;  // guards packs_
  PreparedPacks packs_;
  std::atomic<int> native_{-1};  // native CUDA graph API usable: -1 not asked yet, 0, 1
  ReplayCache replays_;
};

}  // namespace

Result<std::unique_ptr<Plan>> make_plan(std::shared_ptr<LoweredState> state, Descriptor plan,
                                        std::string name) {
  int64_t ws = 0, n = 0;
  DNNGRAPH_TRY(plan.get(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &ws));
  return std::unique_ptr<Plan>(
      std::make_unique<CudnnPlan>(std::move(state), std::move(plan), std::move(name), ws));
}

}  // namespace dnngraph::cudnn
