// Graph::autotune: builds the candidates the plan filters allow, times each through the
// engine's PlanTimer (warm-up, a cache flush before each timed run, rotating input copies, a
// median that must settle), selects the fastest and records it in the plan cache.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <random>
#include <set>

#include "dnngraph/graph.hpp"
#include "dnngraph/plan_cache.hpp"
#include "dnngraph/storage.hpp"
#include "runtime/pipeline.hpp"

namespace dnngraph {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Elements a tensor's storage spans (dims and strides in elements), 0 for an empty tensor.
int64_t span_elements(const ir::TensorAttrs& t) {
  int64_t last = 0;
  for (size_t i = 0; i < t.dim.size(); ++i) {
    if (t.dim[i] == 0) return 0;
    last += (t.dim[i] - 1) * (i < t.stride.size() ? t.stride[i] : 1);
  }
  return last + 1;
}

// Copies of the inputs (the tensors of `required` no node of `g` writes) for autotune to
// rotate through, as many as o.rotate_inputs and o.rotate_budget_bytes allow: each copy's
// pack (`pack` with the copies' pointers) is appended to `packs` and its memory kept in
// `copies`. Returns how many were made.
Result<int> rotate_inputs(const ir::ValidatedGraph& g, const std::vector<ir::Tensor>& required,
                          PlanTimer& tm, const AutotuneOptions& o, const VariantPack& pack,
                          std::vector<VariantPack>& packs,
                          std::vector<std::shared_ptr<void>>& copies) {
  std::set<int64_t> written;
  for (const auto& n : g.nodes())
    for (const auto& p : n.outputs)
      if (p.tensor) written.insert(p.tensor->uid);
  std::vector<std::pair<int64_t, int64_t>> inputs;  // uid, bytes
  int64_t per_copy = 0;
  for (const ir::Tensor& t : required)
    if (!t->is_pass_by_value && !written.count(t->uid)) {
      inputs.emplace_back(t->uid, data_type_bytes(t->data_type, span_elements(*t)).value_or(0));
      per_copy += inputs.back().second;
    }
  const int n =
      per_copy > 0
          ? static_cast<int>(std::min<int64_t>(o.rotate_inputs, o.rotate_budget_bytes / per_copy))
          : 0;
  for (int c = 0; c < n; ++c) {
    VariantPack p = pack;
    for (const auto& [uid, bytes] : inputs) {
      DNNGRAPH_ASSIGN_OR_RETURN(auto copy, tm.copy(pack.at(uid), bytes));
      p[uid] = copy.get();
      copies.push_back(std::move(copy));
    }
    packs.push_back(std::move(p));
  }
  return n;
}

// Times one built candidate: o.warmup untimed runs, o.iterations timed ones (at least one
// within the budget), then more until the median settles (within 1%), at most 4x the runs
// asked for. run(timed, times) runs it once (appending the time when timed). Sets c.status
// and, when some run was timed, c.median_ms, c.min_ms and c.runs.
template <class Run, class OverBudget>
void time_candidate(Run&& run, const AutotuneOptions& o, OverBudget&& over_budget,
                    AutotuneCandidate& c) {
  std::vector<double> times;
  for (int w = 0; w < o.warmup && c.status; ++w) c.status = run(false, times);
  for (int r = 0; r < o.iterations && c.status; ++r) {
    if (r > 0 && over_budget()) break;  // every candidate timed gets one run at least
    c.status = run(true, times);
  }
  double m = times.empty() ? 0 : median(times);
  const int step = std::max(1, o.iterations / 2);
  while (c.status && !over_budget() && static_cast<int>(times.size()) + step <= 4 * o.iterations) {
    for (int r = 0; r < step && c.status; ++r) c.status = run(true, times);
    const double m2 = median(times);
    const bool settled = std::fabs(m2 - m) <= 0.01 * m;
    m = m2;
    if (settled) break;
  }
  if (c.status && !times.empty()) {
    c.median_ms = m;
    c.min_ms = *std::min_element(times.begin(), times.end());
    c.runs = static_cast<int>(times.size());
  }
}

// The error when autotune timed no candidate: each one's reason (the first 2000 characters).
Status none_timed(const std::string& graph, int64_t count,
                  const std::vector<AutotuneCandidate>& candidates) {
  std::string reasons;
  for (const auto& c : candidates)
    if (reasons.size() < 2000) reasons += detail::cat("\n  ", c.name, ": ", c.status.message());
  return make_error(ErrorCode::NotSupported, "graph '", graph, "': autotune timed none of the ",
                    count, " supported candidate(s)", reasons);
}

// The candidates checked: collected again first for a plan restored (from the plan cache)
// without them, with the handle and heuristic modes the graph was built with.
Status checked_candidates(Graph& g, const PipelineState& st) {
  if (st.candidates.empty()) {
    HandlePtr h = st.handle;
    std::vector<HeurMode> modes = st.settings.modes;
    DNNGRAPH_TRY(g.build_operation_graph(h));
    DNNGRAPH_TRY(g.create_execution_plans(modes));
  }
  if (st.stage < Stage::Checked) DNNGRAPH_TRY(g.check_support());
  return Status::ok();
}

}  // namespace

Status AutotuneOptions::validate() const {
  if (warmup < 0 || iterations < 1 || !(budget_ms >= 0) || rotate_inputs < 0 ||
      rotate_budget_bytes < 0)
    return make_error(ErrorCode::InvalidArgument, "autotune: options out of range: warmup ", warmup,
                      " (>= 0), iterations ", iterations, " (>= 1), budget_ms ", budget_ms,
                      " (>= 0, 0: no limit), ", "rotate_inputs ", rotate_inputs,
                      " (>= 0), rotate_budget_bytes ", rotate_budget_bytes, " (>= 0)");
  return Status::ok();
}

// Selects the candidate an earlier autotune chose; false when the graph no longer has it.
Result<bool> Graph::reuse_tuned(const std::string& name) {
  PipelineState& st = *state_;
  if (st.candidates.empty() && st.stage == Stage::Built && st.statuses.size() == 1)
    if (st.statuses[0].info.name == name) return true;  // restored from the plan cache
  DNNGRAPH_TRY(checked_candidates(*this, st));
  const int64_t n = get_execution_plan_count();
  for (int64_t i = 0; i < n; ++i)
    if (st.statuses[st.supported[static_cast<size_t>(i)]].info.name == name)
      return select_plan(i).is_ok();
  return false;
}

// A choice recorded earlier (this process or another): select it, time nothing.
Result<bool> Graph::autotune_from_cache(const AutotuneOptions& o, AutotuneReport& report) {
  PlanCache* cache = o.use_cache ? PlanCache::global() : nullptr;
  if (!cache) return false;
  PipelineState& st = *state_;
  auto hit =
      cache->get(plan_cache_key(*st.engine, *st.handle, st.settings.modes, "heuristics_choice"));
  if (!hit || hit->time_ms < 0) return false;
  DNNGRAPH_ASSIGN_OR_RETURN(bool reused, reuse_tuned(hit->engine_config));
  if (!reused) return false;
  report.from_cache = true;
  report.selected = st.selected;
  report.selected_name = hit->engine_config;
  report.selected_ms = hit->time_ms;
  return true;
}

Result<int64_t> Graph::get_autotune_workspace_size() {
  if (state_->stage < Stage::Lowered)
    return make_error(ErrorCode::InvalidArgument, "graph '", name(),
                      "': get_autotune_workspace_size() called before build_operation_graph()");
  if (state_->candidates.empty()) {
    HandlePtr h = state_->handle;
    std::vector<HeurMode> modes = state_->settings.modes;
    DNNGRAPH_TRY(build_operation_graph(h));
    DNNGRAPH_TRY(create_execution_plans(modes));
  }
  if (state_->stage < Stage::Checked) DNNGRAPH_TRY(check_support());
  int64_t most = 0;
  const int64_t n = get_execution_plan_count();
  for (int64_t i = 0; i < n; ++i)
    if (build_plan_at_index(i).is_ok())
      most = std::max(most, state_->plans[static_cast<size_t>(i)]->workspace_size());
  return most;
}

Result<AutotuneReport> Graph::autotune(Handle& handle, const VariantPack& pack, void* workspace,
                                       int64_t workspace_bytes, const AutotuneOptions& o) {
  const auto t0 = Clock::now();
  DNNGRAPH_TRY(o.validate());
  PipelineState& st = *state_;
  if (st.stage < Stage::Lowered)
    return make_error(ErrorCode::InvalidArgument, "graph '", name(),
                      "': autotune() called before build_operation_graph() (or build())");
  DNNGRAPH_TRY(check_run_handle(*this, st, handle, "autotune"));
  DNNGRAPH_TRY(check_variant_pack(pack));
  AutotuneReport report;
  DNNGRAPH_ASSIGN_OR_RETURN(bool reused, autotune_from_cache(o, report));
  if (reused) {
    report.wall_ms = ms_since(t0);
    return report;
  }
  PlanCache* cache = o.use_cache ? PlanCache::global() : nullptr;
  Engine& engine = *st.engine;
  const std::string key =
      cache ? plan_cache_key(engine, *st.handle, st.settings.modes, "heuristics_choice") : "";

  // Every candidate the filters allow.
  DNNGRAPH_TRY(checked_candidates(*this, st));
  const int64_t count = get_execution_plan_count();
  DNNGRAPH_ASSIGN_OR_RETURN(auto timer, engine.make_timer(handle));
  PlanTimer& tm = *timer;
  report.flush_bytes = o.flush_cache ? tm.flush_bytes() : 0;

  // Rotating copies of the inputs, within the memory budget.
  std::vector<VariantPack> packs{pack};
  std::vector<std::shared_ptr<void>> copies;
  if (o.rotate_inputs > 0) {
    DNNGRAPH_ASSIGN_OR_RETURN(report.rotated_copies, rotate_inputs(*st.validated, st.required, tm,
                                                                   o, pack, packs, copies));
  }

  size_t next_pack = 0;
  auto run = [&](Plan& plan, bool timed, std::vector<double>& times) -> Status {
    const VariantPack& p = packs[next_pack++ % packs.size()];
    if (!timed) return plan.execute(handle, p, workspace);
    if (report.flush_bytes > 0) DNNGRAPH_TRY(tm.flush());
    DNNGRAPH_TRY(tm.start());
    DNNGRAPH_TRY(plan.execute(handle, p, workspace));
    DNNGRAPH_ASSIGN_OR_RETURN(auto ms, tm.stop());
    times.push_back(ms);
    ++report.timed_runs;
    return Status::ok();
  };
  auto over_budget = [&] { return o.budget_ms > 0 && ms_since(t0) > o.budget_ms; };

  int64_t best = -1;
  for (int64_t i = 0; i < count; ++i) {
    AutotuneCandidate c;
    c.plan_index = i;
    c.name = st.statuses[st.supported[static_cast<size_t>(i)]].info.name;
    if (o.progress) o.progress(i, count, c.name);
    if (best >= 0 && over_budget()) {
      report.budget_spent = true;
      c.status = make_error(ErrorCode::NotSupported, "not timed: the budget of ", o.budget_ms,
                            " ms was spent");
      report.candidates.push_back(std::move(c));
      continue;
    }
    c.status = build_plan_at_index(i);
    if (c.status) {
      Plan& plan = *st.plans[static_cast<size_t>(i)];
      c.workspace_size = plan.workspace_size();
      if (workspace_bytes >= 0 && c.workspace_size > workspace_bytes)
        c.status = make_error(ErrorCode::NotSupported, "not timed: needs ", c.workspace_size,
                              " bytes of workspace, the autotune workspace has ", workspace_bytes,
                              " (size it with get_autotune_workspace_size())");
      else if (c.workspace_size > 0 && workspace == nullptr)
        c.status = make_error(ErrorCode::NotSupported, "not timed: needs ", c.workspace_size,
                              " bytes of workspace, got none");
    }
    if (c.status) {
      Plan& plan = *st.plans[static_cast<size_t>(i)];
      time_candidate(
          [&](bool timed, std::vector<double>& times) { return run(plan, timed, times); }, o,
          over_budget, c);
      if (c.status && c.runs > 0 &&
          (best < 0 || c.median_ms < report.candidates[static_cast<size_t>(best)].median_ms))
        best = static_cast<int64_t>(report.candidates.size());
    }
    report.candidates.push_back(std::move(c));
  }
  if (best < 0) return none_timed(name(), count, report.candidates);
  const AutotuneCandidate& win = report.candidates[static_cast<size_t>(best)];
  DNNGRAPH_TRY(select_plan(win.plan_index));
  if (!o.keep_unselected)
    for (size_t i = 0; i < st.plans.size(); ++i)
      if (static_cast<int64_t>(i) != win.plan_index) st.plans[i].reset();
  report.selected = win.plan_index;
  report.selected_name = win.name;
  report.selected_ms = win.median_ms;
  if (cache) {
    std::string bytes;
    if (engine.loads_plans())
      if (auto s = serialize(); s && s->find("\"plan\":null") == std::string::npos)
        bytes = std::move(s).value();
    cache->put(key, PlanCacheEntry{win.name, win.median_ms, std::move(bytes)});
  }
  report.wall_ms = ms_since(t0);
  return report;
}

}  // namespace dnngraph

namespace dnngraph {

Result<AutotuneReport> Graph::autotune(Handle& handle, const AutotuneOptions& o) {
  PipelineState& st = *state_;
  if (st.stage < Stage::Lowered)
    return make_error(ErrorCode::InvalidArgument, "graph '", name(),
                      "': autotune() called before build_operation_graph() (or build())");
  DNNGRAPH_TRY(check_run_handle(*this, st, handle, "autotune"));
  // A recorded choice needs no buffers, and no candidate built (get_autotune_workspace_size
  // builds them all).
  const auto t0 = Clock::now();
  DNNGRAPH_TRY(o.validate());
  AutotuneReport cached;
  DNNGRAPH_ASSIGN_OR_RETURN(bool reused, autotune_from_cache(o, cached));
  if (reused) {
    cached.wall_ms = ms_since(t0);
    return cached;
  }
  DNNGRAPH_ASSIGN_OR_RETURN(auto timer, st.engine->make_timer(handle));
  std::vector<std::shared_ptr<void>> owned;
  std::vector<std::array<unsigned char, 16>> scalars(st.required.size());
  VariantPack pack;
  std::mt19937 gen(20261202);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (size_t i = 0; i < st.required.size(); ++i) {
    const ir::TensorAttrs& t = *st.required[i];
    if (t.is_pass_by_value) {
      store_element(scalars[i].data(), t.data_type, 0, 1.0);
      pack[t.uid] = scalars[i].data();
      continue;
    }
    // validate() checked the extent against int64 (a sub-byte type rounds up to whole bytes).
    const int64_t elements = span_elements(t);
    const int64_t bytes = data_type_bytes(t.data_type, elements).value_or(0);
    std::vector<unsigned char> host(static_cast<size_t>(std::max<int64_t>(bytes, 1)));
    if (t.data_type != DataType::NotSet)
      for (int64_t e = 0; e < elements; ++e) store_element(host.data(), t.data_type, e, dist(gen));
    DNNGRAPH_ASSIGN_OR_RETURN(auto dev, timer->copy(host.data(), bytes));
    pack[t.uid] = dev.get();
    owned.push_back(std::move(dev));
  }
  DNNGRAPH_ASSIGN_OR_RETURN(auto ws_bytes, get_autotune_workspace_size());
  void* ws = nullptr;
  if (ws_bytes > 0) {
    DNNGRAPH_ASSIGN_OR_RETURN(auto w, timer->alloc(ws_bytes));
    ws = w.get();
    owned.push_back(std::move(w));
  }
  timer.reset();
  return autotune(handle, pack, ws, ws_bytes, o);
}

}  // namespace dnngraph
