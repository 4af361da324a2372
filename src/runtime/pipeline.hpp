// Private state of dnngraph::Graph's build pipeline.
#pragma once

#include <memory>
#include <shared_mutex>
#include <string_view>
#include <vector>

#include "dnngraph/graph.hpp"

namespace dnngraph {

enum class Stage { None, Lowered, Planned, Checked, Built };

// What the user set on the graph; kept when the pipeline state is reset.
struct GraphSettings {
  PlanFilters filters;
  CudaGraphExecute cuda_graph_execute = CudaGraphExecute::Off;
  std::vector<HeurMode> modes = {HeurMode::A, HeurMode::Fallback};  // of the last planning
};

struct PipelineState {
  Stage stage = Stage::None;
  HandlePtr handle;
  Engine* engine = nullptr;
  ir::ValidatedGraphPtr validated;  // what the engine lowered
  std::unique_ptr<LoweredGraph> lowered;
  std::vector<std::unique_ptr<Candidate>> candidates;  // from create_execution_plans
  size_t checked = 0;                                  // candidates[0, checked) were checked
  std::vector<CandidateStatus> statuses;               // one per checked candidate
  std::vector<size_t> supported;                       // indexes into candidates
  std::vector<std::unique_ptr<Plan>> plans;            // one slot per supported candidate
  int64_t selected = -1;                               // index into supported
  bool by_engine = false;  // a candidate came from create_execution_plan (not the heuristics)
  // Non-virtual tensors without a constant value: each needs a pointer in a variant pack.
  std::vector<ir::Tensor> required;
  // Copies of every non-virtual tensor when lowered, sorted by uid: what the plans were built
  // for (check_unchanged compares the live tensors of `required` with them).
  std::vector<ir::TensorAttrs> built;
  std::vector<ir::TensorAttrs> required_built;  // required[i] when lowered
  // Guards the fields above: the pipeline steps lock it alone, execute shared.
  mutable std::shared_mutex mu;

  KernelCachePtr kernel_cache;  // kept when the rest is reset
  GraphSettings settings;       // kept when the rest is reset

  // Back to Stage::None (the lock, the kernel cache and the settings stay).
  void reset() {
    stage = Stage::None;
    handle.reset();
    engine = nullptr;
    plans.clear();  // before the candidates and the lowered graph they may refer to
    candidates.clear();
    lowered.reset();
    validated.reset();
    checked = 0;
    statuses.clear();
    supported.clear();
    selected = -1;
    by_engine = false;
    required.clear();
    built.clear();
    required_built.clear();
  }
};

// Whether `call` (execute, autotune, populate_cuda_graph, ...) may run the graph's plans with
// `handle`: not on a graph built deviceless (it must be deserialized onto a GPU first), and only
// with a handle on the device the graph was built for.
inline Status check_run_handle(const Graph& g, const PipelineState& st, const Handle& handle,
                               std::string_view call) {
  if (st.handle && st.handle->target())
    return make_error(ErrorCode::InvalidArgument, "graph '", g.name(),
                      "' was built without a device (ahead of time, for ",
                      st.handle->target()->describe(), "), so ", call,
                      "() cannot run it: serialize() it, deserialize() the bytes with a handle on "
                      "a GPU of that kind, then call ",
                      call, "() on the deserialized graph");
  if (st.handle && !(handle.device() == st.handle->device()))
    return make_error(ErrorCode::InvalidArgument, "graph '", g.name(), "': built for ",
                      st.handle->device().to_string(), " but ", call, "() got a handle on ",
                      handle.device().to_string());
  return Status::ok();
}

}  // namespace dnngraph
