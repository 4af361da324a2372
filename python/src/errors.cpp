// C++ Status -> Python exceptions. The message is always the library's own, which names the op
// and the tensor.
#include "common.hpp"

namespace dnngraph::py {

std::string printable(const std::string& text) {
  // Messages may quote user bytes (names, blob fragments): invalid UTF-8 becomes \xNN escapes
  // rather than a UnicodeDecodeError in place of the error.
  PyObject* u =
      PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "backslashreplace");
  if (!u) {
    PyErr_Clear();
    return "(message not printable)";
  }
  Py_ssize_t n = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(u, &n);
  std::string out = utf8 ? std::string(utf8, static_cast<size_t>(n)) : std::string();
  if (!utf8) PyErr_Clear();
  Py_DECREF(u);
  return out;
}

void throw_if_error(const Status& s) {
  switch (s.code()) {
    case ErrorCode::Ok:
      return;
    case ErrorCode::InvalidGraph:
    case ErrorCode::InvalidArgument:
      throw nb::value_error(printable(s.message()).c_str());
    case ErrorCode::NotSupported:
      throw NotSupportedException(printable(s.message()));
    case ErrorCode::BackendError:
    case ErrorCode::Internal:
      break;
  }
  // The code name tells a backend failure from a dnngraph bug.
  throw std::runtime_error(printable(s.to_string()));
}

void bind_errors(nb::module_& m) {
  nb::exception<NotSupportedException>(m, "NotSupportedError", PyExc_RuntimeError);
}

}  // namespace dnngraph::py
