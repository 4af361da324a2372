// dnngraph.torch._fast: a direct Python entry for each functional op, the way torch's own
// generated bindings call ATen: arguments converted straight to C++ values, the op called
// unboxed through the dispatcher (so autograd, Meta and every other key work as usual).
// A call through torch.ops.dnngraph.<op> instead converts every argument to an IValue against
// the schema and calls the kernel boxed, which costs about as much as the op's own hot path.
//
// Each function returns NotImplemented, for functional.py to take the torch.ops path, when an
// argument is not of the plain type it expects or has __torch_function__ (tensor subclasses,
// torch function modes): the fast path never answers differently from the torch.ops one, it
// only skips the boxing. functional.py does not call it while torch.compile traces.
#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <Python.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include <optional>
#include <string_view>
#include <tuple>
#include <utility>

namespace {

using at::Tensor;
using OptTensor = std::optional<Tensor>;

// The arguments of one call; `ok` turns false at the first one that is not plain (and is
// false from the start under a torch function mode).
struct Args {
  PyObject* const* a;
  bool ok = !at::impl::torch_function_mode_enabled();

  const Tensor* tensor(Py_ssize_t i) {
    PyObject* o = a[i];
    // Tensor or Parameter exactly: a subclass may define __torch_function__.
    if (!ok || !THPVariable_CheckExact(o)) {
      ok = false;
      return nullptr;
    }
    return &THPVariable_Unpack(o);
  }
  OptTensor opt_tensor(Py_ssize_t i) {
    if (a[i] == Py_None) return std::nullopt;
    const Tensor* t = tensor(i);
    return t ? OptTensor(*t) : std::nullopt;
  }
  double real(Py_ssize_t i) {
    PyObject* o = a[i];
    if (!ok || !(PyFloat_Check(o) || (PyLong_Check(o) && !PyBool_Check(o)))) {
      ok = false;
      return 0;
    }
    const double v = PyFloat_AsDouble(o);  // an int too large for a double raises
    if (v == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      ok = false;  // torch.ops then raises its own error
    }
    return v;
  }
  std::optional<double> opt_real(Py_ssize_t i) {
    if (a[i] == Py_None) return std::nullopt;
    return real(i);
  }
  int64_t integer(Py_ssize_t i) { return integer_of(a[i]); }
  int64_t integer_of(PyObject* o) {
    if (!ok || !PyLong_Check(o) || PyBool_Check(o)) {
      ok = false;
      return 0;
    }
    const long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      ok = false;
    }
    return v;
  }
  bool boolean(Py_ssize_t i) {
    if (!ok || !PyBool_Check(a[i])) {
      ok = false;
      return false;
    }
    return a[i] == Py_True;
  }
  std::string_view str(Py_ssize_t i) {
    Py_ssize_t n = 0;
    const char* s = ok && PyUnicode_Check(a[i]) ? PyUnicode_AsUTF8AndSize(a[i], &n) : nullptr;
    if (!s) {
      PyErr_Clear();
      ok = false;
      return {};
    }
    return {s, static_cast<size_t>(n)};
  }
  // An int, or a list/tuple of ints (an int becomes `repeat` copies of itself).
  void ints(Py_ssize_t i, c10::SmallVector<int64_t, 8>& out, size_t repeat) {
    PyObject* o = a[i];
    out.clear();
    if (!ok) return;
    if (PyLong_Check(o) && !PyBool_Check(o)) {
      out.assign(repeat, integer_of(o));
      return;
    }
    if (!PyList_Check(o) && !PyTuple_Check(o)) {
      ok = false;
      return;
    }
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    PyObject** items = PySequence_Fast_ITEMS(o);
    for (Py_ssize_t k = 0; k < n && ok; ++k) out.push_back(integer_of(items[k]));
  }
};

// Runs the op without the GIL, as torch's bindings do.
struct NoGil {
  PyThreadState* state = PyEval_SaveThread();
  ~NoGil() { PyEval_RestoreThread(state); }
};

// Finds op `name` with C++ signature Sig. Each entry keeps the result in its own static: a
// static here would be shared by every op of the same signature.
template <class Sig>
c10::TypedOperatorHandle<Sig> find_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Sig>();
}

// Calls `op` unboxed with the GIL released; the result is wrapped once the GIL is back.
template <class Sig, class... Args>
auto call_unboxed(const c10::TypedOperatorHandle<Sig>& op, Args&&... args) {
  NoGil nogil;
  return op.call(std::forward<Args>(args)...);
}

PyObject* not_plain() { Py_RETURN_NOTIMPLEMENTED; }

// (a, b) as a Python tuple of two tensors.
PyObject* wrap_pair(Tensor a, Tensor b) {
  PyObject* t = PyTuple_New(2);
  if (!t) return nullptr;
  PyTuple_SET_ITEM(t, 0, THPVariable_Wrap(std::move(a)));
  PyTuple_SET_ITEM(t, 1, THPVariable_Wrap(std::move(b)));
  return t;
}

bool arity(Py_ssize_t nargs, Py_ssize_t want, const char* name) {
  if (nargs == want) return true;
  PyErr_Format(PyExc_TypeError, "dnngraph.torch._fast.%s takes %zd arguments (%zd given)", name,
               want, nargs);
  return false;
}

// layer_norm(x, normalized_shape, weight, bias, eps) -> y
PyObject* layer_norm(PyObject*, PyObject* const* a, Py_ssize_t n) {
  HANDLE_TH_ERRORS
  if (!arity(n, 5, "layer_norm")) return nullptr;
  Args p{a};
  const Tensor* x = p.tensor(0);
  c10::SmallVector<int64_t, 8> shape;
  p.ints(1, shape, 1);
  OptTensor w = p.opt_tensor(2), b = p.opt_tensor(3);
  const double eps = p.real(4);
  if (!p.ok) return not_plain();
  using Sig = std::tuple<Tensor, Tensor, Tensor>(const Tensor&, c10::SymIntArrayRef,
                                                 const OptTensor&, const OptTensor&, double);
  static const auto op = find_op<Sig>("dnngraph::layer_norm");
  return THPVariable_Wrap(
      std::get<0>(call_unboxed(op, *x, c10::fromIntArrayRefSlow(shape), w, b, eps)));
  END_HANDLE_TH_ERRORS
}

// rms_norm(x, normalized_shape, weight, eps) -> y
PyObject* rms_norm(PyObject*, PyObject* const* a, Py_ssize_t n) {
  HANDLE_TH_ERRORS
  if (!arity(n, 4, "rms_norm")) return nullptr;
  Args p{a};
  const Tensor* x = p.tensor(0);
  c10::SmallVector<int64_t, 8> shape;
  p.ints(1, shape, 1);
  OptTensor w = p.opt_tensor(2);
  const std::optional<double> eps = p.opt_real(3);
  if (!p.ok) return not_plain();
  using Sig = std::tuple<Tensor, Tensor>(const Tensor&, c10::SymIntArrayRef, const OptTensor&,
                                         std::optional<double>);
  static const auto op = find_op<Sig>("dnngraph::rms_norm");
  return THPVariable_Wrap(
      std::get<0>(call_unboxed(op, *x, c10::fromIntArrayRefSlow(shape), w, eps)));
  END_HANDLE_TH_ERRORS
}

// linear_act(x, w, bias, act) -> y
PyObject* linear_act(PyObject*, PyObject* const* a, Py_ssize_t n) {
  HANDLE_TH_ERRORS
  if (!arity(n, 4, "linear_act")) return nullptr;
  Args p{a};
  const Tensor* x = p.tensor(0);
  const Tensor* w = p.tensor(1);
  OptTensor bias = p.opt_tensor(2);
  const std::string_view act = p.str(3);
  if (!p.ok) return not_plain();
  using Sig = Tensor(const Tensor&, const Tensor&, const OptTensor&, c10::string_view);
  static const auto op = find_op<Sig>("dnngraph::linear_act");
  return THPVariable_Wrap(call_unboxed(op, *x, *w, bias, act));
  END_HANDLE_TH_ERRORS
}

// matmul_epilogue(a, b, bias, alpha, act, amax) -> y, or (y, amax) when amax
PyObject* matmul_epilogue(PyObject*, PyObject* const* a, Py_ssize_t n) {
  HANDLE_TH_ERRORS
  if (!arity(n, 6, "matmul_epilogue")) return nullptr;
  Args p{a};
  const Tensor* A = p.tensor(0);
  const Tensor* B = p.tensor(1);
  OptTensor bias = p.opt_tensor(2);
  const double alpha = p.real(3);
  const std::string_view act = p.str(4);
  const bool want_amax = p.boolean(5);
  if (!p.ok) return not_plain();
  using Sig = std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const OptTensor&, double,
                                         c10::string_view, bool);
  static const auto op = find_op<Sig>("dnngraph::matmul_epilogue");
  auto [y, m] = call_unboxed(op, *A, *B, bias, alpha, act, want_amax);
  if (!want_amax) return THPVariable_Wrap(std::move(y));
  return wrap_pair(std::move(y), std::move(m));
  END_HANDLE_TH_ERRORS
}

// conv2d_bias_act(x, w, bias, stride, padding, dilation, groups, act) -> y
PyObject* conv2d_bias_act(PyObject*, PyObject* const* a, Py_ssize_t n) {
  HANDLE_TH_ERRORS
  if (!arity(n, 8, "conv2d_bias_act")) return nullptr;
  Args p{a};
  const Tensor* x = p.tensor(0);
  const Tensor* w = p.tensor(1);
  OptTensor bias = p.opt_tensor(2);
  c10::SmallVector<int64_t, 8> stride, padding, dilation;
  p.ints(3, stride, 2);
  p.ints(4, padding, 2);
  p.ints(5, dilation, 2);
  const int64_t groups = p.integer(6);
  const std::string_view act = p.str(7);
  if (!p.ok) return not_plain();
  using Sig = Tensor(const Tensor&, const Tensor&, const OptTensor&, at::IntArrayRef,
                     at::IntArrayRef, at::IntArrayRef, int64_t, c10::string_view);
  static const auto op = find_op<Sig>("dnngraph::conv2d_bias_act");
  return THPVariable_Wrap(call_unboxed(op, *x, *w, bias, stride, padding, dilation, groups, act));
  END_HANDLE_TH_ERRORS
}

// sdpa(q, k, v, attn_bias, dropout_p, is_causal, scale, enable_gqa) -> out
PyObject* sdpa(PyObject*, PyObject* const* a, Py_ssize_t n) {
  HANDLE_TH_ERRORS
  if (!arity(n, 8, "sdpa")) return nullptr;
  Args p{a};
  const Tensor* q = p.tensor(0);
  const Tensor* k = p.tensor(1);
  const Tensor* v = p.tensor(2);
  OptTensor bias = p.opt_tensor(3);
  const double dropout_p = p.real(4);
  const bool causal = p.boolean(5);
  const std::optional<double> scale = p.opt_real(6);
  const bool gqa = p.boolean(7);
  if (!p.ok) return not_plain();
  using Sig =
      std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&, const OptTensor&,
                                 double, bool, std::optional<double>, bool);
  static const auto op = find_op<Sig>("dnngraph::sdpa");
  return THPVariable_Wrap(
      std::get<0>(call_unboxed(op, *q, *k, *v, bias, dropout_p, causal, scale, gqa)));
  END_HANDLE_TH_ERRORS
}

// add_rms_norm(x, residual, normalized_shape, weight, eps) -> (sum, y)
PyObject* add_rms_norm(PyObject*, PyObject* const* a, Py_ssize_t n) {
  HANDLE_TH_ERRORS
  if (!arity(n, 5, "add_rms_norm")) return nullptr;
  Args p{a};
  const Tensor* x = p.tensor(0);
  const Tensor* r = p.tensor(1);
  c10::SmallVector<int64_t, 8> shape;
  p.ints(2, shape, 1);
  OptTensor w = p.opt_tensor(3);
  const std::optional<double> eps = p.opt_real(4);
  if (!p.ok) return not_plain();
  using Sig = std::tuple<Tensor, Tensor, Tensor>(const Tensor&, const Tensor&, c10::SymIntArrayRef,
                                                 const OptTensor&, std::optional<double>);
  static const auto op = find_op<Sig>("dnngraph::add_rms_norm");
  auto [sum, y, rstd] = call_unboxed(op, *x, *r, c10::fromIntArrayRefSlow(shape), w, eps);
  return wrap_pair(std::move(sum), std::move(y));
  END_HANDLE_TH_ERRORS
}

// swiglu(z) -> y
PyObject* swiglu(PyObject*, PyObject* const* a, Py_ssize_t n) {
  HANDLE_TH_ERRORS
  if (!arity(n, 1, "swiglu")) return nullptr;
  Args p{a};
  const Tensor* z = p.tensor(0);
  if (!p.ok) return not_plain();
  static const auto op = find_op<Tensor(const Tensor&)>("dnngraph::swiglu");
  return THPVariable_Wrap(call_unboxed(op, *z));
  END_HANDLE_TH_ERRORS
}

// rope(x, cos, sin) -> y
PyObject* rope(PyObject*, PyObject* const* a, Py_ssize_t n) {
  HANDLE_TH_ERRORS
  if (!arity(n, 3, "rope")) return nullptr;
  Args p{a};
  const Tensor* x = p.tensor(0);
  const Tensor* c = p.tensor(1);
  const Tensor* s = p.tensor(2);
  if (!p.ok) return not_plain();
  static const auto op =
      find_op<Tensor(const Tensor&, const Tensor&, const Tensor&)>("dnngraph::rope");
  return THPVariable_Wrap(call_unboxed(op, *x, *c, *s));
  END_HANDLE_TH_ERRORS
}

PyMethodDef methods[] = {
    {"layer_norm", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&layer_norm)),
     METH_FASTCALL, "layer_norm(x, normalized_shape, weight, bias, eps) -> y"},
    {"rms_norm", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&rms_norm)),
     METH_FASTCALL, "rms_norm(x, normalized_shape, weight, eps) -> y"},
    {"linear_act", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&linear_act)),
     METH_FASTCALL, "linear_act(x, w, bias, act) -> y"},
    {"matmul_epilogue",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&matmul_epilogue)), METH_FASTCALL,
     "matmul_epilogue(a, b, bias, alpha, act, amax) -> y or (y, amax)"},
    {"conv2d_bias_act",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&conv2d_bias_act)), METH_FASTCALL,
     "conv2d_bias_act(x, w, bias, stride, padding, dilation, groups, act) -> y"},
    {"add_rms_norm", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&add_rms_norm)),
     METH_FASTCALL, "add_rms_norm(x, residual, normalized_shape, weight, eps) -> (sum, y)"},
    {"swiglu", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&swiglu)), METH_FASTCALL,
     "swiglu(z) -> y"},
    {"rope", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&rope)), METH_FASTCALL,
     "rope(x, cos, sin) -> y"},
    {"sdpa", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&sdpa)), METH_FASTCALL,
     "sdpa(q, k, v, attn_bias, dropout_p, is_causal, scale, enable_gqa) -> out"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT,
                      "_fast",
                      "Direct (unboxed) entries of dnngraph.torch's functional ops.",
                      -1,
                      methods,
                      nullptr,
                      nullptr,
                      nullptr,
                      nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__fast() { return PyModule_Create(&module); }
