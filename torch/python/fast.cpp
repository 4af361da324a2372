// dnngraph.torch._fast: a direct Python entry for each functional op, the way torch's own
// generated bindings call ATen: arguments converted straight to C++ values, the op called
// unboxed through the dispatcher (so autograd, Meta and every other key work as usual).
// A call through torch.ops.dnngraph.<op> instead converts every argument to an IValue against
// the schema and calls the kernel boxed, which costs about as much as the op's own hot path.
//
// The entries are one table (methods, at the end): each line names the op, its C++ result, how
// the result is returned and the kind of each argument; Entry makes the function from it.
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
#include <string>
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

// An entry's name as a template argument, so that each entry is its own function (with its
// own static operator handle).
template <size_t N>
struct Name {
  char s[N];
  constexpr Name(const char (&n)[N]) {  // NOLINT(google-explicit-constructor)
    for (size_t i = 0; i < N; ++i) s[i] = n[i];
  }
};

// ---- argument kinds: how one Python argument becomes the C++ value the op takes ----
// Each kind has Value (what parsing keeps), Param (the op's C++ parameter type), parse()
// (from argument i; turns Args::ok false when the argument is not plain) and pass() (Value to
// Param).
struct Tens {  // a tensor
  using Value = const Tensor*;
  using Param = const Tensor&;
  static Value parse(Args& p, Py_ssize_t i) { return p.tensor(i); }
  static const Tensor& pass(Value v) { return *v; }
};
struct OptTens {  // a tensor or None
  using Value = OptTensor;
  using Param = const OptTensor&;
  static Value parse(Args& p, Py_ssize_t i) { return p.opt_tensor(i); }
  static const OptTensor& pass(const Value& v) { return v; }
};
struct Real {  // a float (or an int)
  using Value = double;
  using Param = double;
  static Value parse(Args& p, Py_ssize_t i) { return p.real(i); }
  static double pass(Value v) { return v; }
};
struct OptReal {  // a float, an int or None
  using Value = std::optional<double>;
  using Param = std::optional<double>;
  static Value parse(Args& p, Py_ssize_t i) { return p.opt_real(i); }
  static Value pass(Value v) { return v; }
};
struct Int {
  using Value = int64_t;
  using Param = int64_t;
  static Value parse(Args& p, Py_ssize_t i) { return p.integer(i); }
  static int64_t pass(Value v) { return v; }
};
struct Bool {
  using Value = bool;
  using Param = bool;
  static Value parse(Args& p, Py_ssize_t i) { return p.boolean(i); }
  static bool pass(Value v) { return v; }
};
struct Str {
  using Value = std::string_view;
  using Param = c10::string_view;
  static Value parse(Args& p, Py_ssize_t i) { return p.str(i); }
  static c10::string_view pass(Value v) { return v; }
};
// An int or a list/tuple of ints, as int[Repeat] (an int stands for Repeat copies).
template <size_t Repeat>
struct Ints {
  using Value = c10::SmallVector<int64_t, 8>;
  using Param = at::IntArrayRef;
  static Value parse(Args& p, Py_ssize_t i) {
    Value v;
    p.ints(i, v, Repeat);
    return v;
  }
  static at::IntArrayRef pass(const Value& v) { return v; }
};
// A normalized_shape: an int or a list/tuple of ints, as SymInt[].
struct Shape {
  using Value = c10::SmallVector<int64_t, 8>;
  using Param = c10::SymIntArrayRef;
  static Value parse(Args& p, Py_ssize_t i) { return Ints<1>::parse(p, i); }
  static c10::SymIntArrayRef pass(const Value& v) { return c10::fromIntArrayRefSlow(v); }
};

// The parsed arguments of one call: argument I of kind K in Slot<I, K>. An aggregate, so that
// each value is parsed straight into its place (a std::tuple would move it there).
template <size_t I, class K>
struct Slot {
  typename K::Value value;
};
template <class Seq, class... Kinds>
struct Slots;
template <size_t... I, class... Kinds>
struct Slots<std::index_sequence<I...>, Kinds...> : Slot<I, Kinds>... {};
// Argument I of parsed arguments `v`.
template <size_t I, class K>
const typename K::Value& arg(const Slot<I, K>& v) {
  return v.value;
}

// ---- results: how the op's result becomes the Python value ----
struct Plain {  // a tensor
  template <class V>
  static PyObject* wrap(Tensor y, const V&) {
    return THPVariable_Wrap(std::move(y));
  }
};
struct First {  // the first tensor of a tuple (the others are saved for backward)
  template <class R, class V>
  static PyObject* wrap(R r, const V&) {
    return THPVariable_Wrap(std::move(std::get<0>(r)));
  }
};
// (y, m) as a tuple of two tensors, or y alone when Flag (the index of a Bool argument) names
// a false one; Flag -1: always the pair.
template <int Flag = -1>
struct Pair {
  template <class R, class V>
  static PyObject* wrap(R r, const V& v) {
    if constexpr (Flag >= 0) {
      if (!arg<Flag>(v)) return THPVariable_Wrap(std::move(std::get<0>(r)));
    }
    PyObject* t = PyTuple_New(2);
    if (!t) return nullptr;
    PyTuple_SET_ITEM(t, 0, THPVariable_Wrap(std::move(std::get<0>(r))));
    PyTuple_SET_ITEM(t, 1, THPVariable_Wrap(std::move(std::get<1>(r))));
    return t;
  }
};

// The entry `_fast.<N>` for op dnngraph::<N> of C++ result type Ret and arguments Kinds...:
// parses the arguments (NotImplemented when one is not plain), calls the op unboxed without
// the GIL, and wraps the result through Out.
template <Name N, class Ret, class Out, class... Kinds>
struct Entry {
  static constexpr const char* name = N.s;
  static PyObject* call(PyObject*, PyObject* const* a, Py_ssize_t n) {
    HANDLE_TH_ERRORS
    return parse_and_call(a, n, std::index_sequence_for<Kinds...>{});
    END_HANDLE_TH_ERRORS
  }

 private:
  template <size_t... I>
  static PyObject* parse_and_call(PyObject* const* a, Py_ssize_t n, std::index_sequence<I...>) {
    constexpr Py_ssize_t want = sizeof...(Kinds);
    if (n != want) {
      PyErr_Format(PyExc_TypeError, "dnngraph.torch._fast.%s takes %zd arguments (%zd given)", N.s,
                   want, n);
      return nullptr;
    }
    Args p{a};
    // Braces: the arguments are parsed left to right.
    const Slots<std::index_sequence<I...>, Kinds...> v{{Kinds::parse(p, I)}...};
    if (!p.ok) Py_RETURN_NOTIMPLEMENTED;
    using Sig = Ret(typename Kinds::Param...);
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow((std::string("dnngraph::") + N.s).c_str(), "")
                               .template typed<Sig>();
    Ret r = [&] {
      NoGil nogil;
      return op.call(Kinds::pass(arg<I>(v))...);
    }();
    return Out::wrap(std::move(r), v);
  }
};

// The ops and their C++ signatures (torch/ops/*.cpp registers the schemas).
using T2 = std::tuple<Tensor, Tensor>;
using T3 = std::tuple<Tensor, Tensor, Tensor>;
template <class E>
constexpr PyMethodDef def(const char* doc) {
  return {E::name, reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&E::call)),
          METH_FASTCALL, doc};
}

PyMethodDef methods[] = {
    def<Entry<"layer_norm", T3, First, Tens, Shape, OptTens, OptTens, Real>>(
        "layer_norm(x, normalized_shape, weight, bias, eps) -> y"),
    def<Entry<"rms_norm", T2, First, Tens, Shape, OptTens, OptReal>>(
        "rms_norm(x, normalized_shape, weight, eps) -> y"),
    def<Entry<"linear_act", Tensor, Plain, Tens, Tens, OptTens, Str>>(
        "linear_act(x, w, bias, act) -> y"),
    def<Entry<"matmul_epilogue", T2, Pair<5>, Tens, Tens, OptTens, Real, Str, Bool>>(
        "matmul_epilogue(a, b, bias, alpha, act, amax) -> y or (y, amax)"),
    def<Entry<"conv2d_bias_act", Tensor, Plain, Tens, Tens, OptTens, Ints<2>, Ints<2>, Ints<2>, Int,
              Str>>("conv2d_bias_act(x, w, bias, stride, padding, dilation, groups, act) -> y"),
    def<Entry<"add_rms_norm", T3, Pair<>, Tens, Tens, Shape, OptTens, OptReal>>(
        "add_rms_norm(x, residual, normalized_shape, weight, eps) -> (sum, y)"),
    def<Entry<"swiglu", Tensor, Plain, Tens>>("swiglu(z) -> y"),
    def<Entry<"rope", Tensor, Plain, Tens, Tens, Tens>>("rope(x, cos, sin) -> y"),
    def<Entry<"sdpa", T2, First, Tens, Tens, Tens, OptTens, Real, Bool, OptReal, Bool>>(
        "sdpa(q, k, v, attn_bias, dropout_p, is_causal, scale, enable_gqa) -> out"),
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
