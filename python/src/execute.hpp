// Internal to execute: how a Python variant pack becomes a dnngraph::VariantPack. buffer.cpp
// turns one Python object into a Buffer (pointer, size, layout, device); pack.cpp checks each
// Buffer against its tensor and fills the pack; execute.cpp holds the bindings and runs it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common.hpp"

namespace dnngraph::py {

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
// The calling thread's scratch (execute.cpp).
extern thread_local Scratch t_scratch;

// Attribute names, interned once by bind_execute.
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
extern Names g_names;

// ValueError with `what` as its message.
[[noreturn]] void fail(const std::string& what);
// "tensor 'x' (uid 3)", or "uid 3" when `t` is null.
std::string describe_key(const ir::TensorAttrs* t, int64_t uid);

// Names a pack entry in error messages; the text is only built when an error is raised.
struct Who {
  const ir::TensorAttrs* t = nullptr;  // null: the workspace
  int64_t uid = 0;
  std::string str() const { return "execute: " + (t ? describe_key(t, uid) : "workspace"); }
};

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
                  bool want_bytes = false, bool want_where = true, bool want_extent = false);

// The variant pack and workspace of one call, converted from Python.
struct Converted {
  void* ws = nullptr;
  int64_t ws_bytes = 0;
};

// Fills sc.pack (and its scratch) from the Python mapping `pack` and converts `workspace`,
// checking every value against its tensor and the handle's device `dev` (pack.cpp).
Converted convert(PyGraph& self, nb::handle pack, nb::handle workspace, const Device& dev,
                  Scratch& sc);

}  // namespace dnngraph::py
