// The engine interface: what every engine (reference, cuDNN) implements and all that the
// runtime knows of engines.
//   Engine::lower(graph) -> LoweredGraph::candidates(heur mode) -> Candidate::check_support
//   -> Candidate::build -> Plan{workspace_size, execute(variant pack, workspace), serialize}
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "dnngraph/engines/handle.hpp"
#include "dnngraph/engines/kernel_cache.hpp"
#include "dnngraph/ir/graph.hpp"
#include "dnngraph/status.hpp"

namespace dnngraph {

// The heuristic modes of the public pipeline (the tutorial's heur_mode). Each engine maps them
// to its own notion: the reference engine offers its one candidate for any mode; the cuDNN
// engine asks cuDNN's heuristics A, B or its fallback list.
enum class HeurMode : int { A, B, Fallback };
std::string_view heur_mode_name(HeurMode m);  // "A", "B", "FALLBACK"

// Graph-backed execute (Graph::set_cuda_graph_execute): Off runs every execute directly; Always
// records a CUDA graph the first time a set of pointers is seen and replays it afterwards;
// Repeated records only a set seen before (a pointer set used once costs no recording) and
// stops recording for a plan whose graphs are evicted before they pay for themselves.
enum class CudaGraphExecute : int { Off, Always, Repeated };
std::string_view cuda_graph_execute_name(CudaGraphExecute m);  // "off", "always", "repeated"
// The mode of that name; none for another name.
std::optional<CudaGraphExecute> parse_cuda_graph_execute(std::string_view name);

// What graph-backed execute did, summed over a graph's plans.
struct CudaGraphExecuteStats {
  int64_t replayed = 0;  // executes served by launching a recorded graph
  int64_t recorded = 0;  // graphs recorded and instantiated
  int64_t direct = 0;    // executes run directly (not yet repeated, in a capture, or given up)
  CudaGraphExecuteStats& operator+=(const CudaGraphExecuteStats& o) {
    replayed += o.replayed, recorded += o.recorded, direct += o.direct;
    return *this;
  }
};

// uid -> pointer. Device memory for GPU engines, host memory for the reference engine;
// pass-by-value tensors always point to host memory holding one scalar of their type.
using VariantPack = std::unordered_map<int64_t, void*>;

// One tunable knob of an engine: its name (cuDNN's, e.g. "KERNEL_CFG") and the values it takes
// (min_value, min_value + stride, ..., max_value).
struct KnobInfo {
  std::string name;
  int64_t min_value = 0;
  int64_t max_value = 0;
  int64_t stride = 1;
};
// Knob name -> value, as chosen for one engine config.
using KnobChoices = std::vector<std::pair<std::string, int64_t>>;

struct CandidateInfo {
  std::string engine;             // "reference", "cudnn"
  std::string name;               // readable: engine id + knobs
  int64_t engine_id = 0;          // the engine's index (LoweredGraph::engine_count); -1: not known
                                  // (a plan restored from a blob older than this field)
  KnobChoices knobs;              // its knob values
  HeurMode source = HeurMode::A;  // the heuristic mode that proposed it
  std::vector<std::string> numerical_notes;  // e.g. "TENSOR_CORE", "REDUCED_PRECISION_REDUCTION"
  std::vector<std::string> behavior_notes;   // e.g. "RUNTIME_COMPILATION"
  int64_t workspace_size = -1;  // bytes, when the engine knows it before building (else -1)
  // The SM count the engine targets as the backend reports it (cuDNN:
  // CUDNN_ATTR_ENGINE_SM_COUNT_TARGET of the config's engine; see ir::Graph::set_sm_count);
  // -1 when it reports none (the reference engine, a restored plan).
  int32_t sm_count_target = -1;
};

class Plan {
 public:
  virtual ~Plan() = default;
  virtual std::string name() const = 0;
  virtual int64_t workspace_size() const = 0;
  // The runtime has already checked that every non-virtual uid is present and non-null and
  // that the workspace is large enough; the plan checks what only it knows (alignment,
  // device). On any failure nothing is launched and no output is written.
  virtual Status execute(Handle& handle, const VariantPack& pack, void* workspace) = 0;
  // Bytes that Engine::deserialize_plan turns back into this plan.
  virtual Result<std::string> serialize() const {
    return make_error(ErrorCode::NotSupported, "plan '", name(), "' cannot be serialized");
  }
  // CUDA graphs. populate_cuda_graph records this plan's work for `pack` into `cuda_graph` (an
  // empty cudaGraph_t); update_cuda_graph points a graph it populated at new pointers.
  virtual Status populate_cuda_graph(Handle& handle, const VariantPack& pack, void* workspace,
                                     void* cuda_graph) {
    (void)handle, (void)pack, (void)workspace, (void)cuda_graph;
    return make_error(ErrorCode::NotSupported, "plan '", name(),
                      "' cannot record CUDA graphs (its engine does not run on CUDA)");
  }
  virtual Status update_cuda_graph(Handle& handle, const VariantPack& pack, void* workspace,
                                   void* cuda_graph) {
    (void)handle, (void)pack, (void)workspace, (void)cuda_graph;
    return make_error(ErrorCode::NotSupported, "plan '", name(),
                      "' cannot record CUDA graphs (its engine does not run on CUDA)");
  }
  // Graph-backed execute (Graph::set_cuda_graph_execute, `mode` not Off): replays a CUDA graph
  // recorded for this set of pointers. Engines without CUDA graphs execute directly.
  virtual Status execute_replayed(Handle& handle, const VariantPack& pack, void* workspace,
                                  CudaGraphExecute mode) {
    (void)mode;
    return execute(handle, pack, workspace);
  }
  virtual CudaGraphExecuteStats cuda_graph_execute_stats() const { return {}; }
};

// Times plans for the autotuner, on the handle's stream; one per Graph::autotune call.
class PlanTimer {
 public:
  virtual ~PlanTimer() = default;
  // Bytes flush() overwrites (larger than the device's last-level cache); 0: nothing to flush.
  virtual int64_t flush_bytes() const = 0;
  virtual Status flush() = 0;  // queued before a timed run, not timed
  virtual Status start() = 0;
  // Milliseconds between start() and now, once the work queued in between has finished.
  virtual Result<double> stop() = 0;
  // A copy of `bytes` bytes at `src` (engine memory), freed with the last reference.
  virtual Result<std::shared_ptr<void>> copy(const void* src, int64_t bytes) = 0;
  // `bytes` bytes of engine memory (contents undefined), freed with the last reference.
  virtual Result<std::shared_ptr<void>> alloc(int64_t bytes) = 0;
};
// Wall-clock timing of host engines (the reference engine): no cache flush, host copies.
std::unique_ptr<PlanTimer> make_host_timer();

class Candidate {
 public:
  virtual ~Candidate() = default;
  virtual const CandidateInfo& info() const = 0;
  // Ok, or why this candidate cannot run the graph (NotSupported with the reason). Meant to be
  // cheap (no kernel compiled where the engine can tell without); build() may still fail.
  virtual Status check_support() = 0;
  virtual Result<std::unique_ptr<Plan>> build() = 0;
};

// An engine's form of one validated graph (e.g. a cuDNN operation graph).
class LoweredGraph {
 public:
  virtual ~LoweredGraph() = default;
  // The candidates that `mode` proposes, best first. An empty list is not an error.
  virtual Result<std::vector<std::unique_ptr<Candidate>>> candidates(HeurMode mode) = 0;
  // Engines by index, without heuristics (the frontend's get_engine_count /
  // get_knobs_for_engine / create_execution_plan): how many engines the library has for this
  // graph, the knobs of one (NotSupported when that engine cannot run the graph), and the
  // candidate of one engine with chosen knob values (unset knobs keep the engine's defaults;
  // NotSupported when the engine refuses the values). The defaults describe an engine with one
  // engine, index 0, without knobs: its candidate is the first that heuristics A proposes.
  virtual Result<int64_t> engine_count() { return 1; }
  virtual Result<std::vector<KnobInfo>> engine_knobs(int64_t engine);
  virtual Result<std::unique_ptr<Candidate>> engine_candidate(int64_t engine,
                                                              const KnobChoices& knobs);
  // The kernel cache the graph was given (before candidates() is asked); engines without one
  // ignore it.
  virtual Status set_kernel_cache(const KernelCachePtr& cache) {
    (void)cache;
    return Status::ok();
  }
};

// What an engine's backend library is, for `dnngraph info` and backend_version().
struct BackendInfo {
  bool available = true;     // false: the library could not be loaded (see error)
  int64_t version = 0;       // e.g. 91900 for cuDNN 9.19.0; 0 when not applicable
  std::string library_path;  // the file that was loaded
  std::string error;         // why it is not available
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual std::string_view name() const = 0;
  // Loads the backend library if needed; never fails (errors are reported in the result).
  virtual BackendInfo backend_info() const { return {}; }
  virtual bool runs_on(const Device& device) const = 0;
  // Engines take only a validated graph (made by ir::Graph::validate()): every validity rule
  // has passed, so an engine checks support alone. NotSupported (with the op and the reason)
  // when the engine cannot run the graph.
  virtual Result<std::unique_ptr<LoweredGraph>> lower(const ir::ValidatedGraphPtr& graph,
                                                      Handle& handle) = 0;
  // Refusals known from the graph alone, before lowering and without the backend (the rules
  // the cuDNN frontend applies at validate()); Graph::validate(handle) runs them for the engine
  // that would lower the graph. NotSupported naming the op and the reason; ok by default.
  virtual Status precheck(const ir::ValidatedGraph& graph) const {
    (void)graph;
    return Status::ok();
  }
  // Whether deserialize_plan restores plans (then the plan cache keeps them).
  virtual bool loads_plans() const { return false; }
  // The autotuner's timer for plans of this engine run with `handle`.
  virtual Result<std::unique_ptr<PlanTimer>> make_timer(Handle& handle) {
    (void)handle;
    return make_error(ErrorCode::NotSupported, "engine '", name(), "' cannot time its plans");
  }
  virtual Result<std::unique_ptr<Plan>> deserialize_plan(const ir::ValidatedGraphPtr& graph,
                                                         Handle& handle, std::string_view bytes) {
    (void)graph, (void)handle, (void)bytes;
    return make_error(ErrorCode::NotSupported, "engine '", name(), "' cannot load plans");
  }
};

}  // namespace dnngraph
