// execute / execute_plan_at_index: Python variant pack -> dnngraph::VariantPack.
//
// This is the hot path (called once per step), so it avoids creating Python objects: the dict
// is walked with PyDict_Next, numpy-like values go through the buffer protocol, torch tensors
// through data_ptr(); attribute names are interned once; the C++ variant pack and the scratch
// for Python scalars are reused per thread. Sizes, element sizes and devices are checked
// before anything runs, so a too-small array or a host array on a GPU handle raises instead of
// corrupting memory. The GIL is released only around the C++ call, after every pointer has
// been extracted. This file holds the bindings and the frame every call shares; buffer.cpp
// reads one Python object as a Buffer, pack.cpp checks the Buffers and fills the pack.
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <shared_mutex>

#include <nanobind/ndarray.h>

#include "dnngraph/storage.hpp"
#include "execute.hpp"

namespace dnngraph::py {

thread_local Scratch t_scratch;
Names g_names;

namespace {

// Releases the buffer views and the scratch on every exit path.
struct ScratchGuard {
  Scratch& sc;
  bool owns;
  ~ScratchGuard() {
    for (size_t i = 0; i < sc.n_views; ++i) PyBuffer_Release(&sc.views[i]);
    sc.n_views = 0;
    sc.items.reset();
    if (owns) sc.busy = false;
  }
};

// The thread's scratch, or a local one for a nested call (e.g. from a data_ptr() override).
struct ScratchLease {
  Scratch local;
  Scratch& sc;
  ScratchGuard guard;
  ScratchLease() : sc(t_scratch.busy ? local : t_scratch), guard{sc, !t_scratch.busy} {
    sc.busy = true;
  }
};

Status call(PyGraph& self, Handle& h, Scratch& sc, const Converted& c,
            std::optional<int64_t> plan_index) {
  return plan_index ? self.graph.execute_plan_at_index(h, sc.pack, c.ws, *plan_index, c.ws_bytes)
                    : self.graph.execute(h, sc.pack, c.ws, c.ws_bytes);
}

// The frame every binding that runs a pack shares: the graph's lock (shared for executes,
// alone for calls that build), the pack converted under the GIL, then `f(handle, scratch,
// converted)` with the GIL released; an error Status raises.
template <class Lock, class F>
void with_converted(PyGraph& self, nb::handle pack, nb::handle workspace, const PyHandle* handle,
                    F&& f) {
  Handle& h = self.handle_for(handle);
  Lock lock(self.mu, std::defer_lock);
  lock_released_gil(lock);
  ScratchLease lease;
  const Converted c = convert(self, pack, workspace, h.device(), lease.sc);
  Status s;
  {
    nb::gil_scoped_release release;
    s = f(h, lease.sc, c);
  }
  throw_if_error(s);
}

void run(PyGraph& self, nb::handle pack, nb::handle workspace, const PyHandle* handle,
         std::optional<int64_t> plan_index) {
  // No build of this graph from another thread while the pack is read and the plan runs.
  with_converted<std::shared_lock<std::shared_mutex>>(
      self, pack, workspace, handle,
      [&](Handle& h, Scratch& sc, const Converted& c) { return call(self, h, sc, c, plan_index); });
}

// Benchmark support (bench/python): host microseconds per call of the C++ execute on the
// pack given, converted once, looped `calls` times in C++ with the GIL released. Lets one
// process compare the Python binding with the C++ call on the same plan and pointers.
double time_execute(PyGraph& self, nb::handle pack, nb::handle workspace, int64_t calls,
                    const PyHandle* handle) {
  std::chrono::steady_clock::duration took{};
  with_converted<std::shared_lock<std::shared_mutex>>(
      self, pack, workspace, handle, [&](Handle& h, Scratch& sc, const Converted& c) {
        Status s;
        const auto t0 = std::chrono::steady_clock::now();
        for (int64_t i = 0; i < calls && s; ++i) s = call(self, h, sc, c, std::nullopt);
        took = std::chrono::steady_clock::now() - t0;
        return s;
      });
  return std::chrono::duration<double, std::micro>(took).count() / static_cast<double>(calls);
}

// For the stubs: Mapping[Tensor | int, object].
using Pack = nb::typed<nb::mapping, std::variant<ir::Tensor, int64_t>, nb::object>;

}  // namespace

void with_pack(PyGraph& self, nb::dict pack, nb::handle workspace, const PyHandle* handle,
               const std::function<Status(Handle&, const VariantPack&, void*, int64_t)>& f) {
  // Alone: autotune builds and selects plans; the CUDA graph calls are rare.
  with_converted<std::unique_lock<std::shared_mutex>>(
      self, pack, workspace, handle,
      [&](Handle& h, Scratch& sc, const Converted& c) { return f(h, sc.pack, c.ws, c.ws_bytes); });
}

namespace {

// Whether the compatible subclass's pack needs its Python _pack to become {tensor or uid:
// value}: a tensor_uids list, a mapping that is not a dict, names as keys, or scalars bound by
// tensor_scalar() to be added. A dict of tensors/uids (None entries and raw int addresses
// included: convert() takes those for frontend_forms graphs) goes to run() as it is.
bool needs_python_pack(nb::handle self, nb::handle pack, nb::handle tensor_uids) {
  if (!tensor_uids.is_none() || !PyDict_Check(pack.ptr())) return true;
  PyObject** dict = _PyObject_GetDictPtr(self.ptr());
  if (dict && *dict) {
    PyObject* b = PyDict_GetItem(*dict, g_names.bindings);  // borrowed
    const int bound = b ? PyObject_IsTrue(b) : 0;
    if (bound < 0) throw nb::python_error();
    if (bound) return true;
  }
  PyObject *key = nullptr, *value = nullptr;
  Py_ssize_t pos = 0;
  while (PyDict_Next(pack.ptr(), &pos, &key, &value))
    if (PyUnicode_Check(key)) return true;
  return false;
}

bool is_mapping(nb::handle obj) {
  static PyObject* mapping =  // kept for the process's life
      nb::object(nb::module_::import_("collections.abc").attr("Mapping")).release().ptr();
  const int r = PyObject_IsInstance(obj.ptr(), mapping);
  if (r < 0) throw nb::python_error();
  return r == 1;
}

// get_last_error_string() (dnngraph._compat.errors) sees the message of an execute that raised.
void remember(const std::string& what) {
  try {
    nb::module_::import_("dnngraph._compat.errors").attr("_remember")(nb::str(what.c_str()));
  } catch (const nb::python_error&) {  // the caller's error is the one to report
  }
}

// execute() of the compatible subclass (python/dnngraph/_compat/graph.py): every form the
// frontend allows, on the one path into run(). Python is called only where the work is
// Python's: the overrides' error, build() on a graph not built yet, the graph's own workspace
// (_own_workspace: a numpy or torch buffer it keeps) when none is given and the plan needs
// one, and _pack for the packs needs_python_pack names. The workspace size is read here only
// to allocate the graph's own; it is checked once, by Graph::execute.
void execute_frontend(PyGraph& g, nb::handle self, nb::handle pack, nb::handle workspace,
                      nb::handle handle, nb::handle override_uids, nb::handle override_shapes,
                      nb::handle override_strides, nb::handle tensor_uids) {
  if (!override_uids.is_none() || !override_shapes.is_none() || !override_strides.is_none())
    self.attr("_no_overrides")("execute", override_uids, override_shapes, override_strides);
  if (tensor_uids.is_none() && !PyDict_Check(pack.ptr()) && !is_mapping(pack))
    throw nb::type_error(
        ("execute: tensor_dict must be a mapping {tensor, uid or name: array} (got " +
         nb::cast<std::string>(
             nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(pack.ptr()))).attr("__name__")) +
         "; a list needs tensor_uids=)")
            .c_str());
  // (not the plan count: that checks every remaining candidate, which on cuDNN can compile
  // kernels for each)
  if (g.graph.selected_plan_index() < 0) self.attr("build")();
  nb::object ws = nb::borrow(workspace);
  if (workspace.is_none()) {
    const int64_t need = unwrap(g.graph.get_workspace_size());
    if (need > 0) ws = self.attr("_own_workspace")(need);
  }
  nb::object p = needs_python_pack(self, pack, tensor_uids) ? self.attr("_pack")(pack, tensor_uids)
                                                            : nb::borrow(pack);
  const PyHandle* h = handle.is_none() ? nullptr : nb::cast<const PyHandle*>(handle);
  run(g, p, ws, h, std::nullopt);
}

}  // namespace

void bind_execute(nb::module_& m, nb::class_<PyGraph>& cls) {
  auto intern = [](const char* s) { return PyUnicode_InternFromString(s); };
  g_names = Names{intern("data_ptr"),
                  intern("is_cuda"),
                  intern("itemsize"),
                  intern("nbytes"),
                  intern("__cuda_array_interface__"),
                  intern("__array_interface__"),
                  intern("__dlpack__"),
                  intern("data"),
                  intern("shape"),
                  intern("strides"),
                  intern("typestr"),
                  reinterpret_cast<PyTypeObject*>(m.attr("Tensor").ptr()),
                  intern("_bindings"),
                  intern("untyped_storage"),
                  intern("storage_offset"),
                  intern("dtype")};

  // Layout of a DLPack object for dnngraph._interop.describe (tensor_like).
  m.def("_dlpack_layout", [](nb::handle obj) {
    nb::ndarray<> arr = nb::cast<nb::ndarray<>>(obj);
    std::vector<int64_t> shape, strides;
    for (size_t i = 0; i < arr.ndim(); ++i) {
      shape.push_back(static_cast<int64_t>(arr.shape(i)));
      strides.push_back(arr.stride(i));
    }
    return std::make_tuple(shape, strides, static_cast<int>(arr.dtype().code),
                           static_cast<int>(arr.dtype().bits));
  });

  // The frontend-compatible subclass (python/dnngraph/_compat/graph.py) keeps this method as its
  // `execute`, so no call costs a Python frame of its own: its graphs (frontend_forms) take
  // execute_frontend's path, every other graph runs the pack as given.
  cls.def(
      "execute",
      [](nb::pointer_and_handle<PyGraph> self, nb::handle pack, nb::handle workspace,
         nb::handle handle, nb::handle override_uids, nb::handle override_shapes,
         nb::handle override_strides, nb::handle tensor_uids) {
        PyGraph& g = *self.p;
        if (g.frontend_forms) {
          try {
            execute_frontend(g, self.h, pack, workspace, handle, override_uids, override_shapes,
                             override_strides, tensor_uids);
          } catch (const nb::python_error& e) {
            remember(nb::cast<std::string>(nb::str(e.value())));
            throw;
          } catch (const std::exception& e) {
            remember(e.what());
            throw;
          }
          return;
        }
        if (!PyMapping_Check(pack.ptr()))
          throw nb::type_error("execute: tensor_dict must be a mapping {tensor or uid: array}");
        const PyHandle* h = handle.is_none() ? nullptr : nb::cast<const PyHandle*>(handle);
        run(g, pack, workspace, h, std::nullopt);
      },
      nb::arg("tensor_dict"), nb::arg("workspace").none() = nb::none(),
      nb::arg("handle").none() = nb::none(), nb::arg("override_uids").none() = nb::none(),
      nb::arg("override_shapes").none() = nb::none(),
      nb::arg("override_strides").none() = nb::none(), nb::arg("tensor_uids").none() = nb::none(),
      nb::sig(
          "def execute(self, tensor_dict: typing.Mapping[Tensor | int, object], workspace: object "
          "| None = None, handle: Handle | None = None, override_uids: object | None = None, "
          "override_shapes: object | None = None, override_strides: object | None = None, "
          "tensor_uids: object | None = None) -> None"),
      "Runs the selected plan. pack: {tensor or uid: array}; arrays are numpy arrays, torch\n"
      "tensors or any buffer / data_ptr() / __cuda_array_interface__ / __array_interface__ /\n"
      "DLPack object on the handle's device; pass-by-value tensors take host scalars (Python\n"
      "numbers too). Each array must have the tensor's data type, shape and strides (any layout\n"
      "that matches the tensor's strides exactly). workspace: a buffer of get_workspace_size()\n"
      "bytes, or None when 0.");
  cls.def(
      "_time_execute",
      [](PyGraph& self, Pack pack, nb::handle workspace, int64_t calls, const PyHandle* handle) {
        if (calls < 1) throw nb::value_error("_time_execute: calls must be >= 1");
        return time_execute(self, pack, workspace, calls, handle);
      },
      nb::arg("pack"), nb::arg("workspace").none(), nb::arg("calls"),
      nb::arg("handle").none() = nb::none(),
      "Benchmark support: host microseconds per call of the C++ execute on this pack,\n"
      "converted once and looped `calls` times in C++ (see bench/python).");
  cls.def(
      "execute_plan_at_index",
      [](PyGraph& self, Pack pack, nb::handle workspace, int64_t index, const PyHandle* handle) {
        run(self, pack, workspace, handle, index);
      },
      nb::arg("pack"), nb::arg("workspace").none(), nb::arg("index"),
      nb::arg("handle").none() = nb::none(), "execute() with the plan at `index` (built).");
}

}  // namespace dnngraph::py
