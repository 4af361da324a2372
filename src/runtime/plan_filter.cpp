// The plan filters (the frontend's deselect_* / select_*), applied by Graph as candidates are
// checked (check_next) and plans are built (build_plan_at_index).
#include <algorithm>
#include <mutex>
#include <shared_mutex>

#include "dnngraph/graph.hpp"
#include "runtime/pipeline.hpp"

namespace dnngraph {
namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

}  // namespace

bool PlanFilters::empty() const {
  return engines.empty() && require_numerical_notes.empty() && exclude_numerical_notes.empty() &&
         require_behavior_notes.empty() && exclude_behavior_notes.empty() && max_workspace < 0;
}

std::string PlanFilters::reject_reason(const CandidateInfo& info, int64_t workspace) const {
  const std::string id = info.name.substr(0, info.name.find(' '));  // "eng0 KNOB=1" -> "eng0"
  if (contains(engines, info.name) || contains(engines, id) || contains(engines, info.engine))
    return "was deselected by deselect_engines";
  for (const auto& n : require_numerical_notes)
    if (!contains(info.numerical_notes, n))
      return "was deselected: it lacks the numerical note " + n +
             " that select_numeric_notes requires (it has [" + join(info.numerical_notes) + "])";
  for (const auto& n : info.numerical_notes)
    if (contains(exclude_numerical_notes, n))
      return "was deselected: it carries the numerical note " + n +
             " that deselect_numeric_notes excludes";
  for (const auto& n : require_behavior_notes)
    if (!contains(info.behavior_notes, n))
      return "was deselected: it lacks the behaviour note " + n +
             " that select_behavior_notes requires (it has [" + join(info.behavior_notes) + "])";
  for (const auto& n : info.behavior_notes)
    if (contains(exclude_behavior_notes, n))
      return "was deselected: it carries the behaviour note " + n +
             " that deselect_behavior_notes excludes";
  if (max_workspace >= 0 && workspace > max_workspace)
    return detail::cat("was deselected: it needs ", workspace,
                       " bytes of workspace, more than the ", max_workspace,
                       " that deselect_workspace_greater_than allows");
  return "";
}

std::string PlanFilters::describe() const {
  auto sorted = [](std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return join(v);
  };
  return detail::cat("filters e=", sorted(engines), " n+=", sorted(require_numerical_notes),
                     " n-=", sorted(exclude_numerical_notes),
                     " b+=", sorted(require_behavior_notes), " b-=", sorted(exclude_behavior_notes),
                     " ws<=", max_workspace);
}

void Graph::reset_checks() {
  PipelineState& st = *state_;
  if (st.stage < Stage::Planned) return;
  // Candidates keep what check_support learnt about them; only the verdicts are redone.
  st.checked = 0;
  st.statuses.clear();
  st.supported.clear();
  st.plans.clear();
  st.selected = -1;
  st.stage = Stage::Planned;
}

Graph& Graph::set_plan_filters(PlanFilters filters) {
  std::unique_lock<std::shared_mutex> lock(state_->mu);  // the checks are redone
  state_->settings.filters = std::move(filters);
  reset_checks();
  return *this;
}

const PlanFilters& Graph::plan_filters() const { return state_->settings.filters; }

Graph& Graph::deselect_engines(std::vector<std::string> names) {
  PlanFilters f = plan_filters();
  f.engines.insert(f.engines.end(), names.begin(), names.end());
  return set_plan_filters(std::move(f));
}

Graph& Graph::select_numeric_notes(std::vector<std::string> notes) {
  PlanFilters f = plan_filters();
  f.require_numerical_notes = std::move(notes);
  return set_plan_filters(std::move(f));
}

Graph& Graph::deselect_numeric_notes(std::vector<std::string> notes) {
  PlanFilters f = plan_filters();
  f.exclude_numerical_notes = std::move(notes);
  return set_plan_filters(std::move(f));
}

Graph& Graph::select_behavior_notes(std::vector<std::string> notes) {
  PlanFilters f = plan_filters();
  f.require_behavior_notes = std::move(notes);
  return set_plan_filters(std::move(f));
}

Graph& Graph::deselect_behavior_notes(std::vector<std::string> notes) {
  PlanFilters f = plan_filters();
  f.exclude_behavior_notes = std::move(notes);
  return set_plan_filters(std::move(f));
}

Graph& Graph::deselect_workspace_greater_than(int64_t bytes) {
  PlanFilters f = plan_filters();
  f.max_workspace = bytes < 0 ? 0 : bytes;
  return set_plan_filters(std::move(f));
}

// A plan's workspace is known exactly only once built: one over the limit is dropped again.
Status Graph::apply_workspace_filter(int64_t index) {
  PipelineState& st = *state_;
  const int64_t limit = st.settings.filters.max_workspace;
  auto& slot = st.plans[static_cast<size_t>(index)];
  if (limit < 0 || !slot || slot->workspace_size() <= limit) return Status::ok();
  CandidateStatus& cs = st.statuses[st.supported[static_cast<size_t>(index)]];
  cs.support = make_error(ErrorCode::NotSupported, "candidate '", cs.info.name,
                          "' was deselected: it needs ", slot->workspace_size(),
                          " bytes of workspace, more than the ", limit,
                          " that deselect_workspace_greater_than allows");
  cs.built = false;
  slot.reset();
  return cs.support;
}

}  // namespace dnngraph
