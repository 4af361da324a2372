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
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <shared_mutex>

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
  // The array's layout, when the object describes it (buffer protocol, array interfaces,
  // DLPack; not data_ptr() objects): extents and strides in bytes.
  bool has_layout = false;
  std::vector<int64_t> shape, strides;
  // Element kind: 'f' float, 'i' signed int, 'u' unsigned int, 'b' bool, 'B' bfloat,
  // 'V' opaque (ml_dtypes' bfloat16 and float8 arrays, typestr '<V2'), 'c' complex or other,
  // '?' not said (data_ptr() objects).
  char kind = '?';
};

// Reused between calls (per thread; a nested call, e.g. from a data_ptr() override, gets its
// own).
struct Scratch {
  VariantPack pack;
  std::vector<std::pair<int64_t, void*>> entries;  // this call's (uid, pointer) in dict order
  std::vector<uint64_t> scalars;  // storage for Python numbers given to pass-by-value tensors
  std::vector<Py_buffer> views;   // buffers to release after the call
  size_t n_views = 0;
  nb::object items;  // this call's (key, value) list: keeps them alive until the call returns
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
  PyObject* bindings;
  PyObject* untyped_storage;
  PyObject* storage_offset;
  PyObject* dtype;
};
Names g_names;

[[noreturn]] void fail(const std::string& what) { throw nb::value_error(printable(what).c_str()); }

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
  }
  for (Py_ssize_t i = 0; i < ndim; ++i) {
    int64_t step = 0;
    if (strides[i] < 0 ||
        __builtin_mul_overflow(static_cast<int64_t>(shape[i] - 1), static_cast<int64_t>(strides[i]),
                               &step) ||
        __builtin_add_overflow(span, step, &span))
      return -2;  // overflows: never a real array; reported as too large
  }
  return span;
}

// "<f4" -> 4 and kind 'f'.
int64_t typestr_itemsize(nb::handle typestr, char* kind, const std::string& who) {
  if (!PyUnicode_Check(typestr.ptr())) fail(who + ": the array interface's typestr is not a str");
  std::string s = nb::cast<std::string>(typestr);
  if (s.size() < 3) fail(who + ": the array interface's typestr '" + s + "' is malformed");
  const char k = s[1];
  *kind = (k == 'f' || k == 'i' || k == 'u' || k == 'b' || k == 'V') ? k : 'c';
  char* end = nullptr;
  const long long n = std::strtoll(s.c_str() + 2, &end, 10);
  if (!end || *end || n <= 0 || n > 16)
    fail(who + ": the array interface's typestr '" + s + "' is malformed");
  return n;
}

// A buffer-protocol format ("<f", "e", "q", "?") -> kind.
char format_kind(const char* f) {
  if (!f) return 'u';  // no format: unsigned bytes
  while (*f == '<' || *f == '>' || *f == '=' || *f == '@' || *f == '!') ++f;
  if (!f[0] || f[1]) return 'c';
  switch (f[0]) {
    case 'e':
    case 'f':
    case 'd':
      return 'f';
    case 'b':
    case 'h':
    case 'i':
    case 'l':
    case 'q':
    case 'n':
      return 'i';
    case 'B':
    case 'H':
    case 'I':
    case 'L':
    case 'Q':
    case 'N':
    case 'c':
      return 'u';
    case '?':
      return 'b';
    default:
      return 'c';
  }
}

// {__cuda_array_interface__, __array_interface__} dict -> Buffer.
Buffer from_interface(PyObject* dict, Where where, const Who& w, bool writable) {
  const std::string who = w.str();
  nb::handle d(dict);
  if (!PyDict_Check(dict)) fail(who + ": the array interface is not a dict");
  Buffer b;
  b.where = where;
  PyObject* data = PyDict_GetItem(dict, g_names.data);
  if (!data || !PyTuple_Check(data) || PyTuple_GET_SIZE(data) < 1)
    fail(who + ": the array interface has no (pointer, read_only) 'data' entry");
  if (!PyLong_Check(PyTuple_GET_ITEM(data, 0)))
    fail(who + ": the array interface's data pointer is not an int");
  b.ptr = PyLong_AsVoidPtr(PyTuple_GET_ITEM(data, 0));
  if (PyErr_Occurred()) throw nb::python_error();
  if (writable && PyTuple_GET_SIZE(data) > 1 && PyObject_IsTrue(PyTuple_GET_ITEM(data, 1)) == 1)
    fail(who + ": the array is read-only but the graph writes it (an output)");
  PyObject* typestr = PyDict_GetItem(dict, g_names.typestr);
  PyObject* shape_obj = PyDict_GetItem(dict, g_names.shape);
  if (!typestr || !shape_obj) fail(who + ": the array interface has no 'typestr' or 'shape'");
  b.itemsize = typestr_itemsize(typestr, &b.kind, who);
  std::vector<Py_ssize_t> shape;
  if (!nb::try_cast(nb::handle(shape_obj), shape))
    fail(who + ": the array interface's shape is not a tuple of ints");
  for (Py_ssize_t e : shape)
    if (e < 0) fail(who + ": the array interface's shape has a negative extent");
  PyObject* strides = PyDict_GetItem(dict, g_names.strides);
  std::vector<Py_ssize_t> st;
  if (strides && strides != Py_None) {
    if (!nb::try_cast(nb::handle(strides), st))
      fail(who + ": the array interface's strides are not a tuple of ints");
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
  b.has_layout = true;
  b.shape.assign(shape.begin(), shape.end());
  b.strides.assign(st.begin(), st.end());
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

// The memory reachable from a torch tensor's data_ptr(): its storage's bytes past the tensor's
// storage offset. -1 when the object has no torch storage (the extent is then not checked).
int64_t torch_extent(PyObject* obj, int64_t itemsize) {
  const int64_t offset = take_int(PyObject_CallMethodNoArgs(obj, g_names.storage_offset));
  PyObject* storage = PyObject_CallMethodNoArgs(obj, g_names.untyped_storage);
  if (!storage) {
    PyErr_Clear();
    return -1;
  }
  const int64_t total = take_int(PyObject_CallMethodNoArgs(storage, g_names.nbytes));
  Py_DECREF(storage);
  if (offset < 0 || total < 0 || itemsize <= 0) return -1;
  int64_t skipped = 0;
  if (__builtin_mul_overflow(offset, itemsize, &skipped) || skipped > total) return 0;
  return total - skipped;
}

// Whether `obj` (a data_ptr() object) has dtype torch.bool.
bool torch_bool(PyObject* obj) {
  PyObject* dt = PyObject_GetAttr(obj, g_names.dtype);
  if (!dt) {
    PyErr_Clear();
    return false;
  }
  PyObject* name = PyObject_Str(dt);
  Py_DECREF(dt);
  if (!name) {
    PyErr_Clear();
    return false;
  }
  const char* c = PyUnicode_AsUTF8(name);
  const bool is_bool = c && std::string_view(c) == "torch.bool";
  Py_DECREF(name);
  PyErr_Clear();
  return is_bool;
}

// Any supported object -> Buffer. `writable`: the engine writes it (graph outputs).
// `want_bytes`: also ask data_ptr() objects for their byte size (torch's nbytes), which is the
// reachable memory only for contiguous tensors: used for the workspace.
// `want_where`: data_ptr() objects are also asked is_cuda. Not needed on a CUDA handle for
// device buffers: the cuDNN plan checks every new pointer's device itself (plan.cpp), and one
// attribute read less per tensor is measurable on the GPU's host path.
// `want_extent`: host data_ptr() objects (torch CPU tensors) are also asked for the memory
// their storage holds past data_ptr(), so that check_buffer refuses one too small for the
// tensor instead of the CPU reference engine reading or writing past its end.
Buffer get_buffer(PyObject* obj, bool writable, Scratch& sc, const Who& who,
                  bool want_bytes = false, bool want_where = true, bool want_extent = false) {
  Buffer b;
  // 1. Buffer protocol: numpy arrays, memoryview, bytearray, array.array.
  // Arrays whose dtype the buffer protocol cannot describe (ml_dtypes' bfloat16, float8) fall
  // through to __array_interface__.
  std::string buffer_error;
  if (PyObject_CheckBuffer(obj)) {
    Py_buffer& view = sc.views[sc.n_views];
    if (PyObject_GetBuffer(obj, &view,
                           PyBUF_STRIDES | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) == 0) {
      ++sc.n_views;
      b.ptr = view.buf;
      b.itemsize = view.itemsize;
      b.where = Where::Host;
      b.kind = format_kind(view.format);
      bool negative = false;
      if (view.strides) {
        b.bytes = span_bytes(view.ndim, view.shape, view.strides, view.itemsize, &negative);
        b.has_layout = true;
        b.shape.assign(view.shape, view.shape + view.ndim);
        b.strides.assign(view.strides, view.strides + view.ndim);
      } else {
        b.bytes = view.len;
      }
      if (negative) fail(who.str() + ": arrays with negative strides are not supported");
      return b;
    }
    nb::python_error e;  // e.g. "buffer source array is read-only"
    buffer_error = e.what();
    // numpy raises ValueError ("cannot include dtype 'E' in a buffer") or BufferError.
    if ((PyErr_GivenExceptionMatches(e.type().ptr(), PyExc_BufferError) == 0 &&
         PyErr_GivenExceptionMatches(e.type().ptr(), PyExc_ValueError) == 0) ||
        !PyObject_HasAttr(obj, g_names.ai))
      fail(who.str() + ": cannot use the array: " + buffer_error);
    if (writable && buffer_error.find("read-only") != std::string::npos)
      fail(who.str() + ": cannot use the array: " + buffer_error);
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
    // BOOLEAN memory is bits: a torch.bool tensor (a byte per element) is told apart from a
    // uint8 one by its dtype, read for BOOLEAN tensors only (the hot path pays nothing).
    if (who.t && who.t->data_type == DataType::Boolean) b.kind = torch_bool(obj) ? 't' : '?';
    if (want_bytes) b.bytes = int_slot(ts ? ts->nbytes : nullptr, obj, g_names.nbytes);
    if (want_extent && !want_bytes && b.where == Where::Host)
      b.bytes = torch_extent(obj, b.itemsize);
    return b;
  }
  if (ts || !PyErr_ExceptionMatches(PyExc_AttributeError)) throw nb::python_error();  // raised
  PyErr_Clear();
  // 3./4. The CUDA and host array interfaces (cupy, numba, ...).
  if (PyObject* d = PyObject_GetAttr(obj, g_names.cai)) {
    nb::object keep = nb::steal(d);
    return from_interface(d, Where::Cuda, who, writable);
  }
  PyErr_Clear();
  if (PyObject* d = PyObject_GetAttr(obj, g_names.ai)) {
    nb::object keep = nb::steal(d);
    return from_interface(d, Where::Host, who, writable);
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
      const int code = arr.dtype().code;
      b.kind = code == 0   ? 'i'
               : code == 1 ? 'u'
               : code == 2 ? 'f'
               : code == 4 ? 'B'
               : code == 6 ? 'b'
                           : 'c';
      b.has_layout = true;
      std::vector<Py_ssize_t> shape(arr.ndim()), strides(arr.ndim());
      for (size_t i = 0; i < arr.ndim(); ++i) {
        shape[i] = static_cast<Py_ssize_t>(arr.shape(i));
        if (arr.stride(i) < 0) fail(who.str() + ": negative strides are not supported");
        int64_t bytes_stride = 0;
        if (__builtin_mul_overflow(arr.stride(i), b.itemsize, &bytes_stride))
          fail(who.str() + ": the DLPack strides overflow");
        strides[i] = static_cast<Py_ssize_t>(bytes_stride);
      }
      bool negative = false;
      b.bytes = span_bytes(static_cast<Py_ssize_t>(shape.size()), shape.data(), strides.data(),
                           b.itemsize, &negative);
      b.shape.assign(shape.begin(), shape.end());
      b.strides.assign(strides.begin(), strides.end());
      return b;
    }
  }
  if (!buffer_error.empty()) fail(who.str() + ": cannot use the array: " + buffer_error);
  fail(who.str() + ": got a " + Py_TYPE(obj)->tp_name +
       "; expected a numpy array, a torch tensor, or an object with the buffer protocol, "
       "data_ptr(), __cuda_array_interface__, __array_interface__ or __dlpack__");
}

// Encodes a Python number as one scalar of `t` in `slot`: floats must fit the type's finite
// range (they are rounded to it), ints must fit the integer type exactly.
void encode_scalar(PyObject* num, const ir::TensorAttrs& t, uint64_t* slot) {
  *slot = 0;
  auto put = [&](auto v) { std::memcpy(slot, &v, sizeof(v)); };
  const std::string who = "execute: tensor '" + t.name + "' (uid " + std::to_string(t.uid) +
                          ") is " + std::string(data_type_name(t.data_type));
  if (t.data_type == DataType::Boolean) {
    const int truth = PyObject_IsTrue(num);
    if (truth < 0) throw nb::python_error();
    put(static_cast<uint8_t>(truth));
    return;
  }
  const bool is_float = PyFloat_Check(num);
  if (is_integral(t.data_type) && is_float) fail(who + ": give an int, not a float");
  if (!is_integral(t.data_type)) {
    const double d = PyFloat_AsDouble(num);  // ints convert too; huge ones raise OverflowError
    if (PyErr_Occurred()) {
      PyErr_Clear();
      fail(who + ": the value does not fit a double");
    }
    if (data_type_size(t.data_type) <= 0 || t.data_type == DataType::NotSet)
      fail(who + ": give it as a one-element array, not a Python number");
    store_element(slot, t.data_type, 0, d);
    const double back = load_element(slot, t.data_type, 0);
    if (std::isfinite(d) && !std::isfinite(back))
      fail(who + ": " + nb::cast<std::string>(nb::str(nb::handle(num))) +
           " is outside its finite range");
    return;
  }
  int overflow = 0;
  const long long i = PyLong_AsLongLongAndOverflow(num, &overflow);
  if (PyErr_Occurred()) throw nb::python_error();
  auto range = [&](long long lo, long long hi) {
    if (overflow || i < lo || i > hi)
      fail(who + ": " + nb::cast<std::string>(nb::str(nb::handle(num))) + " is outside [" +
           std::to_string(lo) + ", " + std::to_string(hi) + "]");
  };
  switch (t.data_type) {
    case DataType::Int8:
      range(INT8_MIN, INT8_MAX);
      put(static_cast<int8_t>(i));
      return;
    case DataType::UInt8:
      range(0, UINT8_MAX);
      put(static_cast<uint8_t>(i));
      return;
    case DataType::Int32:
      range(INT32_MIN, INT32_MAX);
      put(static_cast<int32_t>(i));
      return;
    case DataType::Int64:
      range(INT64_MIN, INT64_MAX);
      put(static_cast<int64_t>(i));
      return;
    default:
      fail(who + ": give it as a one-element array, not a Python number");
  }
}

// Element kinds a tensor's data type accepts.
bool kind_fits(DataType dt, char kind) {
  if (kind == '?') return true;  // not said: the element size is still checked
  switch (dt) {
    case DataType::Half:
    case DataType::Float:
    case DataType::Double:
      return kind == 'f';
    case DataType::BFloat16:
      return kind == 'B' || kind == 'V' || kind == 'u';  // raw bits in uint16 arrays too
    case DataType::FP8_E4M3:
    case DataType::FP8_E5M2:
      return kind == 'V' || kind == 'u' || kind == 'f';  // 'f' of size 1: ml_dtypes' '<f1'
    case DataType::Int8:
    case DataType::Int32:
    case DataType::Int64:
      return kind == 'i';
    case DataType::UInt8:
      return kind == 'u';
    case DataType::Boolean:
      return kind == 'b' || kind == 'u';
    default:
      return true;
  }
}

std::string join(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

// The array's layout against the tensor's: the same extents and strides once dims of extent
// 1 (whose stride is never used) are dropped. Any layout that matches exactly is accepted, and
// so is a flat contiguous 1-D array holding exactly the memory of a dense tensor (the raw
// buffer idiom of cuDNN's frontend).
void check_layout(const Buffer& b, const ir::TensorAttrs& t, int64_t esize,
                  const std::string& who) {
  if (b.shape.size() == 1 && (b.shape[0] <= 1 || b.strides[0] == esize)) {
    int64_t elements = 1;
    for (int64_t d : t.dim) elements *= d;
    if (b.shape[0] == elements && t.storage_elements() == elements) return;
  }
  std::vector<std::pair<int64_t, int64_t>> want, have;
  bool empty = false;
  for (size_t i = 0; i < t.dim.size(); ++i) {
    if (t.dim[i] == 0) empty = true;
    if (t.dim[i] != 1) want.emplace_back(t.dim[i], i < t.stride.size() ? t.stride[i] : 0);
  }
  bool have_empty = false, misaligned = false;
  for (size_t i = 0; i < b.shape.size(); ++i) {
    if (b.shape[i] == 0) have_empty = true;
    if (b.shape[i] == 1) continue;
    if (b.strides[i] % esize) misaligned = true;
    have.emplace_back(b.shape[i], b.strides[i] / esize);
  }
  if (empty && have_empty) return;
  if (!misaligned && want == have) return;
  std::vector<int64_t> st;
  for (int64_t x : b.strides) st.push_back(esize > 0 && x % esize == 0 ? x / esize : x);
  fail(who + " is " + t.describe() + " but the array has shape " + join(b.shape) + " and strides " +
       join(st) + (misaligned ? " bytes" : " elements") +
       ": pass an array of that shape whose strides match the tensor's (e.g. np.empty of the "
       "shape, or a view such as .transpose() that gives those strides)");
}

// An FP4_E2M1 tensor's memory seen as bytes: the packed (unit-stride) dim halved, the other
// strides halved (validate() made them even), so that it compares with a uint8 array or a
// torch.float4_e2m1fn_x2 tensor, whose elements hold two FP4 elements each.
ir::TensorAttrs packed_bytes_view(const ir::TensorAttrs& t) {
  ir::TensorAttrs v = t;
  const std::optional<size_t> axis = t.packed_axis();
  for (size_t d = 0; d < v.dim.size(); ++d) {
    if (axis && d == *axis) {
      v.dim[d] /= 2;
      v.stride[d] = 1;
    } else {
      v.stride[d] /= 2;
    }
  }
  v.data_type = DataType::UInt8;
  return v;
}

// The element checks of a sub-byte tensor (FP4_E2M1): the array holds bytes, two elements
// each, packed along the tensor's unit-stride dim (the frontend's convention: a uint8 array or
// a torch.float4_e2m1fn_x2 tensor with that dim halved, or a flat array of the bytes).
void check_packed_buffer(const Buffer& b, const ir::TensorAttrs& t, const std::string& who) {
  const std::string type(data_type_name(t.data_type));
  const std::string how =
      ": pass its packed bytes, two elements per byte along the unit-stride dim (the even one in "
      "the low nibble): a uint8 array or a torch.float4_e2m1fn_x2 tensor with that dim halved "
      "(dnngraph.pack_fp4 packs float values)";
  if ((b.kind == 'V' || b.kind == 'f') && b.itemsize == 1)
    fail(who + " is " + type + " but the array has 1-byte " + (b.kind == 'V' ? "opaque" : "float") +
         " elements, one value each (e.g. ml_dtypes.float4_e2m1fn, which does not pack)" + how);
  if (b.itemsize > 0 && b.itemsize != 1)
    fail(who + " is " + type + " but the array has " + std::to_string(b.itemsize) +
         "-byte elements" + how);
  if (b.kind != '?' && b.kind != 'u')
    fail(who + " is " + type + " but the array does not hold unsigned bytes" + how);
  const ir::TensorAttrs bytes = packed_bytes_view(t);
  if (b.has_layout) check_layout(b, bytes, 1, who + " (" + type + ", two elements per byte)");
  if (b.bytes == -2) fail(who + ": the array's extent overflows");
  const int64_t need = t.storage_bytes().value_or(INT64_MAX);
  if (b.bytes >= 0 && b.bytes < need)
    fail(who + " needs " + std::to_string(need) + " bytes (" + t.describe() +
         ", two elements per byte) but the array holds " + std::to_string(b.bytes));
}

// The checks of a BOOLEAN tensor in memory: it holds bits, element i in bit i % 8 of byte i / 8
// (least significant first), as cuDNN stores it, so the array holds bytes: a contiguous uint8
// array (np.packbits(mask, bitorder="little")) of at least ceil(span / 8) bytes. A numpy bool
// array holds one element per byte: both engines would read its bytes as bits, so it is
// refused. A torch.bool tensor (its dtype is read for BOOLEAN tensors only) is the frontend's
// own form (its tests bind full-size torch.bool masks, whose values they do not check): it is
// taken as bytes, as the frontend takes it, with a UserWarning that its bytes are read as bits.
void check_bit_buffer(const Buffer& b, const ir::TensorAttrs& t, const std::string& who) {
  const std::string how =
      ": BOOLEAN tensors are bit-packed, eight elements per byte (element i in bit i % 8 of byte "
      "i // 8): pass np.packbits(mask, axis=None, bitorder=\"little\") (a uint8 array; torch: a "
      "uint8 tensor of those bytes) and read an output with np.unpackbits(out, count=n, "
      "bitorder=\"little\")";
  if (b.kind == 'b')
    fail(who + " is BOOLEAN but the array holds bools, one element per byte" + how);
  if (b.kind == 't') {
    const std::string w = who +
                          " is BOOLEAN but is given a torch.bool tensor, one element per "
                          "byte: its bytes are read as bits, as cuDNN reads them" +
                          how;
    if (PyErr_WarnEx(PyExc_UserWarning, w.c_str(), 1) < 0) throw nb::python_error();
  }
  if (b.itemsize > 0 && b.itemsize != 1)
    fail(who + " is BOOLEAN but the array has " + std::to_string(b.itemsize) + "-byte elements" +
         how);
  if (b.kind != '?' && b.kind != 't' && b.kind != 'u' && b.kind != 'i')
    fail(who + " is BOOLEAN but the array does not hold bytes" + how);
  if (b.has_layout) {  // the bytes in order: contiguous
    int64_t expect = 1;
    for (size_t i = b.shape.size(); i-- > 0;) {
      if (b.shape[i] != 1 && b.strides[i] != expect)
        fail(who + " is BOOLEAN: its bytes must be contiguous, but the array has strides " +
             join(b.strides) + " bytes; pass a contiguous copy (np.ascontiguousarray)");
      expect *= b.shape[i];
    }
  }
  if (b.bytes == -2) fail(who + ": the array's extent overflows");
  const int64_t need = t.storage_bytes().value_or(INT64_MAX);
  if (b.bytes >= 0 && b.bytes < need)
    fail(who + " needs " + std::to_string(need) + " bytes (" + t.describe() +
         ", eight elements per byte) but the array holds " + std::to_string(b.bytes) + how);
}

// Checks one value against its tensor (as built): device, element type, layout, memory size.
void check_buffer(const Buffer& b, const ir::TensorAttrs& t, const Device& dev) {
  // One element in whole bytes (a BOOLEAN scalar by value: one byte, 0 or 1; the sub-byte types
  // in memory are checked by check_bit_buffer / check_packed_buffer below).
  const int64_t esize = data_type_bytes(t.data_type, 1).value_or(0);
  auto who = [&] { return "execute: tensor '" + t.name + "' (uid " + std::to_string(t.uid) + ")"; };
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
  if (t.data_type == DataType::Boolean && !t.is_pass_by_value) return check_bit_buffer(b, t, who());
  if (t.data_type == DataType::FP4_E2M1) return check_packed_buffer(b, t, who());
  if (b.itemsize > 0 && esize > 0 && b.itemsize != esize)
    fail(who() + " is " + std::string(data_type_name(t.data_type)) + " (" + std::to_string(esize) +
         "-byte elements) but the array has " + std::to_string(b.itemsize) + "-byte elements");
  if (!kind_fits(t.data_type, b.kind))
    fail(who() + " is " + std::string(data_type_name(t.data_type)) + " but the array holds " +
         (b.kind == 'f'   ? "floats"
          : b.kind == 'i' ? "signed ints"
          : b.kind == 'u' ? "unsigned ints"
          : b.kind == 'b' ? "bools"
          : b.kind == 'B' ? "bfloat16"
          : b.kind == 'V' ? "opaque elements (e.g. ml_dtypes)"
                          : "elements of another kind") +
         ": pass an array of the tensor's data type");
  if (b.has_layout && esize > 0) check_layout(b, t, esize, who());
  if (b.bytes == -2) fail(who() + ": the array's extent overflows");
  if (b.bytes >= 0 && esize > 0) {
    // Checked: a tensor edited after build may have dims whose byte extent leaves int64.
    const int64_t need = t.is_pass_by_value ? esize : t.storage_bytes().value_or(INT64_MAX);
    if (b.bytes < need)
      fail(who() + " needs " + std::to_string(need) + " bytes (" + t.describe() +
           ") but the array holds " + std::to_string(b.bytes) +
           ": pass an array that holds the whole tensor");
  }
}

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

// A Python int given as a buffer (the frontend's data_ptr() form): its address, which must be
// neither 0 nor negative. Nothing about the memory behind it can be checked.
void* raw_address(PyObject* value, const std::string& who) {
  const unsigned long long a = PyLong_AsUnsignedLongLong(value);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    fail(who + ": the address " + nb::cast<std::string>(nb::str(nb::handle(value))) +
         " is not a non-negative 64-bit integer");
  }
  if (a == 0) fail(who + " is the address 0: pass the buffer's data_ptr() (or the array)");
  return reinterpret_cast<void*>(static_cast<uintptr_t>(a));
}

// The variant pack and workspace of one call, converted from Python.
struct Converted {
  void* ws = nullptr;
  int64_t ws_bytes = 0;
};

// Whether `t` is one of this graph's tensors (virtual ones included).
bool owns(const PyGraph& self, const ir::TensorAttrs* t) {
  for (const auto& u : self.graph.tensors())
    if (u.get() == t) return true;
  return false;
}

// A virtual tensor of this graph keyed in the pack: it has no buffer to bind.
std::string virtual_in_pack(const PyGraph& self, const ir::TensorAttrs* t) {
  return "execute: tensor '" + t->name + "' (uid " + std::to_string(t->uid) + ") of graph '" +
         self.graph.name() +
         "' is virtual (an intermediate with no memory of its own): to read it, call "
         "set_output(True) on it before build(), then pass an array for it";
}

// Fills sc.pack from the Python mapping (and checks every value against the tensor as the
// graph was built). The mapping's items are copied into a list first (sc.items, which also
// keeps every key and value alive until the call returns), so neither another thread nor a
// key's __hash__/__eq__ nor a value's data_ptr()/__array_interface__ can change what is
// walked. The pack's nodes are reused when the call has the same uids as the previous one, so
// a steady loop allocates nothing.
Converted convert(PyGraph& self, nb::handle pack, nb::handle workspace, const Device& dev,
                  Scratch& sc) {
  throw_if_error(self.graph.check_unchanged());
  PyObject* items =
      PyDict_CheckExact(pack.ptr()) ? PyDict_Items(pack.ptr()) : PyMapping_Items(pack.ptr());
  if (!items) {
    PyErr_Clear();
    throw nb::type_error(("execute: the variant pack must be a mapping {tensor or uid: array}, "
                          "got " +
                          std::string(Py_TYPE(pack.ptr())->tp_name))
                             .c_str());
  }
  sc.items = nb::steal(items);
  const size_t n = static_cast<size_t>(PyList_GET_SIZE(items));
  // Sized up front so pointers into them stay valid while the pack is filled.
  if (sc.scalars.size() < n) sc.scalars.resize(n);
  if (sc.views.size() < n + 1) sc.views.resize(n + 1);
  sc.entries.clear();
  size_t n_scalars = 0;

  for (size_t k = 0; k < n; ++k) {
    PyObject* item = PyList_GET_ITEM(items, static_cast<Py_ssize_t>(k));
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2)
      throw nb::type_error("execute: the variant pack's items() must be (key, value) pairs");
    PyObject* key = PyTuple_GET_ITEM(item, 0);
    PyObject* value = PyTuple_GET_ITEM(item, 1);
    if (self.frontend_forms && (key == Py_None || value == Py_None)) continue;
    const ir::TensorAttrs* t = nullptr;
    int64_t uid;
    if (Py_TYPE(key) == g_names.tensor_type) {
      const ir::TensorAttrs* live = nb::inst_ptr<ir::TensorAttrs>(key);
      if (self.graph.is_unused_tensor(live)) continue;  // set aside by validate()
      if (!live->uid_assigned)
        fail("tensor '" + live->name + "' has no uid yet: build the graph before execute");
      if (self.find_uid(live->uid) != live) {
        if (live->is_virtual && owns(self, live)) fail(virtual_in_pack(self, live));
        fail("execute: tensor '" + live->name + "' (uid " + std::to_string(live->uid) +
             ") belongs to " + graph_owning(live) + ", not to graph '" + self.graph.name() +
             "': key the pack with this graph's tensors (or their uids)");
      }
      uid = live->uid;
    } else if (PyLong_Check(key)) {
      int overflow = 0;
      uid = PyLong_AsLongLongAndOverflow(key, &overflow);
      if (PyErr_Occurred()) throw nb::python_error();
      if (overflow)
        fail("execute: uid " + nb::cast<std::string>(nb::str(nb::handle(key))) +
             " is outside the int64 range of uids");
      if (self.graph.is_unused_uid(uid)) continue;
    } else {
      throw nb::type_error(("execute: variant pack keys must be graph tensors or int uids, got " +
                            std::string(Py_TYPE(key)->tp_name))
                               .c_str());
    }
    // Checked against the tensor as built: that is what the plan reads and writes.
    t = self.graph.built_tensor(uid);
    if (!t) {
      for (const auto& v : self.graph.tensors())
        if (v->is_virtual && v->uid_assigned && v->uid == uid) fail(virtual_in_pack(self, v.get()));
      fail("execute: uid " + std::to_string(uid) + " is not a non-virtual tensor of graph '" +
           self.graph.name() + "' as built (was it built?)");
    }
    if (value == Py_None) fail("execute: " + describe_key(t, uid) + " is None");
    void* ptr;
    if (self.frontend_forms && !t->is_pass_by_value && PyLong_CheckExact(value)) {
      ptr = raw_address(value, "execute: " + describe_key(t, uid));
    } else if (PyFloat_Check(value) || PyLong_Check(value)) {
      if (!t->is_pass_by_value)
        fail("execute: " + describe_key(t, uid) +
             " is not pass-by-value: give an array, not a Python number");
      uint64_t* slot = &sc.scalars[n_scalars++];
      encode_scalar(value, *t, slot);
      ptr = slot;
    } else {
      const bool want_where = dev.kind != Device::Kind::CUDA || t->is_pass_by_value;
      // On the CPU the reference engine walks the tensor's extent itself: check it fits.
      const bool want_extent = dev.kind == Device::Kind::CPU && !t->is_pass_by_value;
      Buffer b = get_buffer(value, t->is_output, sc, Who{t, uid}, false, want_where, want_extent);
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
  if (self.frontend_forms && PyLong_CheckExact(workspace.ptr())) {
    // 0: no workspace (the frontend's form for a plan that needs none); checked as 0 bytes.
    const bool none = PyLong_AsLongLong(workspace.ptr()) == 0 && !PyErr_Occurred();
    PyErr_Clear();
    c.ws = none ? nullptr : raw_address(workspace.ptr(), "execute: the workspace");
    c.ws_bytes = none ? 0 : -1;  // an address: its size is not known, not checked
  } else if (!workspace.is_none()) {
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

// Whether execute() can run `pack` as given: no frontend-only arguments, a built plan, a
// workspace when the plan needs one, a dict whose keys are tensors or uids (not None) and whose
// values are neither None nor ints, and no scalars bound by tensor_scalar() waiting to be added.
static bool is_plain_call(PyGraph& g, nb::handle self, nb::handle pack, nb::handle workspace,
                          nb::handle override_uids, nb::handle override_shapes,
                          nb::handle override_strides, nb::handle tensor_uids) {
  if (!override_uids.is_none() || !override_shapes.is_none() || !override_strides.is_none() ||
      !tensor_uids.is_none() || !PyDict_Check(pack.ptr()))
    return false;
  if (g.graph.selected_plan_index() < 0) return false;
  if (workspace.is_none()) {
    auto ws = g.graph.get_workspace_size();
    if (!ws || *ws > 0) return false;
  }
  PyObject** dict = _PyObject_GetDictPtr(self.ptr());
  if (dict && *dict) {
    PyObject* b = PyDict_GetItem(*dict, g_names.bindings);  // borrowed
    if (b && PyObject_IsTrue(b) == 1) return false;
  }
  // A raw address (an int) as the workspace or as a buffer is the frontend's data_ptr() form,
  // which the subclass turns into a buffer of the tensor's layout.
  // The frontend's forms (raw int addresses, None entries) run here when the graph takes them;
  // names as keys go to the subclass.
  if (!g.frontend_forms && PyLong_CheckExact(workspace.ptr())) return false;
  PyObject *key = nullptr, *value = nullptr;
  Py_ssize_t pos = 0;
  while (PyDict_Next(pack.ptr(), &pos, &key, &value)) {
    if (PyUnicode_Check(key)) return false;
    if (!g.frontend_forms && (value == Py_None || key == Py_None || PyLong_CheckExact(value)))
      return false;
  }
  return true;
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

  // The frontend-compatible subclass (python/dnngraph/_compat.py) keeps this method as its
  // `execute`, so the common call costs no Python frame: a dict of tensors/uids -> arrays on a
  // built graph runs here; anything else (None entries, name keys, overrides, tensor_uids,
  // bound scalars, no workspace where one is needed, not built yet) goes to the subclass's
  // `_execute_slow`. The base class has no `_execute_slow` and always runs here.
  cls.def(
      "execute",
      [](nb::pointer_and_handle<PyGraph> self, nb::handle pack, nb::handle workspace,
         nb::handle handle, nb::handle override_uids, nb::handle override_shapes,
         nb::handle override_strides, nb::handle tensor_uids) {
        PyGraph& g = *self.p;
        if (!is_plain_call(g, self.h, pack, workspace, override_uids, override_shapes,
                           override_strides, tensor_uids)) {
          nb::object slow = nb::getattr(self.h, "_execute_slow", nb::none());
          if (!slow.is_none()) {
            slow(pack, workspace, handle, override_uids, override_shapes, override_strides,
                 tensor_uids);
            return;
          }
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
      "_execute_direct",
      [](PyGraph& self, Pack pack, nb::handle workspace, const PyHandle* handle) {
        run(self, pack, workspace, handle, std::nullopt);
      },
      nb::arg("pack"), nb::arg("workspace").none(), nb::arg("handle").none() = nb::none(),
      "execute() without the compatible subclass's dispatch (used by its slow path).");
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
