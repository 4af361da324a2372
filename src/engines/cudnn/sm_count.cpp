// The SM count target of a graph (ir::Graph::set_sm_count) in the cuDNN engine: the check
// against the GPU the graph is built for, and the one setter that gives the target to a
// heuristics or engine descriptor.
//
// What cuDNN documents (cuDNN developer guide, "Odds and Ends", section "SM Carveout",
// https://docs.nvidia.com/cudnn/developer/misc): since cuDNN 8.9.5 an application may reserve
// SMs for concurrent work on another stream (on Hopper GPUs). It gives a target SM count to
// the heuristics (CUDNN_ATTR_ENGINEHEUR_SM_COUNT_TARGET on the ENGINEHEUR descriptor) and gets
// engine configs that use that many SMs when they run; without heuristics, it sets the target
// on the engine it builds itself (CUDNN_ATTR_ENGINE_SM_COUNT_TARGET, before finalizing the
// ENGINE descriptor), which the engines listed in that section support. Both attributes are
// one CUDNN_TYPE_INT32 (cudnn_graph_v9.h: 203 and 1306; the cuDNN frontend sets the
// heuristics one with that type and leaves it unset by default).
//
// A target above the GPU's SM count is refused here, before anything reaches cuDNN (see
// check_sm_count_target). An engine that cannot honour a target refuses it at finalize (or at
// the setter), which the engine enumeration treats like any engine that cannot run the graph.
#include <cuda_runtime_api.h>

#include <map>
#include <mutex>

#include "engines/cudnn/plan.hpp"

namespace dnngraph::cudnn {
namespace {

// The SM count of `device`; -1 when the runtime cannot say (cuDNN is left to judge the target).
int64_t device_sm_count(int device) {
  return device_attribute(device, cudaDevAttrMultiProcessorCount);
}

}  // namespace

// Decision: a target above the GPU's SM count is an error (InvalidArgument, Python ValueError),
// not clamped and not passed on. A target is a promise that the other SMs stay free; one the GPU
// cannot meet is most likely a value meant for another GPU (a larger part), and clamping would
// hide that and build a plan that takes the whole GPU. cuDNN's own answer to such a value is
// not documented, so refusing here also keeps the behaviour the same across cuDNN versions.
// Deviceless builds check against the target's multiProcessorCount (DeviceProperties).
Status check_sm_count_target(const ir::ValidatedGraph& g, const Handle& handle) {
  const int32_t want = g.sm_count();
  if (want == ir::Graph::kAllSms) return Status::ok();
  int64_t have = -1;
  std::string device;
  if (const DevicePropertiesPtr& t = handle.target()) {
    have = t->sm_count();
    device = t->describe();
  } else {
    have = device_sm_count(handle.device().index);
    device = handle.device().to_string();
  }
  if (have < 0 || want <= have) return Status::ok();
  return make_error(ErrorCode::InvalidArgument, "graph '", g.name(), "': sm_count ", want,
                    " asks for plans on up to ", want, " SMs, but ", device, " has ", have,
                    "; set sm_count to at most ", have,
                    " (fewer leave SMs free for other streams), or leave it unset to use every "
                    "SM");
}

Status set_sm_count_target(Descriptor& d, SmCountUse use, int32_t target) {
  if (target == ir::Graph::kAllSms) return Status::ok();
  switch (use) {
    case SmCountUse::Heuristics:
      return d.set(CUDNN_ATTR_ENGINEHEUR_SM_COUNT_TARGET, CUDNN_TYPE_INT32, target);
    case SmCountUse::Engine:
      return d.set(CUDNN_ATTR_ENGINE_SM_COUNT_TARGET, CUDNN_TYPE_INT32, target);
  }
  return make_error(ErrorCode::Internal, d.what(), ": unknown use of the SM count target");
}

int32_t reported_sm_count_target(const Descriptor& engine) {
  int64_t n = 0;
  int32_t v = -1;
  if (!engine.get(CUDNN_ATTR_ENGINE_SM_COUNT_TARGET, CUDNN_TYPE_INT32, 1, &n, &v) || n != 1)
    return -1;
  return v;
}

}  // namespace dnngraph::cudnn
