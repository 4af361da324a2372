// The public graph: the IR builder plus the build pipeline and execution.
//   validate -> build_operation_graph -> create_execution_plans -> check_support
//   -> build_plans -> execute
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

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

  // A kernel cache shared with other graphs: graphs with dynamic shapes
  // (set_dynamic_shape_enabled) reuse the kernels it holds (see kernel_cache.hpp).
  Graph& set_kernel_cache(KernelCachePtr cache);
  const KernelCachePtr& kernel_cache() const;

  // validate() then lower onto the first engine that runs on the handle's device.
  Status build_operation_graph(const HandlePtr& handle);
  // Collects candidates from each mode in order, de-duplicated by name.
  Status create_execution_plans(const std::vector<HeurMode>& modes);
  // Checks candidates in order and stops at the first supported one (cheap: no kernel is
  // compiled where the engine can tell without); NotSupported (with every reason) when none
  // is. The rest are checked when asked for (a later plan index, All, the plan count, the
  // candidate reports).
  Status check_support();
  // HeuristicsChoice builds the first supported candidate that builds (and nothing else);
  // All builds them all.
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
  Result<std::string> serialize() const;
  Status deserialize(const HandlePtr& handle, std::string_view bytes);

  // Checks a variant pack against the graph's non-virtual tensors without running anything.
  Status check_variant_pack(const VariantPack& pack) const;

 private:
  void set_required();
  void adopt_plan(std::unique_ptr<Plan> plan, const std::string& candidate);
  Status restore_plan(const HandlePtr& handle, Engine& engine, std::string_view bytes);
  std::string plan_cache_key(const Engine& engine, const Handle& handle,
                             const std::vector<HeurMode>& modes, std::string_view policy) const;
  bool check_next() const;                // checks the next unchecked candidate
  bool check_until(int64_t index) const;  // until `index` supported ones are known
  std::unique_ptr<PipelineState> state_;
};

}  // namespace dnngraph
