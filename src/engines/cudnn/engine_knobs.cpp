// Engines by global index (LoweredGraph::engine_count / engine_knobs / engine_candidate): the
// frontend's get_engine_count, get_knobs_for_engine and create_execution_plan(engine, knobs).
#include <algorithm>
#include <array>

#include "engines/cudnn/descriptor.hpp"
#include "engines/cudnn/plan.hpp"

namespace dnngraph::cudnn {
namespace {

// cuDNN's knob type of a knob name ("KERNEL_CFG"); -1 when there is none.
int knob_type_of(const std::string& name) {
  for (int i = 0; i < CUDNN_KNOB_TYPE_COUNTS; ++i)
    if (knob_name(i) == name) return i;
  return -1;
}

}  // namespace

Result<Descriptor> finalized_engine(const LoweredState& st, int64_t engine) {
  DNNGRAPH_ASSIGN_OR_RETURN(const int64_t count, engine_count(st));
  if (engine < 0 || engine >= count)
    return make_error(ErrorCode::InvalidArgument, st.what, ": engine index ", engine,
                      " out of range [0, ", count,
                      "): get_engine_count() says how many this graph has");
  const std::string what = detail::cat(st.what, " engine ", engine);
  DNNGRAPH_ASSIGN_OR_RETURN(auto ed, Descriptor::create(CUDNN_BACKEND_ENGINE_DESCRIPTOR, what));
  DNNGRAPH_TRY(ed.set(CUDNN_ATTR_ENGINE_OPERATION_GRAPH, st.op_graph));
  DNNGRAPH_TRY(ed.set(CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, engine));
  DNNGRAPH_TRY(set_device_properties(ed, DevicePropUse::Engine, st.device_properties));
  // Before finalize, as cuDNN requires; an engine that cannot target that many SMs refuses.
  DNNGRAPH_TRY(set_sm_count_target(ed, SmCountUse::Engine, st.sm_count_target));
  DNNGRAPH_TRY(ed.finalize(ErrorCode::NotSupported));
  return ed;
}

Result<int64_t> engine_count(const LoweredState& st) {
  int64_t n = 0, count = 0;
  DNNGRAPH_TRY(st.op_graph.get(CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, CUDNN_TYPE_INT64, 1,
                               &n, &count));
  return count;
}

Result<std::vector<KnobInfo>> engine_knobs(const LoweredState& st, int64_t engine) {
  DNNGRAPH_ASSIGN_OR_RETURN(auto ed, finalized_engine(st, engine));
  std::vector<Descriptor> infos;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int i = 0; i < CUDNN_KNOB_TYPE_COUNTS; ++i) {
    DNNGRAPH_ASSIGN_OR_RETURN(auto k,
                              Descriptor::create(CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR, ed.what()));
    raw.push_back(k.get());
    infos.push_back(std::move(k));
  }
  int64_t n = 0;
  DNNGRAPH_TRY(ed.get(CUDNN_ATTR_ENGINE_KNOB_INFO, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                      static_cast<int64_t>(raw.size()), &n, raw.data()));
  std::vector<KnobInfo> out;
  for (int64_t i = 0; i < std::min<int64_t>(n, static_cast<int64_t>(infos.size())); ++i) {
    const Descriptor& k = infos[static_cast<size_t>(i)];
    cudnnBackendKnobType_t type{};
    KnobInfo info;
    int64_t got = 0;
    DNNGRAPH_TRY(k.get(CUDNN_ATTR_KNOB_INFO_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &got, &type));
    DNNGRAPH_TRY(
        k.get(CUDNN_ATTR_KNOB_INFO_MINIMUM_VALUE, CUDNN_TYPE_INT64, 1, &got, &info.min_value));
    DNNGRAPH_TRY(
        k.get(CUDNN_ATTR_KNOB_INFO_MAXIMUM_VALUE, CUDNN_TYPE_INT64, 1, &got, &info.max_value));
    DNNGRAPH_TRY(k.get(CUDNN_ATTR_KNOB_INFO_STRIDE, CUDNN_TYPE_INT64, 1, &got, &info.stride));
    info.name = knob_name(static_cast<int>(type));
    out.push_back(std::move(info));
  }
  return out;
}

Result<Descriptor> engine_config(LoweredState& st, int64_t engine, const KnobChoices& knobs) {
  DNNGRAPH_ASSIGN_OR_RETURN(auto ed, finalized_engine(st, engine));
  DNNGRAPH_ASSIGN_OR_RETURN(auto known, engine_knobs(st, engine));
  std::vector<Descriptor> choices;
  std::vector<cudnnBackendDescriptor_t> raw;
  // In cuDNN's knob order, as heuristics' configs list them: the plan's name is then the same
  // whatever order the caller gave (a serialized graph's knobs come back sorted by name).
  KnobChoices sorted = knobs;
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return knob_type_of(a.first) < knob_type_of(b.first);
  });
  for (const auto& [name, value] : sorted) {
    const int type = knob_type_of(name);
    const bool has =
        std::any_of(known.begin(), known.end(), [&](const KnobInfo& k) { return k.name == name; });
    if (type < 0 || !has) {
      std::string names;
      for (const KnobInfo& k : known) names += (names.empty() ? "" : ", ") + k.name;
      return make_error(ErrorCode::InvalidArgument, ed.what(), " has no knob '", name,
                        "'; its knobs: ", names.empty() ? std::string("none") : names);
    }
    DNNGRAPH_ASSIGN_OR_RETURN(
        auto c, Descriptor::create(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR,
                                   detail::cat(ed.what(), " knob ", name, "=", value)));
    const auto t = static_cast<cudnnBackendKnobType_t>(type);
    DNNGRAPH_TRY(c.set(CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, t));
    DNNGRAPH_TRY(c.set(CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, value));
    DNNGRAPH_TRY(c.finalize(ErrorCode::NotSupported));
    raw.push_back(c.get());
    choices.push_back(std::move(c));
  }
  DNNGRAPH_ASSIGN_OR_RETURN(
      auto cfg, Descriptor::create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, ed.what() + " config"));
  DNNGRAPH_TRY(cfg.set(CUDNN_ATTR_ENGINECFG_ENGINE, ed));
  if (!raw.empty())
    DNNGRAPH_TRY(cfg.set(CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, raw));
  DNNGRAPH_TRY(cfg.finalize(ErrorCode::NotSupported));
  st.engines.push_back(std::move(ed));  // the config refers to these
  for (auto& c : choices) st.engines.push_back(std::move(c));
  return cfg;
}

}  // namespace dnngraph::cudnn
