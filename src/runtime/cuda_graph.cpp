// Graph's CUDA graph entry points: populate/update a caller's cudaGraph_t with the selected
// plan, and the opt-in graph-backed execute. The engines do the work (Plan's virtuals).
#include <mutex>
#include <shared_mutex>

#include "dnngraph/graph.hpp"
#include "runtime/pipeline.hpp"

namespace dnngraph {
namespace {

// The caller holds the graph's lock (shared) and checks the variant pack.
Status cuda_graph_call(const Graph& g, const PipelineState& st, const char* what, Handle& handle,
                       const VariantPack& pack, void* workspace, void* cuda_graph, Plan** plan) {
  if (st.selected < 0)
    return make_error(ErrorCode::InvalidArgument, "graph '", g.name(), "': ", what,
                      "() called before build_plans()");
  DNNGRAPH_TRY(check_run_handle(g, st, handle, what));
  if (cuda_graph == nullptr)
    return make_error(ErrorCode::InvalidArgument, "graph '", g.name(), "': ", what,
                      "() needs a cudaGraph_t (made by cudaGraphCreate), got a null one");
  *plan = st.plans[static_cast<size_t>(st.selected)].get();
  if ((*plan)->workspace_size() > 0 && workspace == nullptr)
    return make_error(ErrorCode::InvalidArgument, "graph '", g.name(), "': plan '", (*plan)->name(),
                      "' needs a workspace of ", (*plan)->workspace_size(), " bytes, got none");
  return Status::ok();
}

}  // namespace

Status Graph::populate_cuda_graph(Handle& handle, const VariantPack& pack, void* workspace,
                                  void* cuda_graph) const {
  std::shared_lock<std::shared_mutex> lock(state_->mu);
  Plan* plan = nullptr;
  DNNGRAPH_TRY(cuda_graph_call(*this, *state_, "populate_cuda_graph", handle, pack, workspace,
                               cuda_graph, &plan));
  DNNGRAPH_TRY(check_variant_pack_unlocked(pack));
  return plan->populate_cuda_graph(handle, pack, workspace, cuda_graph);
}

Status Graph::update_cuda_graph(Handle& handle, const VariantPack& pack, void* workspace,
                                void* cuda_graph) const {
  std::shared_lock<std::shared_mutex> lock(state_->mu);
  Plan* plan = nullptr;
  DNNGRAPH_TRY(cuda_graph_call(*this, *state_, "update_cuda_graph", handle, pack, workspace,
                               cuda_graph, &plan));
  DNNGRAPH_TRY(check_variant_pack_unlocked(pack));
  return plan->update_cuda_graph(handle, pack, workspace, cuda_graph);
}

Graph& Graph::set_cuda_graph_execute(bool on) {
  return set_cuda_graph_execute(on ? CudaGraphExecute::Always : CudaGraphExecute::Off);
}

Graph& Graph::set_cuda_graph_execute(CudaGraphExecute mode) {
  std::unique_lock<std::shared_mutex> lock(state_->mu);  // execute reads it under the lock
  state_->settings.cuda_graph_execute = mode;
  return *this;
}

bool Graph::cuda_graph_execute() const {
  return cuda_graph_execute_mode() != CudaGraphExecute::Off;
}

CudaGraphExecute Graph::cuda_graph_execute_mode() const {
  std::shared_lock<std::shared_mutex> lock(state_->mu);
  return state_->settings.cuda_graph_execute;
}

CudaGraphExecuteStats Graph::cuda_graph_execute_stats() const {
  std::shared_lock<std::shared_mutex> lock(state_->mu);
  CudaGraphExecuteStats sum;
  for (const auto& p : state_->plans)
    if (p) sum += p->cuda_graph_execute_stats();
  return sum;
}

}  // namespace dnngraph
