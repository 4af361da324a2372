// pygraph: construction, tensors, the build pipeline, introspection.
#include <nanobind/stl/map.h>

#include "common.hpp"
#include "dnngraph/ir/fingerprint.hpp"
#include "dnngraph/ir/json.hpp"

namespace dnngraph::py {

namespace {
// Live pygraphs (touched with the GIL held).
std::vector<PyGraph*>& live_graphs() {
  static std::vector<PyGraph*> v;
  return v;
}
}  // namespace

PyGraph::PyGraph() { live_graphs().push_back(this); }
PyGraph::~PyGraph() { std::erase(live_graphs(), this); }

std::string graph_owning(const ir::TensorAttrs* t) {
  for (const PyGraph* g : live_graphs())
    for (const auto& u : g->graph.tensors())
      if (u.get() == t) return "graph '" + g->graph.name() + "'";
  return "another graph (no longer alive, or replaced by deserialize)";
}

const ir::TensorAttrs* PyGraph::find_uid(int64_t uid) {
  auto it = by_uid.find(uid);
  if (it != by_uid.end() && it->second->uid == uid && it->second->uid_assigned)
    return it->second.get();
  // A miss or a stale entry (uids are assigned by validate and may be edited): rebuild once.
  by_uid.clear();
  for (const auto& t : graph.tensors())
    if (t->uid_assigned && !t->is_virtual) by_uid.emplace(t->uid, t);
  it = by_uid.find(uid);
  return it == by_uid.end() ? nullptr : it->second.get();
}

const HandlePtr& PyGraph::ensure_handle() {
  if (!handle)
    handle = create_handle_or_explain(
        Device::cuda(0), "this graph has no handle and the default one (cuda:0) cannot be made: ",
        "pass pygraph(handle=create_handle(device=\"cpu\")) for the reference engine");
  return handle;
}

Handle& PyGraph::handle_for(const PyHandle* override) {
  if (override) return *override->get();
  return *ensure_handle();
}

ir::Tensor as_tensor(PyGraph& g, const std::optional<TensorOrScalar>& v) {
  if (!v) return nullptr;
  if (auto* t = std::get_if<ir::Tensor>(&*v)) return *t;
  return g.graph.scalar(ir::Scalar::of_float(std::get<double>(*v)));
}

namespace {

// Releases the GIL around a long C++ step and raises its error after taking the GIL back.
// Also takes the graph's lock alone (see PyGraph::mu).
template <class F>
void run_released(PyGraph& self, F&& f) {
  Status s;
  {
    nb::gil_scoped_release release;
    std::unique_lock<std::shared_mutex> lock(self.mu);
    s = f();
  }
  throw_if_error(s);
}

// A pipeline step run with the GIL held, under the graph's lock.
std::unique_lock<std::shared_mutex> lock_alone(PyGraph& self) {
  std::unique_lock<std::shared_mutex> lock(self.mu, std::defer_lock);
  lock_released_gil(lock);
  return lock;
}

nb::list candidate_list(const Graph& g) {
  nb::list out;
  for (const auto& c : g.candidates()) {
    nb::dict d;
    d["engine"] = c.info.engine;
    d["name"] = c.info.name;
    d["source"] = c.info.source;
    d["numerical_notes"] = c.info.numerical_notes;
    d["behavior_notes"] = c.info.behavior_notes;
    d["supported"] = c.support.is_ok();
    d["reason"] = c.support.message();
    d["built"] = c.built;
    d["workspace_size"] = c.workspace_size;
    d["engine_id"] = c.info.engine_id;
    d["sm_count_target"] = c.info.sm_count_target;
    nb::dict knobs;
    for (const auto& [k, v] : c.info.knobs) knobs[k.c_str()] = v;
    d["knobs"] = knobs;
    out.append(d);
  }
  return out;
}

// ---- tensors ----
void bind_graph_tensors(nb::class_<PyGraph>& cls) {
  cls.def(
      "tensor",
      [](PyGraph& self, std::string name, std::vector<int64_t> dim,
         std::optional<std::vector<int64_t>> stride, DataType data_type, bool is_virtual,
         bool is_pass_by_value, std::optional<int64_t> uid, std::optional<ir::Tensor> ragged_offset,
         int64_t ragged_offset_multiplier) {
        ir::TensorAttrs a;
        a.set_name(std::move(name))
            .set_stride(stride ? std::move(*stride) : ir::packed_strides(dim))
            .set_dim(std::move(dim))
            .set_data_type(data_type)
            .set_is_virtual(is_virtual)
            .set_is_pass_by_value(is_pass_by_value)
            .set_ragged_offset(ragged_offset ? *ragged_offset : nullptr)
            .set_ragged_offset_multiplier(ragged_offset_multiplier);
        if (uid) a.set_uid(*uid);
        return self.graph.tensor(a);
      },
      nb::kw_only(), nb::arg("name") = "", nb::arg("dim"), nb::arg("stride").none() = nb::none(),
      nb::arg("data_type") = DataType::NotSet, nb::arg("is_virtual") = false,
      nb::arg("is_pass_by_value") = false, nb::arg("uid").none() = nb::none(),
      nb::arg("ragged_offset").none() = nb::none(), nb::arg("ragged_offset_multiplier") = 1,
      "A tensor with dims, strides in elements (default: packed row-major) and data type.\n"
      "ragged_offset: a [b+1,1,1,1] integer tensor of where each batch item starts (the\n"
      "frontend's ragged THD layout, read by sdpa / sdpa_backward), in elements x\n"
      "ragged_offset_multiplier.");

  cls.def(
      "tensor_like",
      [](PyGraph& self, nb::handle obj, std::string name) {
        // The layout of arbitrary array objects is read in Python (dnngraph/_interop.py).
        nb::tuple d =
            nb::cast<nb::tuple>(nb::module_::import_("dnngraph._interop").attr("describe")(obj));
        ir::TensorAttrs a;
        a.set_name(std::move(name))
            .set_dim(nb::cast<std::vector<int64_t>>(d[0]))
            .set_stride(nb::cast<std::vector<int64_t>>(d[1]))
            .set_data_type(nb::cast<DataType>(d[2]));
        return self.graph.tensor(a);
      },
      nb::arg("obj"), nb::arg("name") = "",
      "A tensor with the dims, strides and data type of `obj` (numpy array, torch tensor, or "
      "any DLPack / __array_interface__ / __cuda_array_interface__ object).");
}

// ---- pipeline: validate to check_support ----
void bind_graph_pipeline(nb::class_<PyGraph>& cls) {
  cls.def(
      "validate",
      [](PyGraph& self) {
        auto lock = lock_alone(self);
        self.graph.invalidate();  // tensors may have been edited since the last validate
        // With a handle, also the refusals of its engine that need no backend call (the
        // frontend's validate() refuses those graphs: NotSupportedError).
        throw_if_error(self.graph.validate(self.handle));
      },
      "Infers missing dims/strides/types, assigns uids and checks the graph (ValueError); with "
      "a handle also the engine's rules known without a backend call (NotSupportedError).");
  cls.def(
      "build_operation_graph",
      [](PyGraph& self) {
        const HandlePtr& h = self.ensure_handle();
        auto lock = lock_alone(self);
        self.graph.invalidate();
        throw_if_error(self.graph.build_operation_graph(h));
      },
      "Validates, then lowers the graph onto the engine of the graph's handle.");
  cls.def(
      "create_execution_plans",
      [](PyGraph& self, std::vector<HeurMode> modes) {
        auto lock = lock_alone(self);
        throw_if_error(self.graph.create_execution_plans(modes));
      },
      nb::arg("heur_modes"), "Collects candidate plans from each heuristic mode, in order.");
  cls.def(
      "get_engine_count",
      [](PyGraph& self) {
        auto lock = lock_alone(self);
        return unwrap(self.graph.get_engine_count());
      },
      "How many engines the graph's engine library has (after build_operation_graph).");
  cls.def(
      "get_knobs_for_engine",
      [](PyGraph& self, int64_t engine) {
        auto lock = lock_alone(self);
        nb::list out;
        for (const KnobInfo& k : unwrap(self.graph.get_knobs_for_engine(engine))) {
          nb::dict d;
          d["name"] = k.name;
          d["min_value"] = k.min_value;
          d["max_value"] = k.max_value;
          d["stride"] = k.stride;
          out.append(d);
        }
        return out;
      },
      nb::arg("engine"),
      "The knobs of one engine ({name, min_value, max_value, stride} each); "
      "NotSupportedError when that engine cannot run the graph.");
  cls.def(
      "create_execution_plan",
      [](PyGraph& self, int64_t engine, const std::map<std::string, int64_t>& knobs) {
        auto lock = lock_alone(self);
        throw_if_error(
            self.graph.create_execution_plan(engine, KnobChoices(knobs.begin(), knobs.end())));
      },
      nb::arg("engine"), nb::arg("knobs") = std::map<std::string, int64_t>{},
      "Appends the candidate of one engine with knob values {name: value} (unset knobs keep "
      "their defaults).");
  cls.def(
      "check_support",
      [](PyGraph& self) {
        auto lock = lock_alone(self);
        throw_if_error(self.graph.check_support());
      },
      "Keeps the supported candidates; NotSupportedError (with every reason) when none is.");
  cls.def(
      "build_plans",
      [](PyGraph& self, BuildPlanPolicy policy) {
        run_released(self, [&] { return self.graph.build_plans(policy); });
      },
      nb::arg("policy") = BuildPlanPolicy::HeuristicsChoice,
      "HEURISTICS_CHOICE builds the first supported candidate; ALL builds every one.");
}

// ---- plans: build, select, workspace ----
void bind_graph_plans(nb::class_<PyGraph>& cls) {
  cls.def(
      "build",
      [](PyGraph& self, std::vector<HeurMode> modes, BuildPlanPolicy policy) {
        HandlePtr h = self.ensure_handle();
        run_released(self, [&] {
          self.graph.invalidate();
          return self.graph.build(h, modes, policy);
        });
      },
      nb::arg("heur_modes") = std::vector<HeurMode>{HeurMode::A, HeurMode::Fallback},
      nb::arg("policy") = BuildPlanPolicy::HeuristicsChoice, "All five pipeline steps.");

  cls.def("get_execution_plan_count",
          [](const PyGraph& self) { return self.graph.get_execution_plan_count(); });
  cls.def(
      "build_plan_at_index",
      [](PyGraph& self, int64_t index) {
        run_released(self, [&] { return self.graph.build_plan_at_index(index); });
      },
      nb::arg("index"));
  cls.def(
      "get_workspace_size",
      [](const PyGraph& self) { return unwrap(self.graph.get_workspace_size()); },
      "Workspace bytes of the plan execute() uses.");
  cls.def(
      "get_workspace_size_plan_at_index",
      [](const PyGraph& self, int64_t index) {
        return unwrap(self.graph.get_workspace_size_plan_at_index(index));
      },
      nb::arg("index"));
  cls.def(
      "select_plan",
      [](PyGraph& self, int64_t index) {
        auto lock = lock_alone(self);
        throw_if_error(self.graph.select_plan(index));
      },
      nb::arg("index"), "Makes plan `index` (built) the one execute() uses.");
  cls.def("selected_plan_index",
          [](const PyGraph& self) { return self.graph.selected_plan_index(); });
  cls.def(
      "candidates", [](const PyGraph& self) { return candidate_list(self.graph); },
      "Every candidate seen by check_support, as dicts (engine, name, supported, reason, ...).");
}

// ---- introspection ----
void bind_graph_introspection(nb::class_<PyGraph>& cls) {
  cls.def(
      "key", [](const PyGraph& self) { return ir::fingerprint(self.graph).hex(); },
      "The graph's stable fingerprint (32 hex digits).");
  cls.def(
      "to_json", [](const PyGraph& self) { return ir::to_json(self.graph); },
      "The graph's JSON description.");
  cls.def(
      "op_names",
      [](const PyGraph& self) {
        std::vector<std::string> out;
        out.reserve(self.graph.nodes().size());
        for (const ir::Node& n : self.graph.nodes()) out.push_back(n.name);
        return out;
      },
      "The names of the graph's ops, in the order to_json() lists them (without writing the "
      "JSON).");
  cls.def_prop_ro("name", [](const PyGraph& self) { return self.graph.name(); });
  cls.def_prop_ro("handle", [](const PyGraph& self) -> std::shared_ptr<PyHandle> {
    if (!self.handle) return nullptr;
    return std::make_shared<PyHandle>(PyHandle{self.handle});
  });
  cls.def("__repr__", [](const PyGraph& self) { return self.graph.to_table(); });
}

}  // namespace

void bind_graph(nb::module_& m, nb::class_<PyGraph>& cls) {
  cls.def(
      "__init__",
      [](PyGraph* self, const PyHandle* handle, std::string name, DataType io,
         DataType intermediate, DataType compute, KernelCachePtr kernel_cache, bool dynamic,
         std::optional<int32_t> sm_count) {
        new (self) PyGraph();
        if (handle) self->handle = handle->get();
        self->graph.set_kernel_cache(std::move(kernel_cache));
        self->graph.set_name(std::move(name))
            .set_io_data_type(io)
            .set_intermediate_data_type(intermediate)
            .set_compute_data_type(compute)
            .set_dynamic_shape_enabled(dynamic)
            .set_sm_count(sm_count.value_or(ir::Graph::kAllSms));
      },
      nb::arg("handle").none() = nb::none(), nb::arg("name") = "",
      nb::arg("io_data_type") = DataType::NotSet,
      nb::arg("intermediate_data_type") = DataType::Float,
      nb::arg("compute_data_type") = DataType::Float, nb::arg("kernel_cache").none() = nb::none(),
      nb::arg("is_dynamic_shape_enabled") = false, nb::arg("sm_count").none() = nb::none());

  cls.def_prop_rw(
      "sm_count",
      [](const PyGraph& self) -> std::optional<int32_t> {
        const int32_t n = self.graph.sm_count();
        if (n == ir::Graph::kAllSms) return std::nullopt;
        return n;
      },
      [](PyGraph& self, std::optional<int32_t> n) {
        self.graph.set_sm_count(n.value_or(ir::Graph::kAllSms));
        self.graph.invalidate();
      },
      nb::for_setter(nb::arg("sm_count").none()),
      "The most SMs the graph's GPU plans may use (the cuDNN frontend's sm_count), leaving the\n"
      "others to work on other streams; None (or -1): every SM. Read at the next build: the\n"
      "cuDNN engine asks its heuristics and engines for plans on that many SMs (ValueError at\n"
      "build when the GPU has fewer; 0 and other negative values are a ValueError at\n"
      "validate). Part of key() and of the plan cache key; the CPU reference engine ignores it.");

  cls.def_prop_rw(
      "_frontend_forms", [](const PyGraph& self) { return self.frontend_forms; },
      [](PyGraph& self, bool v) { self.frontend_forms = v; },
      "execute takes the cuDNN frontend's forms: a Python int bound to a tensor in memory (or\n"
      "as the workspace) is a raw address of a buffer laid out as the tensor says (its size\n"
      "cannot be checked), and entries whose key or value is None are skipped. Set by the\n"
      "frontend-compatible pygraph.");

  cls.def_prop_rw(
      "allow_unused_tensors", [](const PyGraph& self) { return self.graph.allow_unused_tensors(); },
      [](PyGraph& self, bool v) {
        self.graph.set_allow_unused_tensors(v);
        self.graph.invalidate();
      },
      "Whether validate() sets aside non-virtual tensors that no op reads or writes (and\n"
      "execute ignores buffers bound to them), as the cuDNN frontend does, instead of\n"
      "refusing the graph. False by default; the frontend-compatible pygraph sets it.");
  bind_graph_tensors(cls);
  bind_graph_pipeline(cls);
  bind_graph_plans(cls);
  bind_graph_introspection(cls);
  (void)m;
}

}  // namespace dnngraph::py
