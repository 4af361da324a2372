// A variant pack's values checked against their tensors (data type, extent, layout, device)
// and Python numbers encoded for pass-by-value tensors; convert() fills the C++ pack.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <shared_mutex>

#include <nanobind/ndarray.h>

#include "dnngraph/ir/sdpa.hpp"
#include "dnngraph/storage.hpp"
#include "execute.hpp"

namespace dnngraph::py {

namespace {

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

// A ragged (THD) rank-4 tensor [b, h, s, d] is placed by its offsets, so serving code passes
// the packed tokens: a flat contiguous array of any length, or [tokens, h, d] whose strides are
// the tensor's token, head and element strides (unit dims dropped). Its extent is checked
// against the offsets (check_ragged_extents).
bool ragged_layout_fits(const Buffer& b, const ir::TensorAttrs& t, int64_t esize) {
  if (!t.ragged_offset || t.dim.size() != 4 || t.stride.size() != 4) return false;
  if (b.shape.size() == 1 && (b.shape[0] <= 1 || b.strides[0] == esize)) return true;
  std::vector<std::pair<int64_t, int64_t>> heads, have;  // (extent, stride) of h and d
  for (size_t i : {size_t{1}, size_t{3}})
    if (t.dim[i] != 1) heads.emplace_back(t.dim[i], t.stride[i]);
  for (size_t i = 0; i < b.shape.size(); ++i) {
    if (b.shape[i] == 1) continue;
    if (b.strides[i] % esize) return false;
    have.emplace_back(b.shape[i], b.strides[i] / esize);
  }
  if (have == heads) return true;  // one token
  // The token dim first (any number of tokens), at the tensor's token stride.
  return !have.empty() && have.front().second == t.stride[2] &&
         std::equal(have.begin() + 1, have.end(), heads.begin(), heads.end());
}

// The array's layout against the tensor's: the same extents and strides once dims of extent
// 1 (whose stride is never used) are dropped. Any layout that matches exactly is accepted, and
// so is a flat contiguous 1-D array holding exactly the memory of a dense tensor (the raw
// buffer idiom of cuDNN's frontend).
void check_layout(const Buffer& b, const ir::TensorAttrs& t, int64_t esize,
                  const std::string& who) {
  if (ragged_layout_fits(b, t, esize)) return;
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
// A ragged tensor's size is left to check_ragged_extents (its offsets place its sequences).
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
  if (b.bytes >= 0 && esize > 0 && !(t.ragged_offset && t.dim.size() == 4)) {
    // Checked: a tensor edited after build may have dims whose byte extent leaves int64.
    const int64_t need = t.is_pass_by_value ? esize : t.storage_bytes().value_or(INT64_MAX);
    if (b.bytes < need)
      fail(who() + " needs " + std::to_string(need) + " bytes (" + t.describe() +
           ") but the array holds " + std::to_string(b.bytes) +
           ": pass an array that holds the whole tensor");
  }
}

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

// A ragged tensor's array whose size check_ragged_extents makes once the pack is read.
struct RaggedArray {
  const ir::TensorAttrs* t;
  int64_t bytes;
};

// The pointer the pack binds to `uid` (this call's entries), or null.
const void* bound(const Scratch& sc, int64_t uid) {
  for (const auto& [u, p] : sc.entries)
    if (u == uid) return p;
  return nullptr;
}

// Element i of the [n,1,1,1] integer tensor `t` at `p`.
int64_t int_at(const void* p, const ir::TensorAttrs& t, int64_t i) {
  return static_cast<int64_t>(
      load_element(p, t.data_type, i * (t.stride.empty() ? 1 : t.stride[0])));
}

// On the CPU a ragged (THD) tensor's array must hold every sequence where its offsets put it:
// for each sequence i with rows_i > 0 (its SEQ_LEN), offset[i] x multiplier plus the span of
// rows_i rows. Serving code allocates only the packed tokens (fewer than b x s_max), so that,
// not the tensor's declared extent, is the bound. The offsets and lengths are host memory here,
// already checked against their own tensors. Checked before anything runs, so a refused call
// writes nothing. Lengths outside 1..s and negative offsets are left to the engine, which
// refuses them naming the op.
void check_ragged_extents(const PyGraph& self, const Scratch& sc,
                          const std::vector<RaggedArray>& arrays) {
  const ir::ValidatedGraphPtr snap = self.graph.validated();
  const std::vector<ir::SdpaRaggedTensor> ragged =
      snap ? ir::sdpa_ragged_tensors(snap->nodes()) : std::vector<ir::SdpaRaggedTensor>{};
  for (const RaggedArray& a : arrays) {
    const ir::TensorAttrs& t = *a.t;
    const std::string who = "execute: tensor '" + t.name + "' (uid " + std::to_string(t.uid) + ")";
    bool placed = false;
    for (const ir::SdpaRaggedTensor& r : ragged) {
      if (r.tensor->uid != t.uid) continue;
      const void* off = bound(sc, r.offsets->uid);
      const void* rows = r.rows ? bound(sc, r.rows->uid) : nullptr;
      placed = true;
      if (!off || (r.rows && !rows)) continue;  // execute names the missing tensor
      for (int64_t i = 0; i < t.dim[0]; ++i) {
        const int64_t n = std::min(rows ? int_at(rows, *r.rows, i) : t.dim[2], t.dim[2]);
        const int64_t unit = int_at(off, *r.offsets, i);
        int64_t start = 0, end = 0;
        if (n < 1 || unit < 0) continue;
        const std::optional<int64_t> span = ir::ragged_sequence_span(t, n);
        const bool wraps = !span ||
                           __builtin_mul_overflow(unit, t.ragged_offset_multiplier, &start) ||
                           __builtin_add_overflow(start, *span, &end);
        const std::optional<int64_t> need =
            wraps ? std::nullopt : data_type_bytes(t.data_type, end);
        if (need && a.bytes >= *need) continue;
        const int64_t esize = data_type_bytes(t.data_type, 1).value_or(1);
        fail(who + ": sequence " + std::to_string(i) + " starts at element " +
             (wraps ? "(past int64)" : std::to_string(start)) + " (ragged offset " +
             std::to_string(unit) + " x multiplier " + std::to_string(t.ragged_offset_multiplier) +
             " of '" + r.offsets->name + "') and its " + std::to_string(n) + " rows (" +
             (r.rows ? "'" + r.rows->name + "'" : "s") + ") reach element " +
             (wraps ? "(past int64)" : std::to_string(end - 1)) + ", but the array holds " +
             std::to_string(a.bytes / esize) + " elements (" + std::to_string(a.bytes) +
             " bytes): pass an array that holds every sequence at its offset, or fix the ragged "
             "offsets or the sequence lengths");
      }
    }
    if (placed) continue;
    // Not placed by an attention node of the graph as validated (edited since): the whole
    // declared extent.
    const int64_t need = t.storage_bytes().value_or(INT64_MAX);
    if (a.bytes < need)
      fail(who + " needs " + std::to_string(need) + " bytes (" + t.describe() +
           ") but the array holds " + std::to_string(a.bytes) +
           ": pass an array that holds the whole tensor");
  }
}

}  // namespace

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
  std::vector<RaggedArray> ragged;  // allocates only for ragged tensors

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
      if (want_extent && t->ragged_offset && t->dim.size() == 4 && b.bytes >= 0)
        ragged.push_back({t, b.bytes});
      ptr = b.ptr;
    }
    sc.entries.emplace_back(uid, ptr);
  }
  if (!ragged.empty()) check_ragged_extents(self, sc, ragged);
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

}  // namespace dnngraph::py
