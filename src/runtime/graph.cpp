// The build pipeline of dnngraph::Graph and execution with variant-pack validation.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_set>

#include "dnngraph/graph.hpp"
#include "dnngraph/ir/fingerprint.hpp"
#include "dnngraph/ir/json.hpp"
#include "dnngraph/plan_cache.hpp"
#include "dnngraph/system.hpp"
#include "dnngraph/version.hpp"
#include "engines/registry.hpp"
#include "runtime/pipeline.hpp"

namespace dnngraph {
namespace {

// DNNGRAPH_LOG=dispatch prints, per candidate, whether check_support kept it and why not.
bool log_dispatch() {
  static const bool on = [] {
    const char* v = std::getenv("DNNGRAPH_LOG");
    return v && std::strstr(v, "dispatch") != nullptr;
  }();
  return on;
}

Status stage_error(const Graph& g, const char* call, const char* needs) {
  return make_error(ErrorCode::InvalidArgument, "graph '", g.name(), "': ", call,
                    "() called before ", needs, "()");
}

}  // namespace

Graph::Graph() : state_(std::make_unique<PipelineState>()) {}
Graph::~Graph() = default;
Graph::Graph(Graph&&) noexcept = default;
Graph& Graph::operator=(Graph&&) noexcept = default;

Graph& Graph::set_kernel_cache(KernelCachePtr cache) {
  state_->kernel_cache = std::move(cache);
  return *this;
}

const KernelCachePtr& Graph::kernel_cache() const { return state_->kernel_cache; }

Status Graph::build_operation_graph(const HandlePtr& handle) {
  if (!handle)
    return make_error(ErrorCode::InvalidArgument, "graph '", name(),
                      "': build_operation_graph() needs a handle");
  DNNGRAPH_TRY(validate());
  KernelCachePtr cache = std::move(state_->kernel_cache);
  GraphSettings settings = std::move(state_->settings);
  *state_ = PipelineState{};
  state_->validated = validated();
  state_->kernel_cache = std::move(cache);
  state_->settings = std::move(settings);
  std::string reasons;
  for (Engine* e : registered_engines()) {
    if (!e->runs_on(handle->device())) continue;
    auto lowered = e->lower(state_->validated, *handle);
    if (!lowered) {
      reasons +=
          detail::cat(reasons.empty() ? "" : "; ", e->name(), ": ", lowered.status().message());
      continue;
    }
    if (state_->kernel_cache) DNNGRAPH_TRY(lowered.value()->set_kernel_cache(state_->kernel_cache));
    state_->engine = e;
    state_->lowered = std::move(lowered).value();
    break;
  }
  if (!state_->lowered) {
    if (reasons.empty())
      reasons = detail::cat("no engine in this build runs on ", handle->device().to_string());
    return make_error(ErrorCode::NotSupported, "graph '", name(), "': ", reasons);
  }
  state_->handle = handle;
  set_required();
  state_->stage = Stage::Lowered;
  return Status::ok();
}

void Graph::set_required() {
  state_->required.clear();
  for (const ir::Tensor& t : state_->validated->tensors())
    if (!t->is_virtual && !t->value) state_->required.push_back(t);
  std::sort(state_->required.begin(), state_->required.end(),
            [](const ir::Tensor& a, const ir::Tensor& b) { return a->uid < b->uid; });
}

Status Graph::create_execution_plans(const std::vector<HeurMode>& modes) {
  if (state_->stage < Stage::Lowered)
    return stage_error(*this, "create_execution_plans", "build_operation_graph");
  state_->candidates.clear();
  state_->statuses.clear();
  state_->supported.clear();
  state_->plans.clear();
  state_->checked = 0;
  state_->selected = -1;
  state_->settings.modes = modes;
  std::unordered_set<std::string> seen;
  for (HeurMode m : modes) {
    DNNGRAPH_ASSIGN_OR_RETURN(auto c, state_->lowered->candidates(m));
    for (auto& cand : c)
      if (seen.insert(cand->info().name).second) state_->candidates.push_back(std::move(cand));
  }
  state_->stage = Stage::Planned;
  return Status::ok();
}

// Runs check_support on the next unchecked candidate (in order); false when none is left.
bool Graph::check_next() const {
  PipelineState& st = *state_;
  if (st.checked >= st.candidates.size()) return false;
  const size_t i = st.checked++;
  Candidate& c = *st.candidates[i];
  Status support = c.check_support();
  if (support.is_ok()) {  // the plan filters (plan_filter.cpp)
    const std::string why = st.settings.filters.reject_reason(c.info(), c.info().workspace_size);
    if (!why.empty())
      support = make_error(ErrorCode::NotSupported, "candidate '", c.info().name, "' ", why);
  }
  CandidateStatus cs{c.info(), std::move(support)};
  cs.workspace_size = cs.info.workspace_size;
  if (cs.support.is_ok()) {
    st.supported.push_back(i);
    st.plans.emplace_back();
  }
  if (log_dispatch())
    std::fprintf(stderr, "[dnngraph dispatch] graph '%s' %s candidate %zu '%s': %s\n",
                 name().c_str(), std::string(st.engine->name()).c_str(), i, cs.info.name.c_str(),
                 cs.support.is_ok() ? "supported" : cs.support.message().c_str());
  st.statuses.push_back(std::move(cs));
  return true;
}

bool Graph::check_until(int64_t index) const {
  while (static_cast<int64_t>(state_->supported.size()) <= index)
    if (!check_next()) return false;
  return true;
}

Status Graph::check_support() {
  if (state_->stage < Stage::Planned)
    return stage_error(*this, "check_support", "create_execution_plans");
  // Like the frontend: stop at the first supported candidate; the others are checked when
  // something asks for them (a later index, ALL, the plan count, the candidate reports).
  if (!check_until(0)) {
    std::string reasons;
    for (const auto& cs : state_->statuses)
      if (reasons.size() < 2000)
        reasons += detail::cat("\n  ", cs.info.name, ": ", cs.support.message());
    return make_error(ErrorCode::NotSupported, "graph '", name(), "': none of the ",
                      state_->candidates.size(), " candidate(s) of engine '",
                      state_->engine->name(), "' supports it", reasons);
  }
  if (state_->stage < Stage::Checked) state_->stage = Stage::Checked;
  return Status::ok();
}

Status Graph::build_plan_at_index(int64_t index) {
  if (state_->stage < Stage::Checked)
    return stage_error(*this, "build_plan_at_index", "check_support");
  if (index < 0 || !check_until(index))
    return make_error(ErrorCode::InvalidArgument, "graph '", name(), "': plan index ", index,
                      " out of range [0, ", get_execution_plan_count(), ")");
  auto& slot = state_->plans[static_cast<size_t>(index)];
  if (slot) return Status::ok();
  const size_t ci = state_->supported[static_cast<size_t>(index)];
  auto plan = state_->candidates[ci]->build();
  CandidateStatus& cs = state_->statuses[ci];
  if (!plan) {
    cs.support = plan.status();
    return plan.status();
  }
  slot = std::move(plan).value();
  cs.built = true;
  cs.workspace_size = slot->workspace_size();
  DNNGRAPH_TRY(apply_workspace_filter(index));
  if (state_->selected < 0) state_->selected = index;
  state_->stage = Stage::Built;
  return Status::ok();
}

Status Graph::build_plans(BuildPlanPolicy policy) {
  if (state_->stage < Stage::Checked) return stage_error(*this, "build_plans", "check_support");
  std::string reasons;
  // HEURISTICS_CHOICE: candidates are checked and built one at a time until one builds, so
  // nothing is compiled that will not be used. ALL: every supported candidate.
  for (int64_t i = 0; check_until(i); ++i) {
    Status s = build_plan_at_index(i);
    if (!s.is_ok()) {
      reasons +=
          detail::cat("\n  ", state_->statuses[state_->supported[i]].info.name, ": ", s.message());
      continue;
    }
    if (policy == BuildPlanPolicy::HeuristicsChoice) break;
  }
  if (state_->selected < 0)
    return make_error(ErrorCode::NotSupported, "graph '", name(),
                      "': no candidate plan could be built", reasons);
  return Status::ok();
}

std::string Graph::plan_cache_key(const Engine& engine, const Handle& handle,
                                  const std::vector<HeurMode>& modes,
                                  std::string_view policy) const {
  static const std::vector<std::string> gpus = system_info().gpus;
  const Device d = handle.device();
  std::string key = detail::cat("dnngraph ", version(), "|", engine.name(), " ",
                                engine.backend_info().version, "|", d.to_string());
  if (d.kind == Device::Kind::CUDA && d.index >= 0 && static_cast<size_t>(d.index) < gpus.size())
    key += " " + gpus[static_cast<size_t>(d.index)];
  key += "|" + std::string(policy) + "|";
  for (HeurMode m : modes) key += std::string(heur_mode_name(m)) + ",";
  if (!state_->settings.filters.empty()) key += "|" + state_->settings.filters.describe();
  return key + "|" + ir::fingerprint(*this).hex();
}

Status Graph::build(const HandlePtr& handle, const std::vector<HeurMode>& modes,
                    BuildPlanPolicy policy) {
  // The plan cache (plan_cache.hpp): HEURISTICS_CHOICE builds on engines that can reload plans.
  PlanCache* cache = nullptr;
  Engine* engine = nullptr;
  std::string key;
  if (handle && policy == BuildPlanPolicy::HeuristicsChoice && (cache = PlanCache::global())) {
    for (Engine* e : registered_engines())
      if (e->runs_on(handle->device())) {
        if (e->loads_plans()) engine = e;
        break;
      }
  }
  if (engine) {
    DNNGRAPH_TRY(validate());
    key = plan_cache_key(*engine, *handle, modes, "heuristics_choice");
    if (auto hit = cache->get(key); hit && !hit->plan.empty()) {
      Status s = restore_plan(handle, *engine, hit->plan);
      state_->settings.modes = modes;
      if (s) return s;
      cache->drop(key, detail::cat("the stored plan of graph '", name(),
                                   "' could not be restored (", s.message(), ")"));
    }
  }
  DNNGRAPH_TRY(build_operation_graph(handle));
  DNNGRAPH_TRY(create_execution_plans(modes));
  DNNGRAPH_TRY(check_support());
  DNNGRAPH_TRY(build_plans(policy));
  if (engine && state_->engine == engine) {
    auto bytes = serialize();
    if (bytes && bytes->find("\"plan\":null") == std::string::npos)
      cache->put(
          key,
          PlanCacheEntry{
              state_->statuses[state_->supported[static_cast<size_t>(state_->selected)]].info.name,
              -1, std::move(bytes).value()});
  }
  return Status::ok();
}

int64_t Graph::get_execution_plan_count() const {
  if (state_->stage >= Stage::Checked)
    while (check_next()) {
    }
  return static_cast<int64_t>(state_->supported.size());
}

const std::vector<CandidateStatus>& Graph::candidates() const {
  if (state_->stage >= Stage::Checked)
    while (check_next()) {
    }
  return state_->statuses;
}
int64_t Graph::selected_plan_index() const { return state_->selected; }

Status Graph::select_plan(int64_t index) {
  DNNGRAPH_TRY(build_plan_at_index(index));
  state_->selected = index;
  return Status::ok();
}

Result<int64_t> Graph::get_workspace_size() const {
  if (state_->selected < 0)
    return make_error(ErrorCode::InvalidArgument, "graph '", name(),
                      "': get_workspace_size() called before build_plans()");
  return state_->plans[static_cast<size_t>(state_->selected)]->workspace_size();
}

Result<int64_t> Graph::get_workspace_size_plan_at_index(int64_t index) const {
  if (index < 0 || index >= get_execution_plan_count() ||
      !state_->plans[static_cast<size_t>(index)])
    return make_error(ErrorCode::InvalidArgument, "graph '", name(), "': plan ", index,
                      " is not built (call build_plan_at_index(", index, ") first)");
  return state_->plans[static_cast<size_t>(index)]->workspace_size();
}

Status Graph::check_variant_pack(const VariantPack& pack) const {
  if (state_->stage < Stage::Lowered) return stage_error(*this, "execute", "build_operation_graph");
  for (const ir::Tensor& t : state_->required) {
    auto it = pack.find(t->uid);
    if (it == pack.end())
      return make_error(ErrorCode::InvalidArgument, "graph '", name(), "': tensor '", t->name,
                        "' (uid ", t->uid, ") is missing from the variant pack");
    if (it->second == nullptr)
      return make_error(ErrorCode::InvalidArgument, "graph '", name(), "': tensor '", t->name,
                        "' (uid ", t->uid, ") has a null pointer in the variant pack");
  }
  if (pack.size() > state_->required.size()) {
    for (const auto& [uid, ptr] : pack) {
      ir::Tensor t = state_->validated->find_tensor_by_uid(uid);
      if (!t)
        return make_error(ErrorCode::InvalidArgument, "graph '", name(),
                          "': the variant pack has uid ", uid,
                          ", which names no tensor of the graph");
      if (t->is_virtual)
        return make_error(ErrorCode::InvalidArgument, "graph '", name(), "': tensor '", t->name,
                          "' (uid ", uid, ") is virtual and must not be in the variant pack");
    }
  }
  return Status::ok();
}

Status Graph::execute_plan_at_index(Handle& handle, const VariantPack& pack, void* workspace,
                                    int64_t index, int64_t workspace_bytes) const {
  if (index < 0 || index >= get_execution_plan_count() ||
      !state_->plans[static_cast<size_t>(index)])
    return make_error(ErrorCode::InvalidArgument, "graph '", name(), "': plan ", index,
                      " is not built (call build_plans() or build_plan_at_index())");
  if (!(handle.device() == state_->handle->device()))
    return make_error(ErrorCode::InvalidArgument, "graph '", name(), "': built for ",
                      state_->handle->device().to_string(), " but executed with a handle on ",
                      handle.device().to_string());
  DNNGRAPH_TRY(check_variant_pack(pack));
  Plan& plan = *state_->plans[static_cast<size_t>(index)];
  const int64_t need = plan.workspace_size();
  if (need > 0 && workspace == nullptr)
    return make_error(ErrorCode::InvalidArgument, "graph '", name(), "': plan '", plan.name(),
                      "' needs a workspace of ", need, " bytes, got none");
  if (workspace_bytes >= 0 && workspace_bytes < need)
    return make_error(ErrorCode::InvalidArgument, "graph '", name(),
                      "': workspace too small: plan '", plan.name(), "' needs ", need,
                      " bytes, got ", workspace_bytes);
  if (state_->settings.cuda_graph_execute) return plan.execute_replayed(handle, pack, workspace);
  return plan.execute(handle, pack, workspace);
}

Status Graph::execute(Handle& handle, const VariantPack& pack, void* workspace,
                      int64_t workspace_bytes) const {
  if (state_->selected < 0)
    return make_error(ErrorCode::InvalidArgument, "graph '", name(),
                      "': execute() called before build_plans()");
  return execute_plan_at_index(handle, pack, workspace, state_->selected, workspace_bytes);
}

}  // namespace dnngraph
