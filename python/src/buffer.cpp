// One Python object of a variant pack -> Buffer: the buffer protocol (numpy and friends), torch
// tensors through data_ptr() and their storage, __cuda_array_interface__ /
// __array_interface__, DLPack. Reads attributes through interned names and cached type slots,
// creating no Python objects on the common paths (the execute hot path, execute.cpp).
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

[[noreturn]] void fail(const std::string& what) { throw nb::value_error(printable(what).c_str()); }

std::string describe_key(const ir::TensorAttrs* t, int64_t uid) {
  if (t) return "tensor '" + t->name + "' (uid " + std::to_string(t->uid) + ")";
  return "uid " + std::to_string(uid);
}

namespace {

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

// A DLPack object (jax, ...) -> b; false when `obj` is not one. The ndarray holds the
// exporter's capsule only for this call; the memory stays valid because the caller's dict
// keeps `obj` alive.
bool from_dlpack(PyObject* obj, const Who& who, Buffer& b) {
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
      return true;
    }
  }
  return false;
}

}  // namespace

Buffer get_buffer(PyObject* obj, bool writable, Scratch& sc, const Who& who, bool want_bytes,
                  bool want_where, bool want_extent) {
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
  // 5. DLPack (jax, ...).
  if (from_dlpack(obj, who, b)) return b;
  if (!buffer_error.empty()) fail(who.str() + ": cannot use the array: " + buffer_error);
  fail(who.str() + ": got a " + Py_TYPE(obj)->tp_name +
       "; expected a numpy array, a torch tensor, or an object with the buffer protocol, "
       "data_ptr(), __cuda_array_interface__, __array_interface__ or __dlpack__");
}

}  // namespace dnngraph::py
