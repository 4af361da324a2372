// The autotuner (Graph::autotune) and the plan filters (Graph::deselect_* / select_*): their
// options and reports. See docs/performance.md ("Autotuning") for how candidates are timed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dnngraph/engines/interface.hpp"
#include "dnngraph/status.hpp"

namespace dnngraph {

// Which candidates the pipeline may use, as the frontend's deselect_* / select_* calls: a
// candidate is skipped when it is named in `engines` (its full name, its engine id such as
// "eng0", or its engine such as "cudnn"), lacks a required note, carries an excluded note, or
// needs more workspace than `max_workspace` bytes. Applied as candidates are checked and built.
struct PlanFilters {
  std::vector<std::string> engines;
  std::vector<std::string> require_numerical_notes, exclude_numerical_notes;
  std::vector<std::string> require_behavior_notes, exclude_behavior_notes;
  int64_t max_workspace = -1;  // -1: no limit

  bool empty() const;
  // Why a candidate is filtered out ("" when it is kept). `workspace` < 0: not known yet.
  std::string reject_reason(const CandidateInfo& info, int64_t workspace) const;
  // A stable text form (part of the plan cache key when filters are set).
  std::string describe() const;
};

struct AutotuneOptions {
  int warmup = 2;        // untimed runs per candidate (>= 0)
  int iterations = 10;   // timed runs per candidate (>= 1); more, up to 4x, while the median moves
  double budget_ms = 0;  // wall-clock limit for the whole call (0: none); candidates left untimed
                         // when it is spent are reported as skipped
  bool flush_cache = true;  // before each timed run, overwrite a buffer larger than the L2 cache
  int rotate_inputs = 0;    // copies of the input tensors that successive runs rotate through
  int64_t rotate_budget_bytes = int64_t{1} << 30;  // memory the copies may take
  bool use_cache = true;  // reuse a choice recorded in the plan cache, record the new one
  // false: once the choice is made, the plans that lost are released (the host and device
  // memory of their compiled kernels); build_plan_at_index builds one again.
  bool keep_unselected = true;
  // Called before each candidate is timed: (index, count, candidate name).
  std::function<void(int64_t, int64_t, const std::string&)> progress;

  Status validate() const;
};

struct AutotuneCandidate {
  std::string name;
  int64_t plan_index = -1;  // index among the supported plans (build_plan_at_index)
  double median_ms = -1;    // -1: not timed
  double min_ms = -1;
  int runs = 0;  // timed runs
  int64_t workspace_size = -1;
  Status status;  // Ok, or why it was not timed (not built, deselected, budget spent, ...)
};

struct AutotuneReport {
  std::vector<AutotuneCandidate> candidates;
  int64_t selected = -1;  // plan index execute() now uses
  std::string selected_name;
  double selected_ms = -1;
  bool from_cache = false;  // the choice was recorded by an earlier autotune: nothing was timed
  int64_t timed_runs = 0;   // executions timed by this call
  int rotated_copies = 0;   // input copies rotated through (0: the caller's inputs only)
  int64_t flush_bytes = 0;  // bytes overwritten before each timed run (0: no flush)
  double wall_ms = 0;
  bool budget_spent = false;
};

}  // namespace dnngraph
