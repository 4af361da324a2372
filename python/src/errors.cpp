// C++ Status -> Python exceptions. The message is always the library's own, which names the op
// and the tensor.
#include "common.hpp"

namespace dnngraph::py {

void throw_if_error(const Status& s) {
  switch (s.code()) {
    case ErrorCode::Ok:
      return;
    case ErrorCode::InvalidGraph:
    case ErrorCode::InvalidArgument:
      throw nb::value_error(s.message().c_str());
    case ErrorCode::NotSupported:
      throw NotSupportedException(s.message());
    case ErrorCode::BackendError:
    case ErrorCode::Internal:
      break;
  }
  // The code name tells a backend failure from a dnngraph bug.
  throw std::runtime_error(s.to_string());
}

void bind_errors(nb::module_& m) {
  nb::exception<NotSupportedException>(m, "NotSupportedError", PyExc_RuntimeError);
}

}  // namespace dnngraph::py
