// Shared declarations of the nanobind bindings (python/src/*.cpp, one file per topic).
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "dnngraph/graph.hpp"

namespace dnngraph::py {

namespace nb = nanobind;

// ---- errors (errors.cpp) ----
// Raised for ErrorCode::NotSupported; registered as dnngraph.NotSupportedError (a RuntimeError).
struct NotSupportedException : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// `text` as valid UTF-8 (invalid bytes as \xNN), for exception messages.
std::string printable(const std::string& text);
// ValueError for InvalidGraph/InvalidArgument, NotSupportedError, RuntimeError otherwise; the
// Python message is the C++ one. Does nothing for Ok.
void throw_if_error(const Status& s);
template <class T>
T unwrap(Result<T> r) {
  if (!r.is_ok()) throw_if_error(r.status());
  return std::move(r).value();
}

// ---- handles (handle.cpp) ----
// Handle::create for Python callers: when no GPU can be used, the error says why (no GPU or
// driver, an old driver, ...) after `prefix`, then `hint`, the Python way to the reference
// engine, once.
HandlePtr create_handle_or_explain(Device d, const std::string& prefix, const char* hint);
// The Python handle object. destroy_handle() drops the reference; graphs built with the handle
// keep their own reference, so they stay usable.
struct PyHandle {
  HandlePtr handle;
  const HandlePtr& get() const;  // ValueError once destroyed
};

// ---- graphs (graph.cpp) ----
struct PyGraph {
  PyGraph();  // registered, so that a foreign tensor's graph can be named
  ~PyGraph();
  PyGraph(const PyGraph&) = delete;
  PyGraph& operator=(const PyGraph&) = delete;

  Graph graph;
  // Held shared by execute (from reading the pack to the end of the run) and alone by the
  // pipeline steps and deserialize, so a build from another thread never overlaps an execute.
  std::shared_mutex mu;
  HandlePtr handle;  // from pygraph(handle=...), deserialize(handle, ...) or the default GPU one
  // The frontend's variant-pack forms in execute (set by the frontend-compatible subclass): a
  // Python int bound to a tensor in memory (or given as the workspace) is a raw address laid
  // out as the tensor says, and entries whose key or value is None are skipped. Its execute
  // also builds a graph not built yet and uses the graph's own workspace when none is given
  // (execute.cpp).
  bool frontend_forms = false;

  // uid -> tensor, for variant packs keyed by int. Rebuilt when a lookup misses; cleared when
  // the graph is replaced (deserialize).
  std::unordered_map<int64_t, ir::Tensor> by_uid;
  const ir::TensorAttrs* find_uid(int64_t uid);

  // The graph's handle; creates the default ("cuda") handle on first use when none was given.
  const HandlePtr& ensure_handle();
  // `override` when given, else the graph's handle.
  Handle& handle_for(const PyHandle* override);
};

// "graph 'name'" of the live pygraph holding this tensor, or a phrase saying none does.
std::string graph_owning(const ir::TensorAttrs* t);

// Locks `l` (a unique or shared lock over PyGraph::mu); waits with the GIL released so that the
// thread holding it can finish.
template <class Lock>
void lock_released_gil(Lock& l) {
  if (l.try_lock()) return;
  nb::gil_scoped_release release;
  l.lock();
}

// A tensor argument that also accepts a Python number (it becomes a pass-by-value constant).
using TensorOrScalar = std::variant<ir::Tensor, double>;
ir::Tensor as_tensor(PyGraph& g, const std::optional<TensorOrScalar>& v);
inline ir::OpOptions op_options(DataType compute, std::string name) {
  return ir::OpOptions{std::move(name), compute};
}
// Op results as a Python tuple (null tensors become None); typed for the stubs.
using TensorTuple = nb::typed<nb::tuple, std::optional<ir::Tensor>, nb::ellipsis>;
template <size_t N>
TensorTuple as_tuple(const std::array<ir::Tensor, N>& ts) {
  nb::list out;
  for (const auto& t : ts) out.append(t ? nb::cast(t) : nb::none());
  return nb::borrow<TensorTuple>(nb::tuple(out));
}

// ---- binding entry points, one per file ----
void bind_errors(nb::module_& m);
void bind_enums(nb::module_& m);
void bind_handle(nb::module_& m);
void bind_device_properties(nb::module_& m);
void bind_tensor(nb::module_& m);
void bind_graph(nb::module_& m, nb::class_<PyGraph>& g);
// One per op of the table, named bind_op_<name> after the op's table name and defined in
// ops_<family>.cpp: the pygraph methods that build that op (bind_op_pointwise binds add, relu,
// ...; bind_op_norm_forward layernorm, batchnorm, ...). module.cpp calls them from the table.
#define DNNGRAPH_OP_BIND_DECL(kind, name, Attrs, in, out) \
  void bind_op_##name(nb::class_<PyGraph>& g);
DNNGRAPH_OPS(DNNGRAPH_OP_BIND_DECL)
#undef DNNGRAPH_OP_BIND_DECL
void bind_execute(nb::module_& m, nb::class_<PyGraph>& g);
void bind_serialize(nb::class_<PyGraph>& g);
void bind_log(nb::module_& m);
void bind_tune(nb::class_<PyGraph>& g);
void bind_partition(nb::module_& m);

// The SdpaOptions and optional inputs SDPA and FP8 SDPA share, from the frontend's keywords
// (ops_sdpa.cpp): the scale (a float attribute or an ATTN_SCALE tensor), the causal / band
// masks, ALiBi, and the padding mask with its sequence lengths. `op` names the method in errors.
void fill_sdpa_options(ir::SdpaOptions& a, ir::SdpaInputs& extra,
                       const std::optional<TensorOrScalar>& attn_scale, bool causal,
                       bool causal_bottom_right, DiagonalAlignment alignment,
                       std::optional<int64_t> left_bound, std::optional<int64_t> right_bound,
                       bool padding_mask, ir::Tensor seq_len_q, ir::Tensor seq_len_kv, bool alibi,
                       const char* op);

// The cuDNN frontend's call form of a pygraph method, declared next to the method's binding
// (frontend_forms.cpp) and read by dnngraph._compat from pygraph._frontend_call_forms:
// fe_name -> (native method, the frontend's positional parameter names, {frontend keyword:
// native keyword}, native keywords the form fixes).
using Renames = std::initializer_list<std::pair<const char*, const char*>>;
void frontend_form(nb::class_<PyGraph>& cls, const char* fe_name, const char* native,
                   std::initializer_list<const char*> positional, Renames renames = {},
                   nb::dict fixed = nb::dict());
// The same form where the frontend's method and the native one share a name.
inline void frontend_form(nb::class_<PyGraph>& cls, const char* name,
                          std::initializer_list<const char*> positional, Renames renames = {}) {
  frontend_form(cls, name, name, positional, renames);
}

// Converts a Python variant pack and workspace as execute() does (execute.cpp) and calls `f`
// with them, the GIL released and the graph locked alone; raises f's error.
void with_pack(PyGraph& self, nb::dict pack, nb::handle workspace, const PyHandle* handle,
               const std::function<Status(Handle&, const VariantPack&, void*, int64_t)>& f);

}  // namespace dnngraph::py
