// CUDA graphs of cuDNN plans: cudnnBackendPopulateCudaGraph / cudnnBackendUpdateCudaGraph where
// the engine allows it, stream capture (one child-graph node) otherwise, and the bounded cache
// of instantiated graphs behind graph-backed execute.
#include <cuda_runtime_api.h>

#include <array>

#include "engines/cudnn/plan.hpp"

namespace dnngraph::cudnn {
namespace {

Status cuda_check(cudaError_t e, const std::string& name, const char* what) {
  if (e == cudaSuccess) return Status::ok();
  (void)cudaGetLastError();
  return make_error(ErrorCode::BackendError, "plan '", name, "': ", what,
                    " failed: ", cudaGetErrorString(e));
}

// Runs the plan once on a private stream under capture; returns the captured graph.
Result<cudaGraph_t> capture(HandleState& hs, cudnnBackendDescriptor_t plan,
                            cudnnBackendDescriptor_t vp, const std::string& name) {
  if (!hs.capture_stream) {
    cudaStream_t s = nullptr;
    DNNGRAPH_TRY(cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), name,
                            "creating the capture stream"));
    hs.capture_stream = s;
  }
  auto stream = static_cast<cudaStream_t>(hs.capture_stream);
  hs.applied_epoch = ~0ull;  // the next execute sets the handle's stream again
  DNNGRAPH_TRY(check(api()->cudnnSetStream(hs.handle, stream), name, "cudnnSetStream"));
  DNNGRAPH_TRY(cuda_check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), name,
                          "cudaStreamBeginCapture"));
  const cudnnStatus_t rc = api()->cudnnBackendExecute(hs.handle, plan, vp);
  cudaGraph_t g = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream, &g);
  if (rc != CUDNN_STATUS_SUCCESS) {
    if (g) (void)cudaGraphDestroy(g);
    return check(rc, "plan '" + name + "'", "cudnnBackendExecute (under stream capture)");
  }
  DNNGRAPH_TRY(cuda_check(end, name, "cudaStreamEndCapture"));
  return g;
}

}  // namespace

bool native_cuda_graph(cudnnBackendDescriptor_t plan) {
  const Api* a = api();
  if (!a || !a->cudnnBackendPopulateCudaGraph || !a->cudnnBackendUpdateCudaGraph ||
      load_info().version < 90500)
    return false;
  auto cfg = Descriptor::create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "plan config");
  auto eng = Descriptor::create(CUDNN_BACKEND_ENGINE_DESCRIPTOR, "plan engine");
  if (!cfg || !eng) return false;
  cudnnBackendDescriptor_t craw = cfg->get(), eraw = eng->get();
  int64_t n = 0;
  if (a->cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                  CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                  &craw) != CUDNN_STATUS_SUCCESS ||
      !cfg->get(CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &eraw))
    return false;
  std::array<cudnnBackendBehaviorNote_t, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT> notes{};
  if (!eng->get(CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                static_cast<int64_t>(notes.size()), &n, notes.data()))
    return false;
  for (int64_t i = 0; i < n && i < static_cast<int64_t>(notes.size()); ++i)
    if (notes[static_cast<size_t>(i)] == CUDNN_BEHAVIOR_NOTE_SUPPORTS_CUDA_GRAPH_NATIVE_API)
      return true;
  return false;
}

Status record_cuda_graph(HandleState& hs, cudnnBackendDescriptor_t plan,
                         cudnnBackendDescriptor_t vp, bool native, void* graph_ptr, bool update,
                         const std::string& name) {
  auto graph = static_cast<cudaGraph_t>(graph_ptr);
  size_t count = 0;
  DNNGRAPH_TRY(cuda_check(cudaGraphGetNodes(graph, nullptr, &count), name, "cudaGraphGetNodes"));
  if (!update && count != 0)
    return make_error(ErrorCode::InvalidArgument, "plan '", name,
                      "': populate_cuda_graph needs an empty CUDA graph, this one has ", count,
                      " node(s) (populate a new graph; update_cuda_graph changes pointers)");
  if (native) {
    const cudnnStatus_t rc = update
                                 ? api()->cudnnBackendUpdateCudaGraph(hs.handle, plan, vp, graph)
                                 : api()->cudnnBackendPopulateCudaGraph(hs.handle, plan, vp, graph);
    Status s = check(rc, "plan '" + name + "'",
                     update ? "cudnnBackendUpdateCudaGraph" : "cudnnBackendPopulateCudaGraph");
    // A refused native population that left the graph empty falls back to capture.
    size_t after = 1;
    if (s || update || cudaGraphGetNodes(graph, nullptr, &after) != cudaSuccess || after != 0)
      return s;
  }
  // Capture: the graph holds one child-graph node, replaced on update.
  cudaGraphNode_t old = nullptr;
  if (update) {
    cudaGraphNodeType type{};
    if (count == 1) {
      DNNGRAPH_TRY(cuda_check(cudaGraphGetNodes(graph, &old, &count), name, "cudaGraphGetNodes"));
      DNNGRAPH_TRY(cuda_check(cudaGraphNodeGetType(old, &type), name, "cudaGraphNodeGetType"));
    }
    if (count != 1 || type != cudaGraphNodeTypeGraph)
      return make_error(ErrorCode::InvalidArgument, "plan '", name,
                        "': update_cuda_graph needs a graph that populate_cuda_graph filled with "
                        "this plan (one captured child-graph node); this one has ",
                        count, " node(s)");
  }
  DNNGRAPH_ASSIGN_OR_RETURN(auto captured, capture(hs, plan, vp, name));
  cudaGraphNode_t node = nullptr;
  Status s = Status::ok();
  if (old) s = cuda_check(cudaGraphDestroyNode(old), name, "cudaGraphDestroyNode");
  if (s)
    s = cuda_check(cudaGraphAddChildGraphNode(&node, graph, nullptr, 0, captured), name,
                   "cudaGraphAddChildGraphNode");
  (void)cudaGraphDestroy(captured);  // the node holds its own copy
  return s;
}

ReplayCache::~ReplayCache() {
  for (auto& e : entries_) (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(e.exec));
}

Result<bool> ReplayCache::launch(const std::vector<void*>& ptrs, void* workspace, void* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& e : entries_)
    if (e.workspace == workspace && e.ptrs == ptrs) {
      e.used = ++tick_;
      const cudaError_t rc =
          cudaGraphLaunch(static_cast<cudaGraphExec_t>(e.exec), static_cast<cudaStream_t>(stream));
      if (rc == cudaSuccess) {
        ++e.replays;
        ++stats_.replayed;
        return true;
      }
      (void)cudaGetLastError();
      return make_error(ErrorCode::BackendError,
                        "graph-backed execute: cudaGraphLaunch failed: ", cudaGetErrorString(rc));
    }
  return false;
}

Status ReplayCache::add_and_launch(const std::vector<void*>& ptrs, void* workspace, void* graph,
                                   void* stream, const std::string& name) {
  cudaGraphExec_t exec = nullptr;
  DNNGRAPH_TRY(cuda_check(cudaGraphInstantiate(&exec, static_cast<cudaGraph_t>(graph), 0), name,
                          "cudaGraphInstantiate"));
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_.size() >= kCapacity) {
    auto lru = entries_.begin();
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (it->used < lru->used) lru = it;
    if (lru->replays < 2) ++wasted_;
    (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(lru->exec));
    entries_.erase(lru);
  }
  entries_.push_back({ptrs, workspace, exec, ++tick_});
  ++stats_.recorded;
  return cuda_check(cudaGraphLaunch(exec, static_cast<cudaStream_t>(stream)), name,
                    "cudaGraphLaunch");
}

bool ReplayCache::record_now(const std::vector<void*>& ptrs, void* workspace) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the addresses (a collision only records)
  auto mix = [&h](const void* p) {
    h ^= static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p));
    h *= 1099511628211ull;
  };
  for (void* p : ptrs) mix(p);
  mix(workspace);
  h |= 1;  // 0 marks an empty slot
  std::lock_guard<std::mutex> lock(mu_);
  if (wasted_ >= static_cast<int64_t>(kCapacity)) return false;
  for (uint64_t& s : seen_)
    if (s == h) {
      s = 0;
      return true;
    }
  seen_[seen_next_] = h;
  seen_next_ = (seen_next_ + 1) % kSeen;
  return false;
}

void ReplayCache::count_direct() {
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.direct;
}

CudaGraphExecuteStats ReplayCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace dnngraph::cudnn
