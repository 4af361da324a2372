// execute / execute_plan_at_index: Python variant pack -> dnngraph::VariantPack.
//
// This is the hot path (called once per step), so it avoids creating Python objects: the dict
// is walked with PyDict_Next, numpy-like values go through the buffer protocol, torch tensors
// through data_ptr(); attribute names are interned once; the C++ variant pack and the scratch
// for Python scalars are reused per thread. Sizes, element sizes and devices are checked
// before anything runs, so a too-small array or a host array on a GPU handle raises instead of
// corrupting memory. The GIL is released only around the C++ call, after every pointer has
// been extracted.
#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <initializer_list>

#include <nanobind/ndarray.h>

#include "common.hpp"
#include "dnngraph/storage.hpp"

namespace dnngraph::py {

namespace {

enum class Where { Host, Cuda, Unknown };

struct Buffer {
  void* ptr = nullptr;
  int64_t bytes = -1;     // memory reachable from ptr; -1 when the object does not say
  int64_t itemsize = -1;  // -1 when unknown
  Where where = Where::Unknown;
};

// Reused between calls (per thread; a nested call, e.g. from a data_ptr() override, gets its
// own).
struct Scratch {
  VariantPack pack;
  std::vector<std::pair<int64_t, void*>> entries;  // this call's (uid, pointer) in dict order
  std::vector<uint64_t> scalars;  // storage for Python numbers given to pass-by-value tensors
  std::vector<Py_buffer> views;   // buffers to release after the call
  size_t n_views = 0;
  bool busy = false;
};
thread_local Scratch t_scratch;

struct Names {
  PyObject* data_ptr;
  PyObject* is_cuda;
  PyObject* itemsize;
  PyObject* nbytes;
  PyObject* cai;
  PyObject* ai;
  PyObject* dlpack;
  PyObject* data;
  PyObject* shape;
  PyObject* strides;
  PyObject* typestr;
  PyTypeObject* tensor_type;
};
Names g_names;

[[noreturn]] void fail(const std::string& what) { throw nb::value_error(what.c_str()); }

std::string describe_key(const ir::TensorAttrs* t, int64_t uid) {
  if (t) return "tensor '" + t->name + "' (uid " + std::to_string(t->uid) + ")";
  return "uid " + std::to_string(uid);
}

// Names a pack entry in error messages; the text is only built when an error is raised.
struct Who {
  const ir::TensorAttrs* t = nullptr;  // null: the workspace
  int64_t uid = 0;
  std::string str() const { return "execute: " + (t ? describe_key(t, uid) : "workspace"); }
};

// Bytes reachable from the first element given shape and strides in bytes.
int64_t span_bytes(Py_ssize_t ndim, const Py_ssize_t* shape, const Py_ssize_t* strides,
                   int64_t itemsize, bool* negative) {
  int64_t span = itemsize;
  for (Py_ssize_t i = 0; i < ndim; ++i) {
    if (shape[i] == 0) return 0;
    if (strides[i] < 0) *negative = true;
    span += (shape[i] - 1) * strides[i];
  }
  return span;
}

// "<f4" -> 4
int64_t typestr_itemsize(nb::handle typestr) {
  std::string s = nb::cast<std::string>(typestr);
  return s.size() > 2 ? std::atoll(s.c_str() + 2) : -1;
}

// {__cuda_array_interface__, __array_interface__} dict -> Buffer.
Buffer from_interface(PyObject* dict, Where where, const Who& w) {
  const std::string who = w.str();
  nb::handle d(dict);
  if (!PyDict_Check(dict)) fail(who + ": the array interface is not a dict");
  Buffer b;
  b.where = where;
  PyObject* data = PyDict_GetItem(dict, g_names.data);
  if (!data || !PyTuple_Check(data) || PyTuple_GET_SIZE(data) < 1)
    fail(who + ": the array interface has no (pointer, read_only) 'data' entry");
  b.ptr = PyLong_AsVoidPtr(PyTuple_GET_ITEM(data, 0));
  if (PyErr_Occurred()) throw nb::python_error();
  b.itemsize = typestr_itemsize(d[nb::handle(g_names.typestr)]);
  auto shape = nb::cast<std::vector<Py_ssize_t>>(d[nb::handle(g_names.shape)]);
  PyObject* strides = PyDict_GetItem(dict, g_names.strides);
  std::vector<Py_ssize_t> st;
  if (strides && strides != Py_None) {
    st = nb::cast<std::vector<Py_ssize_t>>(nb::handle(strides));
  } else {  // C-contiguous
    st.resize(shape.size());
    Py_ssize_t s = b.itemsize;
    for (size_t i = shape.size(); i-- > 0;) st[i] = s, s *= shape[i];
  }
  if (st.size() != shape.size()) fail(who + ": shape and strides differ in length");
  bool negative = false;
  b.bytes = span_bytes(static_cast<Py_ssize_t>(shape.size()), shape.data(), st.data(), b.itemsize,
                       &negative);
  if (negative) fail(who + ": arrays with negative strides are not supported");
  return b;
}

// A new reference (or null, error set) -> its int value, or -1 when null or not an int. Clears
// the error and releases the reference.
int64_t take_int(PyObject* v) {
  if (!v) {
    PyErr_Clear();
    return -1;
  }
  int64_t r = PyLong_Check(v) ? PyLong_AsLongLong(v) : -1;
  Py_DECREF(v);
  if (PyErr_Occurred()) PyErr_Clear(), r = -1;
  return r;
}

// obj.<name> as an int, or -1 when it has no such attribute.
int64_t int_attr(PyObject* obj, PyObject* name) { return take_int(PyObject_GetAttr(obj, name)); }

// Per-type cache of what get_buffer reads on data_ptr() objects (torch tensors), looked up
// once per class: the data_ptr method, and is_cuda / itemsize / nbytes where the class defines
// them as properties or getset/member descriptors. Those take precedence over instance
// attributes, so calling them directly is what a normal attribute read does, minus the lookup
// (MRO walk plus instance-dict probe) per read, as CPython's own attribute specialization
// does; on the GPU this is a measurable part of execute's host cost. An instance attribute
// shadowing the class's data_ptr method is not consulted.
//
// The pointers are borrowed: an entry is used only while its class has the version tag it had
// when cached. CPython changes the tag when the class or a base is modified and never reuses a
// tag, so a matching (class, tag) means the class is unmodified and its dict (which owns the
// descriptors) intact; the class is alive because the object being read is an instance. The
// cache is only used with the GIL held. The module does not declare free-threading support
// (python/CMakeLists.txt), so a free-threaded interpreter turns the GIL back on when it imports
// it; one run with the GIL forced off (PYTHON_GIL=0) has no GIL to guard the borrowed pointers
// or the shared table, so free-threaded builds do not use the cache at all (type_slots).
struct TypeSlots {
  PyTypeObject* type = nullptr;
  unsigned int version = 0;
  PyObject* data_ptr = nullptr;  // called with the object as its only argument
  PyObject* is_cuda = nullptr;   // descriptors, or null: read from the instance
  PyObject* itemsize = nullptr;
  PyObject* nbytes = nullptr;
};
constexpr size_t kTypeSlots = 8;
std::array<TypeSlots, kTypeSlots> g_type_slots;
size_t g_type_slots_next = 0;

// The class attribute `name` (borrowed) if it is one of `kinds`, else null.
PyObject* class_attr(PyTypeObject* type, PyObject* name,
                     std::initializer_list<PyTypeObject*> kinds) {
  PyObject* d = PyObject_GetAttr(reinterpret_cast<PyObject*>(type), name);
  if (!d) {
    PyErr_Clear();
    return nullptr;
  }
  Py_DECREF(d);  // still owned by the dict of `type` or of a base (these kinds return themselves)
  for (PyTypeObject* k : kinds)
    if (Py_IS_TYPE(d, k)) return d;
  return nullptr;
}

// The cached slots of `type`, or null (no error set) when it has no plain data_ptr method or
// no valid version tag.
const TypeSlots* type_slots(PyTypeObject* type) {
#ifdef Py_GIL_DISABLED
  (void)type;
  return nullptr;  // no GIL: every read is a normal attribute read (see TypeSlots)
#else
  if (!PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG)) return nullptr;
  for (const auto& e : g_type_slots)
    if (e.type == type && e.version == type->tp_version_tag) return &e;
  PyObject* dp = class_attr(type, g_names.data_ptr, {&PyMethodDescr_Type, &PyFunction_Type});
  if (!dp) return nullptr;
  const std::initializer_list<PyTypeObject*> descriptors = {&PyProperty_Type, &PyGetSetDescr_Type,
                                                            &PyMemberDescr_Type};
  TypeSlots e{type,
              type->tp_version_tag,
              dp,
              class_attr(type, g_names.is_cuda, descriptors),
              class_attr(type, g_names.itemsize, descriptors),
              class_attr(type, g_names.nbytes, descriptors)};
  // The lookups may have re-tagged the class: cache only what is still valid.
  if (!PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG) || e.version != type->tp_version_tag)
    return nullptr;
  TypeSlots& slot = g_type_slots[g_type_slots_next++ % kTypeSlots];
  slot = e;
  return &slot;
#endif
}

// obj.<attr> through the class's data descriptor `descr`; new reference or null with an error.
PyObject* read_slot(PyObject* descr, PyObject* obj) {
  return Py_TYPE(descr)->tp_descr_get(descr, obj, reinterpret_cast<PyObject*>(Py_TYPE(obj)));
}

// An int attribute: through the cached descriptor when there is one, else a normal read; -1
// when absent or not an int.
int64_t int_slot(PyObject* descr, PyObject* obj, PyObject* name) {
  return descr ? take_int(read_slot(descr, obj)) : int_attr(obj, name);
}

// Any supported object -> Buffer. `writable`: the engine writes it (graph outputs).
// `want_bytes`: also ask data_ptr() objects for their byte size (torch's nbytes), which is the
// reachable memory only for contiguous tensors: used for the workspace.
// `want_where`: data_ptr() objects are also asked is_cuda. Not needed on a CUDA handle for
// device buffers: the cuDNN plan checks every new pointer's device itself (plan.cpp), and one
// attribute read less per tensor is measurable on the GPU's host path.
Buffer get_buffer(PyObject* obj, bool writable, Scratch& sc, const Who& who,
                  bool want_bytes = false, bool want_where = true) {
  Buffer b;
  // 1. Buffer protocol: numpy arrays, memoryview, bytearray, array.array.
  if (PyObject_CheckBuffer(obj)) {
    Py_buffer& view = sc.views[sc.n_views];
    if (PyObject_GetBuffer(obj, &view, PyBUF_STRIDES | (writable ? PyBUF_WRITABLE : 0)) != 0) {
      nb::python_error e;  // e.g. "buffer source array is read-only"
      fail(who.str() + ": cannot use the array: " + e.what());
    }
    ++sc.n_views;
    b.ptr = view.buf;
    b.itemsize = view.itemsize;
    b.where = Where::Host;
    bool negative = false;
    b.bytes = view.strides
                  ? span_bytes(view.ndim, view.shape, view.strides, view.itemsize, &negative)
                  : view.len;
    if (negative) fail(who.str() + ": arrays with negative strides are not supported");
    return b;
  }
  // 2. data_ptr(): torch tensors (their __cuda_array_interface__ is slow Python code).
  const TypeSlots* ts = type_slots(Py_TYPE(obj));
  PyObject* p = ts ? PyObject_Vectorcall(ts->data_ptr, &obj, 1, nullptr)
                   : PyObject_CallMethodNoArgs(obj, g_names.data_ptr);
  if (p) {
    b.ptr = PyLong_AsVoidPtr(p);
    Py_DECREF(p);
    if (PyErr_Occurred()) throw nb::python_error();
    if (want_where) {
      PyObject* c =
          ts && ts->is_cuda ? read_slot(ts->is_cuda, obj) : PyObject_GetAttr(obj, g_names.is_cuda);
      if (c) {
        b.where = PyObject_IsTrue(c) ? Where::Cuda : Where::Host;
        Py_DECREF(c);
      } else {
        PyErr_Clear();
      }
    }
    b.itemsize = int_slot(ts ? ts->itemsize : nullptr, obj, g_names.itemsize);  // torch >= 2.1
    if (want_bytes) b.bytes = int_slot(ts ? ts->nbytes : nullptr, obj, g_names.nbytes);
    return b;
  }
  if (ts || !PyErr_ExceptionMatches(PyExc_AttributeError)) throw nb::python_error();  // raised
  PyErr_Clear();
  // 3./4. The CUDA and host array interfaces (cupy, numba, ...).
  if (PyObject* d = PyObject_GetAttr(obj, g_names.cai)) {
    nb::object keep = nb::steal(d);
    return from_interface(d, Where::Cuda, who);
  }
  PyErr_Clear();
  if (PyObject* d = PyObject_GetAttr(obj, g_names.ai)) {
    nb::object keep = nb::steal(d);
    return from_interface(d, Where::Host, who);
  }
  PyErr_Clear();
  // 5. DLPack (jax, ...). The ndarray holds the exporter's capsule only for this call; the
  // memory stays valid because the caller's dict keeps `obj` alive.
  if (PyObject_HasAttr(obj, g_names.dlpack)) {
    nb::ndarray<> arr;
    if (nb::try_cast(nb::handle(obj), arr)) {
      b.ptr = arr.data();
      b.itemsize = static_cast<int64_t>(arr.itemsize());
      const int dev = arr.device_type();
      b.where = dev == nb::device::cpu::value || dev == nb::device::cuda_host::value
                    ? Where::Host
                    : (dev == nb::device::cuda::value || dev == nb::device::cuda_managed::value
                           ? Where::Cuda
                           : Where::Unknown);
      int64_t span = b.itemsize;
      for (size_t i = 0; i < arr.ndim(); ++i) {
        if (arr.shape(i) == 0) span = 0;
        if (arr.stride(i) < 0) fail(who.str() + ": negative strides are not supported");
        if (span) span += (static_cast<int64_t>(arr.shape(i)) - 1) * arr.stride(i) * b.itemsize;
      }
      b.bytes = span;
      return b;
    }
  }
  fail(who.str() + ": got a " + Py_TYPE(obj)->tp_name +
       "; expected a numpy array, a torch tensor, or an object with the buffer protocol, "
       "data_ptr(), __cuda_array_interface__, __array_interface__ or __dlpack__");
}

// Encodes a Python number as one scalar of `t` in `slot`.
void encode_scalar(PyObject* num, const ir::TensorAttrs& t, uint64_t* slot) {
  *slot = 0;
  auto put = [&](auto v) { std::memcpy(slot, &v, sizeof(v)); };
  const bool is_float = PyFloat_Check(num);
  if (is_integral(t.data_type) && is_float)
    fail("tensor '" + t.name + "' is " + std::string(data_type_name(t.data_type)) +
         ": give an int, not a float");
  const double d = PyFloat_AsDouble(num);  // ints convert too
  if (PyErr_Occurred()) throw nb::python_error();
  switch (t.data_type) {
    case DataType::Float:
      put(static_cast<float>(d));
      return;
    case DataType::Double:
      put(d);
      return;
    case DataType::Half:
    case DataType::BFloat16:
      store_element(slot, t.data_type, 0, static_cast<float>(d));  // via float, as before
      return;
    case DataType::Boolean:
      put(static_cast<uint8_t>(d != 0.0));
      return;
    default:
      break;
  }
  const long long i = PyLong_AsLongLong(num);
  if (PyErr_Occurred()) throw nb::python_error();
  switch (t.data_type) {
    case DataType::Int8:
      put(static_cast<int8_t>(i));
      return;
    case DataType::UInt8:
      put(static_cast<uint8_t>(i));
      return;
    case DataType::Int32:
      put(static_cast<int32_t>(i));
      return;
    case DataType::Int64:
      put(static_cast<int64_t>(i));
      return;
    default:
      fail("tensor '" + t.name + "' is " + std::string(data_type_name(t.data_type)) +
           ": give it as a one-element array, not a Python number");
  }
}

// Checks one value against its tensor: device, element size, memory size.
void check_buffer(const Buffer& b, const ir::TensorAttrs& t, const Device& dev) {
  const int64_t esize = data_type_size(t.data_type);
  auto who = [&] { return "tensor '" + t.name + "' (uid " + std::to_string(t.uid) + ")"; };
  if (t.is_pass_by_value) {
    if (b.where == Where::Cuda)
      fail(who() +
           " is pass-by-value: give a host scalar (a Python number, a numpy array or a "
           "CPU tensor), not device memory");
  } else if (dev.kind == Device::Kind::CPU && b.where == Where::Cuda) {
    fail(who() + ": the array lives on a CUDA device but the handle runs on the cpu");
  } else if (dev.kind == Device::Kind::CUDA && b.where == Where::Host) {
    fail(who() + ": the array is host memory but the handle runs on " + dev.to_string());
  }
  if (b.itemsize > 0 && esize > 0 && b.itemsize != esize)
    fail(who() + " is " + std::string(data_type_name(t.data_type)) + " (" + std::to_string(esize) +
         "-byte elements) but the array has " + std::to_string(b.itemsize) + "-byte elements");
  if (b.bytes >= 0 && esize > 0) {
    // Checked: a tensor edited after build may have dims whose byte extent leaves int64.
    const int64_t need = t.is_pass_by_value ? esize : t.storage_bytes().value_or(INT64_MAX);
    if (b.bytes < need)
      fail(who() + " needs " + std::to_string(need) + " bytes (" + t.describe() +
           ") but the array holds " + std::to_string(b.bytes));
  }
}

// Releases the buffer views and the scratch on every exit path.
struct ScratchGuard {
  Scratch& sc;
  bool owns;
  ~ScratchGuard() {
    for (size_t i = 0; i < sc.n_views; ++i) PyBuffer_Release(&sc.views[i]);
    sc.n_views = 0;
    if (owns) sc.busy = false;
  }
};

// The variant pack and workspace of one call, converted from Python.
struct Converted {
  void* ws = nullptr;
  int64_t ws_bytes = 0;
};

// Fills sc.pack from the Python dict (and checks every value). The pack's nodes are reused
// when the call has the same uids as the previous one, so a steady loop allocates nothing.
Converted convert(PyGraph& self, nb::dict pack, nb::handle workspace, const Device& dev,
                  Scratch& sc) {
  const size_t n = static_cast<size_t>(PyDict_GET_SIZE(pack.ptr()));
  // Sized up front so pointers into them stay valid while the pack is filled.
  if (sc.scalars.size() < n) sc.scalars.resize(n);
  if (sc.views.size() < n + 1) sc.views.resize(n + 1);
  sc.entries.clear();
  size_t n_scalars = 0;

  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(pack.ptr(), &pos, &key, &value)) {
    const ir::TensorAttrs* t = nullptr;
    int64_t uid;
    if (Py_TYPE(key) == g_names.tensor_type) {
      t = nb::inst_ptr<ir::TensorAttrs>(key);
      if (!t->uid_assigned)
        fail("tensor '" + t->name + "' has no uid yet: build the graph before execute");
      uid = t->uid;
    } else if (PyLong_Check(key)) {
      uid = PyLong_AsLongLong(key);
      if (PyErr_Occurred()) throw nb::python_error();
      t = self.find_uid(uid);
      if (!t)
        fail("execute: uid " + std::to_string(uid) +
             " is not a non-virtual tensor of this graph (was it built?)");
    } else {
      throw nb::type_error(("execute: variant pack keys must be graph tensors or int uids, got " +
                            std::string(Py_TYPE(key)->tp_name))
                               .c_str());
    }
    if (value == Py_None) fail("execute: " + describe_key(t, uid) + " is None");
    void* ptr;
    if (PyFloat_Check(value) || PyLong_Check(value)) {
      if (!t->is_pass_by_value)
        fail("execute: " + describe_key(t, uid) +
             " is not pass-by-value: give an array, not a Python number");
      uint64_t* slot = &sc.scalars[n_scalars++];
      encode_scalar(value, *t, slot);
      ptr = slot;
    } else {
      const bool want_where = dev.kind != Device::Kind::CUDA || t->is_pass_by_value;
      Buffer b = get_buffer(value, t->is_output, sc, Who{t, uid}, false, want_where);
      check_buffer(b, *t, dev);
      ptr = b.ptr;
    }
    sc.entries.emplace_back(uid, ptr);
  }
  // Same uids as last time: overwrite in place; otherwise rebuild the map.
  bool same = sc.pack.size() == sc.entries.size();
  for (size_t i = 0; same && i < sc.entries.size(); ++i) {
    auto it = sc.pack.find(sc.entries[i].first);
    if (it == sc.pack.end())
      same = false;
    else
      it->second = sc.entries[i].second;
  }
  if (!same) {
    sc.pack.clear();
    for (const auto& [uid, ptr] : sc.entries) sc.pack[uid] = ptr;
  }

  Converted c;
  if (!workspace.is_none()) {
    Buffer b = get_buffer(workspace.ptr(), true, sc, Who{}, /*want_bytes=*/true,
                          /*want_where=*/dev.kind != Device::Kind::CUDA);
    if ((dev.kind == Device::Kind::CPU && b.where == Where::Cuda) ||
        (dev.kind == Device::Kind::CUDA && b.where == Where::Host))
      fail("execute: the workspace is " + std::string(b.where == Where::Cuda ? "CUDA" : "host") +
           " memory but the handle runs on " + dev.to_string());
    c.ws = b.ptr;
    c.ws_bytes = b.bytes;  // -1 (unknown, not checked) for data_ptr() objects without nbytes
  }
  return c;
}

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

void run(PyGraph& self, nb::dict pack, nb::handle workspace, const PyHandle* handle,
         std::optional<int64_t> plan_index) {
  Handle& h = self.handle_for(handle);
  ScratchLease lease;
  const Converted c = convert(self, pack, workspace, h.device(), lease.sc);
  Status s;
  {
    nb::gil_scoped_release release;
    s = call(self, h, lease.sc, c, plan_index);
  }
  throw_if_error(s);
}

// Benchmark support (bench/python): host microseconds per call of the C++ execute on the
// pack given, converted once, looped `calls` times in C++ with the GIL released. Lets one
// process compare the Python binding with the C++ call on the same plan and pointers.
double time_execute(PyGraph& self, nb::dict pack, nb::handle workspace, int64_t calls,
                    const PyHandle* handle) {
  Handle& h = self.handle_for(handle);
  ScratchLease lease;
  const Converted c = convert(self, pack, workspace, h.device(), lease.sc);
  Status s;
  std::chrono::steady_clock::duration took{};
  {
    nb::gil_scoped_release release;
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < calls && s; ++i) s = call(self, h, lease.sc, c, std::nullopt);
    took = std::chrono::steady_clock::now() - t0;
  }
  throw_if_error(s);
  return std::chrono::duration<double, std::micro>(took).count() / static_cast<double>(calls);
}

// For the stubs: dict[Tensor | int, object].
using Pack = nb::typed<nb::dict, std::variant<ir::Tensor, int64_t>, nb::object>;

}  // namespace

void with_pack(PyGraph& self, nb::dict pack, nb::handle workspace, const PyHandle* handle,
               const std::function<Status(Handle&, const VariantPack&, void*, int64_t)>& f) {
  Handle& h = self.handle_for(handle);
  ScratchLease lease;
  const Converted c = convert(self, pack, workspace, h.device(), lease.sc);
  Status s;
  {
    nb::gil_scoped_release release;
    s = f(h, lease.sc.pack, c.ws, c.ws_bytes);
  }
  throw_if_error(s);
}

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
                  reinterpret_cast<PyTypeObject*>(m.attr("Tensor").ptr())};

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

  cls.def(
      "execute",
      [](PyGraph& self, Pack pack, nb::handle workspace, const PyHandle* handle) {
        run(self, pack, workspace, handle, std::nullopt);
      },
      nb::arg("pack"), nb::arg("workspace").none(), nb::arg("handle").none() = nb::none(),
      "Runs the selected plan. pack: {tensor or uid: array}; arrays are numpy arrays, torch\n"
      "tensors or any buffer / data_ptr() / __cuda_array_interface__ / __array_interface__ /\n"
      "DLPack object on the handle's device; pass-by-value tensors take host scalars (Python\n"
      "numbers too). workspace: a buffer of get_workspace_size() bytes, or None when 0.");
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
