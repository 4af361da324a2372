// pygraph: the autotuner, the plan filters and CUDA graphs.
#include "common.hpp"

namespace dnngraph::py {
namespace {

nb::dict report_dict(const AutotuneReport& r) {
  nb::list cands;
  for (const auto& c : r.candidates) {
    nb::dict d;
    d["name"] = c.name;
    d["plan_index"] = c.plan_index;
    d["median_ms"] = c.median_ms;
    d["min_ms"] = c.min_ms;
    d["runs"] = c.runs;
    d["workspace_size"] = c.workspace_size;
    d["ok"] = c.status.is_ok();
    d["status"] = c.status.is_ok() ? std::string("ok") : c.status.message();
    cands.append(d);
  }
  nb::dict d;
  d["candidates"] = cands;
  d["selected"] = r.selected;
  d["selected_name"] = r.selected_name;
  d["selected_ms"] = r.selected_ms;
  d["from_cache"] = r.from_cache;
  d["timed_runs"] = r.timed_runs;
  d["rotated_copies"] = r.rotated_copies;
  d["flush_bytes"] = r.flush_bytes;
  d["wall_ms"] = r.wall_ms;
  d["budget_spent"] = r.budget_spent;
  return d;
}

using Pack = std::optional<nb::typed<nb::dict, std::variant<ir::Tensor, int64_t>, nb::object>>;

// A filter setter that returns the graph (chainable, as in the frontend).
template <class Arg>
void filter(nb::class_<PyGraph>& cls, const char* name, Graph& (Graph::*set)(Arg),
            const char* arg_name, const char* doc) {
  cls.def(
      name,
      [set](nb::handle self, Arg v) {
        (nb::inst_ptr<PyGraph>(self)->graph.*set)(std::move(v));
        return nb::borrow(self);
      },
      nb::arg(arg_name), doc);
}

// set_cuda_graph_execute's argument: a bool, or a mode's name.
CudaGraphExecute cuda_graph_mode(nb::handle on) {
  if (nb::isinstance<nb::bool_>(on))
    return nb::cast<bool>(on) ? CudaGraphExecute::Always : CudaGraphExecute::Off;
  if (!nb::isinstance<nb::str>(on))
    throw nb::type_error(("set_cuda_graph_execute: expected a bool or one of 'always', "
                          "'repeated', 'off', got " +
                          nb::cast<std::string>(nb::str(on.type())))
                             .c_str());
  const std::string v = nb::cast<std::string>(on);
  if (auto mode = parse_cuda_graph_execute(v)) return *mode;
  throw nb::value_error(("set_cuda_graph_execute: mode '" + v +
                         "' is not one of 'always', 'repeated', 'off' (or a bool)")
                            .c_str());
}

// populate/update_cuda_graph and graph-backed execute.
void bind_cuda_graphs(nb::class_<PyGraph>& cls) {
  auto cuda_graph_call = [](bool update) {
    return [update](PyGraph& self, const PyHandle* handle, nb::dict pack, nb::handle workspace,
                    uintptr_t cuda_graph) {
      with_pack(self, pack, workspace, handle,
                [&](Handle& h, const VariantPack& p, void* ws, int64_t) {
                  void* g = reinterpret_cast<void*>(cuda_graph);
                  return update ? self.graph.update_cuda_graph(h, p, ws, g)
                                : self.graph.populate_cuda_graph(h, p, ws, g);
                });
    };
  };
  cls.def("populate_cuda_graph", cuda_graph_call(false), nb::arg("handle").none(),
          nb::arg("variant_pack"), nb::arg("workspace").none(), nb::arg("cuda_graph"),
          "Records the selected plan for `variant_pack` into `cuda_graph`, an empty\n"
          "cudaGraph_t given as an int (e.g. torch.cuda.CUDAGraph's raw graph): natively where\n"
          "the engine allows it, else as one captured child graph.");
  cls.def("update_cuda_graph", cuda_graph_call(true), nb::arg("handle").none(),
          nb::arg("variant_pack"), nb::arg("workspace").none(), nb::arg("cuda_graph"),
          "Points a graph filled by populate_cuda_graph at the pointers of `variant_pack`.");
  cls.def(
      "set_cuda_graph_execute",
      [](nb::handle self, nb::handle on) {
        nb::inst_ptr<PyGraph>(self)->graph.set_cuda_graph_execute(cuda_graph_mode(on));
        return nb::borrow(self);
      },
      nb::arg("on") = true,
      "Graph-backed execute: execute() replays a CUDA graph recorded for the same pointers\n"
      "(bounded per plan; graphs on the CPU execute directly). True or 'always': recorded the\n"
      "first time a set of pointers is seen; 'repeated': only once the set comes back (a set\n"
      "used once costs no recording); False or 'off': every execute runs directly.");
  cls.def_prop_ro("cuda_graph_execute",
                  [](const PyGraph& self) { return self.graph.cuda_graph_execute(); });
  cls.def_prop_ro(
      "cuda_graph_execute_stats",
      [](const PyGraph& self) {
        const CudaGraphExecuteStats s = self.graph.cuda_graph_execute_stats();
        nb::dict d;
        d["replayed"] = s.replayed;
        d["recorded"] = s.recorded;
        d["direct"] = s.direct;
        return d;
      },
      "What graph-backed execute did: {'replayed', 'recorded', 'direct'} executes.");
}

}  // namespace

void bind_tune(nb::class_<PyGraph>& cls) {
  filter(cls, "deselect_engines", &Graph::deselect_engines, "values",
         "Skips candidates named here (full name, engine id such as 'eng0', or engine).");
  filter(cls, "select_numeric_notes", &Graph::select_numeric_notes, "values",
         "Keeps only candidates carrying every numerical note named (e.g. 'TENSOR_CORE').");
  filter(cls, "deselect_numeric_notes", &Graph::deselect_numeric_notes, "values",
         "Skips candidates carrying any numerical note named.");
  filter(cls, "select_behavior_notes", &Graph::select_behavior_notes, "values",
         "Keeps only candidates carrying every behaviour note named.");
  filter(cls, "deselect_behavior_notes", &Graph::deselect_behavior_notes, "values",
         "Skips candidates carrying any behaviour note named (e.g. 'RUNTIME_COMPILATION').");
  filter(cls, "deselect_workspace_greater_than", &Graph::deselect_workspace_greater_than,
         "workspace_limit", "Skips candidates needing more workspace bytes than this.");
  cls.def(
      "plan_filters",
      [](const PyGraph& self) {
        const PlanFilters& f = self.graph.plan_filters();
        nb::dict d;
        d["engines"] = f.engines;
        d["select_numeric_notes"] = f.require_numerical_notes;
        d["deselect_numeric_notes"] = f.exclude_numerical_notes;
        d["select_behavior_notes"] = f.require_behavior_notes;
        d["deselect_behavior_notes"] = f.exclude_behavior_notes;
        d["workspace_limit"] = f.max_workspace;
        return d;
      },
      "The plan filters set on the graph, as a dict.");

  cls.def(
      "get_autotune_workspace_size",
      [](PyGraph& self) {
        std::unique_lock<std::shared_mutex> lock(self.mu, std::defer_lock);  // builds plans
        lock_released_gil(lock);
        return unwrap(self.graph.get_autotune_workspace_size());
      },
      "The largest workspace among the plans autotune() times (builds them).");
  cls.def(
      "autotune",
      [](PyGraph& self, const PyHandle* handle, Pack pack, nb::handle workspace, double budget_ms,
         int warmup, int iterations, bool flush_cache, int rotate_inputs,
         int64_t rotate_budget_bytes, bool use_cache, bool keep_unselected, nb::object progress) {
        AutotuneOptions o;
        o.budget_ms = budget_ms;
        o.warmup = warmup;
        o.iterations = iterations;
        o.flush_cache = flush_cache;
        o.rotate_inputs = rotate_inputs;
        o.rotate_budget_bytes = rotate_budget_bytes;
        o.use_cache = use_cache;
        o.keep_unselected = keep_unselected;
        if (!progress.is_none())
          o.progress = [progress](int64_t i, int64_t n, const std::string& name) {
            nb::gil_scoped_acquire gil;
            progress(i, n, name);
          };
        AutotuneReport report;
        if (!pack) {
          Handle& h = self.handle_for(handle);
          std::unique_lock<std::shared_mutex> lock(self.mu, std::defer_lock);  // builds plans
          lock_released_gil(lock);
          Result<AutotuneReport> r = AutotuneReport{};
          {
            nb::gil_scoped_release release;
            r = self.graph.autotune(h, o);
          }
          report = unwrap(std::move(r));
        } else {
          with_pack(self, *pack, workspace, handle,
                    [&](Handle& h, const VariantPack& p, void* ws, int64_t ws_bytes) {
                      DNNGRAPH_ASSIGN_OR_RETURN(auto r, self.graph.autotune(h, p, ws, ws_bytes, o));
                      report = std::move(r);
                      return Status::ok();
                    });
        }
        return report_dict(report);
      },
      nb::arg("handle").none() = nb::none(), nb::arg("pack").none() = nb::none(),
      nb::arg("workspace").none() = nb::none(), nb::kw_only(), nb::arg("budget_ms") = 0.0,
      nb::arg("warmup") = 2, nb::arg("iterations") = 10, nb::arg("flush_cache") = true,
      nb::arg("rotate_inputs") = 0, nb::arg("rotate_budget_bytes") = int64_t{1} << 30,
      nb::arg("use_cache") = true, nb::arg("keep_unselected") = true,
      nb::arg("progress").none() = nb::none(),
      "Times every candidate the plan filters allow and selects the fastest (see\n"
      "docs/performance.md). Without `pack` it allocates inputs (values in [-1, 1]), outputs\n"
      "and the workspace itself; with one it runs on the caller's buffers (workspace: at\n"
      "least get_autotune_workspace_size() bytes). The choice is recorded in the plan cache:\n"
      "a later autotune of the same graph selects it without timing (from_cache). Returns a\n"
      "report dict (selected, selected_name, selected_ms, from_cache, timed_runs,\n"
      "candidates: name, median_ms, min_ms, runs, workspace_size, ok, status).");
  bind_cuda_graphs(cls);
}

}  // namespace dnngraph::py
