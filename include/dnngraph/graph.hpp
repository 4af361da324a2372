// The public graph: the IR builder plus the build pipeline and execution.
//   validate -> build_operation_graph -> create_execution_plans -> check_support
//   -> build_plans -> execute
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dnngraph/autotune.hpp"
#include "dnngraph/engines/handle.hpp"
#include "dnngraph/engines/interface.hpp"
#include "dnngraph/engines/kernel_cache.hpp"
#include "dnngraph/ir/graph.hpp"
#include "dnngraph/status.hpp"

namespace dnngraph {

struct PipelineState;

// build_plans(): build the first supported candidate that builds, or all of them.
enum class BuildPlanPolicy : int { HeuristicsChoice, All };

// One candidate after check_support, as shown to users.
struct CandidateStatus {
  CandidateInfo info;
  Status support;  // Ok or why it was rejected
  bool built = false;
  int64_t workspace_size = -1;  // known once built
};

class Graph : public ir::Graph {
 public:
  Graph();
  ~Graph() override;
  Graph(Graph&&) noexcept;
  Graph& operator=(Graph&&) noexcept;

  // The graph context is ir::Graph's (include/dnngraph/ir/graph.hpp): set_name, the data
  // types, set_dynamic_shape_enabled, and set_sm_count(n), the most SMs the graph's GPU plans
  // may use (cuDNN SM carveout; docs/cudnn-engine.md, "SM count target"), read at the next
  // build_operation_graph.

  // A kernel cache shared with other graphs: graphs with dynamic shapes
  // (set_dynamic_shape_enabled) reuse the kernels it holds (see kernel_cache.hpp).
  Graph& set_kernel_cache(KernelCachePtr cache);
  const KernelCachePtr& kernel_cache() const;

  using ir::Graph::validate;
  // validate(), then the refusals of the engine that would lower the graph on the handle's
  // device which need no backend call (Engine::precheck: e.g. the cuDNN frontend's SDPA mask
  // rules), so that such a graph is refused at validation as the frontend refuses it.
  Status validate(const HandlePtr& handle);
  // validate() then lower onto the first engine that runs on the handle's device.
  Status build_operation_graph(const HandlePtr& handle);
  // Deviceless (ahead-of-time) build: lowers for the GPU `target` describes, with no GPU and no
  // handle (the same as a handle of Handle::create_deviceless); then create_execution_plans,
  // check_support and build_plans as usual. The plans cannot execute here: serialize() the
  // graph and deserialize() it with a handle on a GPU of that kind (device_properties.hpp).
  Status build_operation_graph(const DevicePropertiesPtr& target);
  // Collects candidates from each mode in order, de-duplicated by name.
  Status create_execution_plans(const std::vector<HeurMode>& modes);
  // Engines by index, without heuristics (the frontend's get_engine_count,
  // get_knobs_for_engine and create_execution_plan), after build_operation_graph: how many
  // engines the graph's engine library has, the knobs of one (NotSupported when that engine
  // cannot run the graph), and create_execution_plan, which appends the candidate of one engine
  // with chosen knob values (unset knobs keep the engine's defaults) to the candidates, after
  // those create_execution_plans collected, if any; then check_support and build_plans as usual.
  Result<int64_t> get_engine_count() const;
  Result<std::vector<KnobInfo>> get_knobs_for_engine(int64_t engine) const;
  Status create_execution_plan(int64_t engine, const KnobChoices& knobs = {});
  // Checks candidates in order and stops at the first supported one (cheap: no kernel is
  // compiled where the engine can tell without); NotSupported (with every reason) when none
  // is. The rest are checked when asked for (a later plan index, All, the plan count, the
  // candidate reports).
  Status check_support();
  // HeuristicsChoice builds the first supported candidate that builds (and nothing else);
  // All builds them all. HeuristicsChoice on an engine that reloads plans (cuDNN) first asks
  // the plan cache (plan_cache.hpp), under build()'s key, and restores what it holds.
  Status build_plans(BuildPlanPolicy policy = BuildPlanPolicy::HeuristicsChoice);
  // All five steps. With HeuristicsChoice on an engine that reloads plans (cuDNN), the plan
  // cache (plan_cache.hpp) is asked first and given the result.
  Status build(const HandlePtr& handle,
               const std::vector<HeurMode>& modes = {HeurMode::A, HeurMode::Fallback},
               BuildPlanPolicy policy = BuildPlanPolicy::HeuristicsChoice);

  // Supported candidates, in order (valid after check_support; checks the unchecked ones).
  int64_t get_execution_plan_count() const;
  Status build_plan_at_index(int64_t index);
  Result<int64_t> get_workspace_size() const;  // of the plan execute() uses
  Result<int64_t> get_workspace_size_plan_at_index(int64_t index) const;
  // Every candidate seen by check_support, supported or not, with the reason.
  const std::vector<CandidateStatus>& candidates() const;
  // Index of the plan execute() uses, or -1.
  int64_t selected_plan_index() const;
  Status select_plan(int64_t index);

  // workspace_bytes < 0: the caller does not know the buffer's size (not checked).
  Status execute(Handle& handle, const VariantPack& pack, void* workspace,
                 int64_t workspace_bytes = -1) const;
  Status execute_plan_at_index(Handle& handle, const VariantPack& pack, void* workspace,
                               int64_t index, int64_t workspace_bytes = -1) const;

  // A built graph as bytes: the graph's JSON description, the engine, the selected candidate
  // and, where the engine can, its compiled plan. deserialize() restores it on `handle`
  // without the heuristics (and without recompiling when the engine stored its plan).
  // A graph built deviceless also stores its target's properties: deserialize() onto a GPU of
  // another compute capability fails, saying what differs.
  Result<std::string> serialize() const;
  Status deserialize(const HandlePtr& handle, std::string_view bytes);

  // Checks a variant pack against the graph's non-virtual tensors without running anything.
  Status check_variant_pack(const VariantPack& pack) const;

  // The plans run on what the graph was when build_operation_graph() lowered it. Editing a
  // non-virtual tensor afterwards (dims, strides, data type, uid, flags) makes execute() fail
  // with this error until the graph is built again; Ok when unchanged or not yet lowered.
  Status check_unchanged() const;
  // The non-virtual tensor with this uid as it was when the graph was lowered (what the plans
  // expect of its buffer), or null.
  const ir::TensorAttrs* built_tensor(int64_t uid) const;

  // ---- plan filters (the frontend's deselect_* / select_*; autotune.hpp) ----
  // Applied as candidates are checked and plans built: set them before check_support() (a
  // change afterwards re-checks the candidates, so check_support() must be called again).
  Graph& deselect_engines(std::vector<std::string> names);
  Graph& select_numeric_notes(std::vector<std::string> notes);  // keep those with all of them
  Graph& deselect_numeric_notes(std::vector<std::string> notes);
  Graph& select_behavior_notes(std::vector<std::string> notes);
  Graph& deselect_behavior_notes(std::vector<std::string> notes);
  Graph& deselect_workspace_greater_than(int64_t bytes);
  Graph& set_plan_filters(PlanFilters filters);
  const PlanFilters& plan_filters() const;

  // ---- autotuning (autotune.hpp) ----
  // Builds every supported candidate the filters allow, times each on `pack` (warm-up, a cache
  // flush before each timed run, optional rotating input copies, the median of the runs) and
  // selects the fastest. The choice and its time go to the plan cache (plan_cache.hpp): a later
  // autotune of the same graph on the same device and backend selects it without timing, and a
  // later build() restores it. Needs build_operation_graph() (or build()); candidates needing
  // more than `workspace_bytes` (when >= 0) are skipped.
  Result<AutotuneReport> autotune(Handle& handle, const VariantPack& pack, void* workspace,
                                  int64_t workspace_bytes, const AutotuneOptions& options = {});
  // The same on buffers autotune allocates itself (inputs filled with values in [-1, 1],
  // pass-by-value scalars 1, outputs and the largest workspace): `dnngraph tune`, Python's
  // graph.autotune(handle) without a variant pack.
  Result<AutotuneReport> autotune(Handle& handle, const AutotuneOptions& options = {});
  // The largest workspace among the plans autotune() would time (builds them).
  Result<int64_t> get_autotune_workspace_size();

  // ---- CUDA graphs ----
  // Records the selected plan's work for `pack` into `cuda_graph` (an empty cudaGraph_t), through
  // cuDNN's own API where the engine allows it (cuDNN >= 9.5, behaviour note
  // SUPPORTS_CUDA_GRAPH_NATIVE_API), else by stream capture (one child-graph node).
  // update_cuda_graph points a graph populate_cuda_graph filled at new pointers.
  Status populate_cuda_graph(Handle& handle, const VariantPack& pack, void* workspace,
                             void* cuda_graph) const;
  Status update_cuda_graph(Handle& handle, const VariantPack& pack, void* workspace,
                           void* cuda_graph) const;
  // Graph-backed execute (off by default): execute() records a CUDA graph once per distinct set
  // of pointers and replays it afterwards (a bounded LRU per plan, dropped with the plan); see
  // CudaGraphExecute for the modes (true: Always). Inside a caller's stream capture execute()
  // runs directly, and the capture records it.
  Graph& set_cuda_graph_execute(bool on);
  Graph& set_cuda_graph_execute(CudaGraphExecute mode);
  bool cuda_graph_execute() const;  // mode != Off
  CudaGraphExecute cuda_graph_execute_mode() const;
  CudaGraphExecuteStats cuda_graph_execute_stats() const;  // summed over the built plans

  // Thread safety: the pipeline steps, execute, serialize, the plan filters and the CUDA graph
  // calls lock the graph (execute shares the lock with other executes, the steps take it
  // alone), so a build and an execute of one graph from two threads never overlap. autotune()
  // runs the steps one after the other, each locked: do not autotune a graph that another
  // thread builds at the same time. Editing the IR (tensors, ops) while another thread builds
  // or executes the graph is not synchronized: do it between those calls.

 private:
  void set_required();
  void adopt_plan(std::unique_ptr<Plan> plan, CandidateInfo info);
  Status restore_plan(const HandlePtr& handle, Engine& engine, std::string_view bytes);
  std::string plan_cache_key(const Engine& engine, const Handle& handle,
                             const std::vector<HeurMode>& modes, std::string_view policy) const;
  void reset_checks();                           // after a filter change
  Status apply_workspace_filter(int64_t index);  // a built plan over the workspace limit
  Result<bool> reuse_tuned(const std::string& name);
  // The choice an earlier autotune recorded in the plan cache, selected (true, `report` filled),
  // or false when there is none to use.
  Result<bool> autotune_from_cache(const AutotuneOptions& o, AutotuneReport& report);
  bool check_next() const;                // checks the next unchecked candidate
  bool check_until(int64_t index) const;  // until `index` supported ones are known
  int64_t plan_count_unlocked() const;
  Status build_operation_graph_unlocked(const HandlePtr& handle);
  Status create_execution_plans_unlocked(const std::vector<HeurMode>& modes);
  Status check_support_unlocked();
  Status build_plan_at_index_unlocked(int64_t index);
  Status build_plans_unlocked(BuildPlanPolicy policy);
  Status check_variant_pack_unlocked(const VariantPack& pack) const;
  Status deserialize_unlocked(const HandlePtr& handle, std::string_view bytes);
  Result<std::string> serialize_unlocked() const;
  Status execute_unlocked(Handle& handle, const VariantPack& pack, void* workspace, int64_t index,
                          int64_t workspace_bytes) const;
  std::unique_ptr<PipelineState> state_;
};

}  // namespace dnngraph
