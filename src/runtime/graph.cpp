// The build pipeline of dnngraph::Graph and execution with variant-pack validation.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <unordered_set>

#include "dnngraph/graph.hpp"
#include "dnngraph/ir/fingerprint.hpp"
#include "dnngraph/ir/json.hpp"
#include "dnngraph/log.hpp"
#include "dnngraph/plan_cache.hpp"
#include "dnngraph/system.hpp"
#include "dnngraph/version.hpp"
#include "engines/registry.hpp"
#include "runtime/pipeline.hpp"

namespace dnngraph {
namespace {

// DNNGRAPH_LOG=dispatch prints, per candidate, whether check_support kept it and why not.
bool log_dispatch() { return log_enabled(LogLevel::Dispatch); }

Status stage_error(const Graph& g, const char* call, const char* needs) {
  return make_error(ErrorCode::InvalidArgument, "graph '", g.name(), "': ", call,
                    "() called before ", needs, "()");
}

// Stores the selected plan of a graph `engine` built under `key` (`bytes`: its serialize()),
// when the engine stored its compiled plan there.
void store_plan(PlanCache& cache, const std::string& key, const PipelineState& st,
                const Engine* engine, Result<std::string> bytes) {
  if (st.engine != engine || st.selected < 0 || !bytes ||
      bytes->find("\"plan\":null") != std::string::npos)
    return;
  cache.put(
      key, PlanCacheEntry{st.statuses[st.supported[static_cast<size_t>(st.selected)]].info.name, -1,
                          std::move(bytes).value()});
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

// The public pipeline steps take the graph's lock alone and call the unlocked versions, which
// call each other.
using Exclusive = std::unique_lock<std::shared_mutex>;
using Shared = std::shared_lock<std::shared_mutex>;

Status Graph::validate(const HandlePtr& handle) {
  DNNGRAPH_TRY(validate());
  if (!handle) return Status::ok();
  for (Engine* e : registered_engines())
    if (e->runs_on(handle->device())) {
      if (Status s = e->precheck(*validated()); !s)
        return Status(s.code(),
                      detail::cat("graph '", name(), "': ", e->name(), ": ", s.message()));
      break;
    }
  return Status::ok();
}

Status Graph::build_operation_graph(const HandlePtr& handle) {
  Exclusive lock(state_->mu);
  return build_operation_graph_unlocked(handle);
}
Status Graph::build_operation_graph(const DevicePropertiesPtr& target) {
  DNNGRAPH_ASSIGN_OR_RETURN(auto handle, Handle::create_deviceless(target));
  Exclusive lock(state_->mu);
  return build_operation_graph_unlocked(handle);
}
Status Graph::create_execution_plans(const std::vector<HeurMode>& modes) {
  Exclusive lock(state_->mu);
  return create_execution_plans_unlocked(modes);
}
Status Graph::check_support() {
  Exclusive lock(state_->mu);
  return check_support_unlocked();
}
Status Graph::build_plan_at_index(int64_t index) {
  Exclusive lock(state_->mu);
  return build_plan_at_index_unlocked(index);
}
Status Graph::build_plans(BuildPlanPolicy policy) {
  Exclusive lock(state_->mu);
  // The step-by-step form (the frontend's five steps) shares build()'s plan cache entries:
  // HEURISTICS_CHOICE restores the plan a build of the same graph with the same heuristics
  // modes stored, in this process or an earlier one, instead of compiling it (the heuristics
  // and support checks before it have run; the restored graph holds that one candidate, as
  // after build()), and only when the stored plan is the candidate this call would build
  // first. Not for candidates made by engine and knobs (create_execution_plan: the key names
  // heuristics modes), a kernel cache or a deviceless handle (as in build()).
  PlanCache* cache = nullptr;
  Engine* engine = state_->engine;
  const HandlePtr handle = state_->handle;
  std::string key;
  if (policy == BuildPlanPolicy::HeuristicsChoice && state_->stage >= Stage::Checked &&
      state_->selected < 0 && !state_->supported.empty() && !state_->by_engine && engine &&
      engine->loads_plans() && handle && !handle->target() && !state_->kernel_cache &&
      (cache = PlanCache::global())) {
    key = plan_cache_key(*engine, *handle, state_->settings.modes, "heuristics_choice");
    const std::string& first = state_->statuses[state_->supported.front()].info.name;
    if (auto hit = cache->get(key); hit && !hit->plan.empty() && hit->engine_config == first) {
      Status s = restore_plan(handle, *engine, hit->plan);
      if (s) return s;
      cache->drop(key, detail::cat("the stored plan of graph '", name(),
                                   "' could not be restored (", s.message(), ")"));
    }
  }
  DNNGRAPH_TRY(build_plans_unlocked(policy));
  if (cache) store_plan(*cache, key, *state_, engine, serialize_unlocked());
  return Status::ok();
}

Status Graph::build_operation_graph_unlocked(const HandlePtr& handle) {
  if (!handle)
    return make_error(ErrorCode::InvalidArgument, "graph '", name(),
                      "': build_operation_graph() needs a handle");
  state_->reset();
  DNNGRAPH_TRY(validate());
  state_->validated = validated();
  std::string reasons;
  // NotSupported unless every engine that tried said the input was bad (e.g. device properties
  // cuDNN does not accept): then InvalidArgument, so that Python raises ValueError.
  bool all_invalid = true;
  for (Engine* e : registered_engines()) {
    if (!e->runs_on(handle->device())) continue;
    auto lowered = e->lower(state_->validated, *handle);
    if (!lowered) {
      all_invalid = all_invalid && lowered.status().code() == ErrorCode::InvalidArgument;
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
      reasons = detail::cat("no engine in this build runs on ", handle->device().to_string(),
                            ": this build has no cuDNN engine (configured with DNNGRAPH_CUDA=OFF); "
                            "rebuild with -DDNNGRAPH_CUDA=ON, or use a cpu handle");
    else if (all_invalid)
      return make_error(ErrorCode::InvalidArgument, "graph '", name(), "': ", reasons);
    return make_error(ErrorCode::NotSupported, "graph '", name(), "': ", reasons);
  }
  state_->handle = handle;
  set_required();
  state_->stage = Stage::Lowered;
  if (log_enabled(LogLevel::Debug))
    log_message(LogLevel::Debug,
                detail::cat("graph '", name(), "': lowered onto engine '", state_->engine->name(),
                            "' (", handle->device().to_string(), ")"));
  return Status::ok();
}

// Right after validate(): `required` holds the live tensors (check_unchanged compares them with
// the copies), `built` and `required_built` copies of what the plans are built for.
void Graph::set_required() {
  state_->required.clear();
  state_->built.clear();
  state_->required_built.clear();
  for (const ir::Tensor& t : tensors()) {
    if (t->is_virtual) continue;
    if (!t->value) state_->required.push_back(t);
    state_->built.push_back(*t);
  }
  std::sort(state_->required.begin(), state_->required.end(),
            [](const ir::Tensor& a, const ir::Tensor& b) { return a->uid < b->uid; });
  std::sort(state_->built.begin(), state_->built.end(),
            [](const ir::TensorAttrs& a, const ir::TensorAttrs& b) { return a.uid < b.uid; });
  for (const ir::Tensor& t : state_->required) state_->required_built.push_back(*t);
}

namespace {
void clear_candidates(PipelineState& st) {
  st.plans.clear();  // before the candidates they may refer to
  st.candidates.clear();
  st.statuses.clear();
  st.supported.clear();
  st.checked = 0;
  st.selected = -1;
  st.by_engine = false;
}
}  // namespace

Status Graph::create_execution_plans_unlocked(const std::vector<HeurMode>& modes) {
  if (state_->stage < Stage::Lowered)
    return stage_error(*this, "create_execution_plans", "build_operation_graph");
  clear_candidates(*state_);
  state_->settings.modes = modes;
  // A mode that proposes nothing (or fails) is skipped when another mode proposes candidates,
  // as the frontend does with [A, FALLBACK]: the error is returned only when every mode fails.
  std::unordered_set<std::string> seen;
  Status first_error = Status::ok();
  for (HeurMode m : modes) {
    auto c = state_->lowered->candidates(m);
    if (!c) {
      if (first_error.is_ok()) first_error = c.status();
      continue;
    }
    for (auto& cand : *c)
      if (seen.insert(cand->info().name).second) state_->candidates.push_back(std::move(cand));
  }
  if (state_->candidates.empty() && !first_error.is_ok()) return first_error;
  state_->stage = Stage::Planned;
  return Status::ok();
}

Result<int64_t> Graph::get_engine_count() const {
  Exclusive lock(state_->mu);
  if (state_->stage < Stage::Lowered)
    return stage_error(*this, "get_engine_count", "build_operation_graph");
  return state_->lowered->engine_count();
}

Result<std::vector<KnobInfo>> Graph::get_knobs_for_engine(int64_t engine) const {
  Exclusive lock(state_->mu);
  if (state_->stage < Stage::Lowered)
    return stage_error(*this, "get_knobs_for_engine", "build_operation_graph");
  auto knobs = state_->lowered->engine_knobs(engine);
  if (!knobs)
    return make_error(knobs.status().code(), "graph '", name(), "': ", knobs.status().message());
  return knobs;
}

Status Graph::create_execution_plan(int64_t engine, const KnobChoices& knobs) {
  Exclusive lock(state_->mu);
  if (state_->stage < Stage::Lowered)
    return stage_error(*this, "create_execution_plan", "build_operation_graph");
  auto c = state_->lowered->engine_candidate(engine, knobs);
  if (!c) return make_error(c.status().code(), "graph '", name(), "': ", c.status().message());
  if (state_->stage < Stage::Planned) {
    clear_candidates(*state_);
    state_->stage = Stage::Planned;
  }
  state_->by_engine = true;
  for (const auto& have : state_->candidates)
    if (have->info().name == (*c)->info().name) return Status::ok();  // already a candidate
  state_->candidates.push_back(std::move(c).value());
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
    log_message(LogLevel::Dispatch,
                detail::cat("graph '", name(), "' ", st.engine->name(), " candidate ", i, " '",
                            cs.info.name, "': ",
                            cs.support.is_ok() ? std::string("supported") : cs.support.message()));
  st.statuses.push_back(std::move(cs));
  return true;
}

bool Graph::check_until(int64_t index) const {
  while (static_cast<int64_t>(state_->supported.size()) <= index)
    if (!check_next()) return false;
  return true;
}

Status Graph::check_support_unlocked() {
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

Status Graph::build_plan_at_index_unlocked(int64_t index) {
  if (state_->stage < Stage::Checked)
    return stage_error(*this, "build_plan_at_index", "check_support");
  if (index < 0 || !check_until(index))
    return make_error(ErrorCode::InvalidArgument, "graph '", name(), "': plan index ", index,
                      " out of range [0, ", plan_count_unlocked(), ")");
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

Status Graph::build_plans_unlocked(BuildPlanPolicy policy) {
  if (state_->stage < Stage::Checked) return stage_error(*this, "build_plans", "check_support");
  std::string reasons;
  int64_t failed = 0;
  const auto start = std::chrono::steady_clock::now();
  // HEURISTICS_CHOICE: candidates are checked and built one at a time until one builds, so
  // nothing is compiled that will not be used. ALL: every supported candidate.
  for (int64_t i = 0; check_until(i); ++i) {
    Status s = build_plan_at_index_unlocked(i);
    if (!s.is_ok()) {
      ++failed;
      reasons +=
          detail::cat("\n  ", state_->statuses[state_->supported[i]].info.name, ": ", s.message());
      continue;
    }
    if (policy == BuildPlanPolicy::HeuristicsChoice) break;
  }
  if (state_->selected < 0) {
    Status s = make_error(ErrorCode::NotSupported, "graph '", name(),
                          "': no candidate plan could be built", reasons);
    if (log_enabled(LogLevel::Warn)) log_message(LogLevel::Warn, s.message());
    return s;
  }
  if (log_enabled(LogLevel::Info)) {
    const auto& cs = state_->statuses[state_->supported[static_cast<size_t>(state_->selected)]];
    log_message(
        LogLevel::Info,
        detail::cat(
            "graph '", name(), "': built plan ", state_->selected, " '", cs.info.name,
            "' of engine '", state_->engine->name(), "', workspace ", cs.workspace_size,
            " bytes, in ",
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                  start)
                .count(),
            " ms",
            failed ? detail::cat(" (", failed, " candidate(s) failed to build first)") : ""));
  }
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
  // A graph given a kernel cache skips it: the kernel cache is then what saves the compilation,
  // and a restored plan would neither use it (its kernels never reach it) nor check it.
  // One exclusive lock over the whole build (the cache lookup, the steps and the store).
  Exclusive lock(state_->mu);
  PlanCache* cache = nullptr;
  Engine* engine = nullptr;
  std::string key;
  // A deviceless build skips it too: its key names a device, and its plans are for another.
  if (handle && !handle->target() && policy == BuildPlanPolicy::HeuristicsChoice &&
      !state_->kernel_cache && (cache = PlanCache::global())) {
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
  DNNGRAPH_TRY(build_operation_graph_unlocked(handle));
  DNNGRAPH_TRY(create_execution_plans_unlocked(modes));
  DNNGRAPH_TRY(check_support_unlocked());
  DNNGRAPH_TRY(build_plans_unlocked(policy));
  if (engine && state_->engine == engine)
    store_plan(*cache, key, *state_, engine, serialize_unlocked());
  return Status::ok();
}

// The plan count and the candidate reports check the unchecked candidates: they lock alone.
int64_t Graph::get_execution_plan_count() const {
  Exclusive lock(state_->mu);
  return plan_count_unlocked();
}

int64_t Graph::plan_count_unlocked() const {
  if (state_->stage >= Stage::Checked)
    while (check_next()) {
    }
  return static_cast<int64_t>(state_->supported.size());
}

const std::vector<CandidateStatus>& Graph::candidates() const {
  Exclusive lock(state_->mu);
  if (state_->stage >= Stage::Checked)
    while (check_next()) {
    }
  return state_->statuses;
}
int64_t Graph::selected_plan_index() const { return state_->selected; }

Status Graph::select_plan(int64_t index) {
  Exclusive lock(state_->mu);
  DNNGRAPH_TRY(build_plan_at_index_unlocked(index));
  state_->selected = index;
  return Status::ok();
}

Result<int64_t> Graph::get_workspace_size() const {
  Shared lock(state_->mu);
  if (state_->selected < 0)
    return make_error(ErrorCode::InvalidArgument, "graph '", name(),
                      "': get_workspace_size() called before build_plans()");
  return state_->plans[static_cast<size_t>(state_->selected)]->workspace_size();
}

// A built plan's index is below supported.size(): no candidate needs checking (shared lock).
Result<int64_t> Graph::get_workspace_size_plan_at_index(int64_t index) const {
  Shared lock(state_->mu);
  if (index < 0 || index >= static_cast<int64_t>(state_->supported.size()) ||
      !state_->plans[static_cast<size_t>(index)])
    return make_error(ErrorCode::InvalidArgument, "graph '", name(), "': plan ", index,
                      " is not built (call build_plan_at_index(", index, ") first)");
  return state_->plans[static_cast<size_t>(index)]->workspace_size();
}

namespace {

const ir::TensorAttrs* find_built(const PipelineState& st, int64_t uid) {
  auto it = std::lower_bound(st.built.begin(), st.built.end(), uid,
                             [](const ir::TensorAttrs& t, int64_t u) { return t.uid < u; });
  return it != st.built.end() && it->uid == uid ? &*it : nullptr;
}

// The live non-virtual tensors against their copies taken when lowered (state locked).
Status unchanged(const Graph& g, const PipelineState& st) {
  for (size_t i = 0; i < st.required.size(); ++i) {
    const ir::TensorAttrs* t = st.required[i].get();
    const ir::TensorAttrs* b = &st.required_built[i];
    std::string what;
    if (t->uid != b->uid || !t->uid_assigned)
      what = detail::cat("its uid (", b->uid, " when built, now ", t->uid, ")");
    else if (t->dim != b->dim)
      what = detail::cat("its dims (", b->describe(), " when built, now ", t->describe(), ")");
    else if (t->stride != b->stride)
      what = detail::cat("its strides (", b->describe(), " when built, now ", t->describe(), ")");
    else if (t->data_type != b->data_type)
      what = detail::cat("its data type (", data_type_name(b->data_type), " when built, now ",
                         data_type_name(t->data_type), ")");
    else if (t->is_virtual != b->is_virtual || t->is_pass_by_value != b->is_pass_by_value ||
             t->is_output != b->is_output)
      what = "its virtual/output/pass-by-value flags";
    if (!what.empty())
      return make_error(ErrorCode::InvalidArgument, "graph '", g.name(), "': tensor '", t->name,
                        "' was edited after the graph was built (", what,
                        "); the plans run on the graph as built: build it again (build() or "
                        "build_operation_graph() ... build_plans()) before execute");
  }
  return Status::ok();
}

}  // namespace

const ir::TensorAttrs* Graph::built_tensor(int64_t uid) const {
  // The snapshot is replaced only by a build, which the caller must not race with (the Python
  // binding holds its own lock around both).
  return find_built(*state_, uid);
}

Status Graph::check_unchanged() const {
  Shared lock(state_->mu);
  return unchanged(*this, *state_);
}

Status Graph::check_variant_pack(const VariantPack& pack) const {
  Shared lock(state_->mu);
  return check_variant_pack_unlocked(pack);
}

// Uses only the snapshot taken at lowering, never the live tensors: those may be edited.
Status Graph::check_variant_pack_unlocked(const VariantPack& pack) const {
  if (state_->stage < Stage::Lowered) return stage_error(*this, "execute", "build_operation_graph");
  for (const ir::TensorAttrs& b : state_->required_built) {
    auto it = pack.find(b.uid);
    if (it == pack.end())
      return make_error(ErrorCode::InvalidArgument, "graph '", name(), "': tensor '", b.name,
                        "': the variant pack is missing a buffer for tensor uid ", b.uid,
                        "; bind one, keyed by the tensor or its uid");
    if (it->second == nullptr)
      return make_error(ErrorCode::InvalidArgument, "graph '", name(), "': tensor '", b.name,
                        "' (uid ", b.uid, ") has a null pointer in the variant pack");
  }
  if (pack.size() > state_->required.size()) {
    for (const auto& [uid, ptr] : pack) {
      if (find_built(*state_, uid)) continue;
      const ir::Tensor t = state_->validated ? state_->validated->find_tensor_by_uid(uid) : nullptr;
      if (t && t->is_virtual)
        return make_error(ErrorCode::InvalidArgument, "graph '", name(), "': tensor '", t->name,
                          "' (uid ", uid,
                          ") is virtual (an intermediate with no memory of its own): to read it, "
                          "call set_output(true) on it before build(), then bind a buffer");
      return make_error(ErrorCode::InvalidArgument, "graph '", name(),
                        "': the variant pack has uid ", uid,
                        ", which names no non-virtual tensor of the graph as built");
    }
  }
  return Status::ok();
}

Status Graph::execute_plan_at_index(Handle& handle, const VariantPack& pack, void* workspace,
                                    int64_t index, int64_t workspace_bytes) const {
  Shared lock(state_->mu);
  DNNGRAPH_TRY(unchanged(*this, *state_));
  return execute_unlocked(handle, pack, workspace, index, workspace_bytes);
}

Status Graph::execute(Handle& handle, const VariantPack& pack, void* workspace,
                      int64_t workspace_bytes) const {
  Shared lock(state_->mu);
  DNNGRAPH_TRY(unchanged(*this, *state_));
  if (state_->selected < 0)
    return make_error(ErrorCode::InvalidArgument, "graph '", name(),
                      "': execute() called before build_plans()");
  return execute_unlocked(handle, pack, workspace, state_->selected, workspace_bytes);
}

Status Graph::execute_unlocked(Handle& handle, const VariantPack& pack, void* workspace,
                               int64_t index, int64_t workspace_bytes) const {
  if (index < 0 || index >= static_cast<int64_t>(state_->supported.size()) ||
      !state_->plans[static_cast<size_t>(index)])
    return make_error(ErrorCode::InvalidArgument, "graph '", name(), "': plan ", index,
                      " is not built (call build_plans() or build_plan_at_index())");
  DNNGRAPH_TRY(check_run_handle(*this, *state_, handle, "execute"));
  DNNGRAPH_TRY(check_variant_pack_unlocked(pack));
  Plan& plan = *state_->plans[static_cast<size_t>(index)];
  const int64_t need = plan.workspace_size();
  if (need > 0 && workspace == nullptr)
    return make_error(ErrorCode::InvalidArgument, "graph '", name(), "': plan '", plan.name(),
                      "' needs a workspace of ", need, " bytes, got none");
  if (workspace_bytes >= 0 && workspace_bytes < need)
    return make_error(ErrorCode::InvalidArgument, "graph '", name(),
                      "': workspace too small: plan '", plan.name(), "' needs ", need,
                      " bytes, got ", workspace_bytes);
  if (state_->settings.cuda_graph_execute != CudaGraphExecute::Off)
    return plan.execute_replayed(handle, pack, workspace, state_->settings.cuda_graph_execute);
  return plan.execute(handle, pack, workspace);
}

}  // namespace dnngraph
