// LoweredGraph's engine-level defaults (dnngraph/engines/interface.hpp): one engine, index 0,
// without knobs, whose candidate is the first that heuristics A proposes.
#include "dnngraph/engines/interface.hpp"

namespace dnngraph {
namespace {

Status check_engine_index(LoweredGraph& g, int64_t engine) {
  DNNGRAPH_ASSIGN_OR_RETURN(const int64_t count, g.engine_count());
  if (engine < 0 || engine >= count)
    return make_error(ErrorCode::InvalidArgument, "engine index ", engine, " out of range [0, ",
                      count, "): get_engine_count() says how many this graph has");
  return Status::ok();
}

}  // namespace

Result<std::vector<KnobInfo>> LoweredGraph::engine_knobs(int64_t engine) {
  DNNGRAPH_TRY(check_engine_index(*this, engine));
  return std::vector<KnobInfo>{};
}

Result<std::unique_ptr<Candidate>> LoweredGraph::engine_candidate(int64_t engine,
                                                                  const KnobChoices& knobs) {
  DNNGRAPH_TRY(check_engine_index(*this, engine));
  if (!knobs.empty())
    return make_error(ErrorCode::InvalidArgument, "engine ", engine, " has no knob '",
                      knobs.front().first, "' (it has none): give no knobs");
  DNNGRAPH_ASSIGN_OR_RETURN(auto all, candidates(HeurMode::A));
  if (all.empty())
    return make_error(ErrorCode::NotSupported, "engine ", engine, " proposes no candidate");
  return std::move(all.front());
}

}  // namespace dnngraph
