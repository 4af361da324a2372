// One error model for the whole library: Status and Result<T>.
// Messages name the op and the tensor by name and say what was expected and what was found.
#pragma once

#include <cassert>
#include <sstream>
#include <string>
#include <utility>
#include <variant>

namespace dnngraph {

enum class ErrorCode {
  Ok = 0,
  InvalidGraph,     // the graph is inconsistent (shapes, dtypes, wiring)
  InvalidArgument,  // bad input at call time: variant pack, workspace, arguments
  NotSupported,     // no engine (candidate) can run this graph
  BackendError,     // the backend (cuDNN, CUDA) failed
  Internal,         // a bug in dnngraph
};

const char* error_code_name(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  bool is_ok() const { return code_ == ErrorCode::Ok; }
  explicit operator bool() const { return is_ok(); }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidGraph: matmul 'mm': ..." - one line for logs and CLIs.
  std::string to_string() const;

 private:
  ErrorCode code_ = ErrorCode::Ok;
  std::string message_;
};

// A value or the error that prevented it; never both, never neither.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  // `status` must be an error. An OK status here is a bug in the caller: debug builds stop on
  // the assert; release builds turn it into an Internal error rather than a result that has
  // neither a value nor an error.
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<1>(v_).is_ok() && "Result made from an OK Status without a value");
    if (std::get<1>(v_).is_ok())
      v_ = Status(ErrorCode::Internal,
                  "a result was made from an OK status without a value (a bug in dnngraph: "
                  "please report it with the call that returned it)");
  }

  bool is_ok() const { return v_.index() == 0; }
  explicit operator bool() const { return is_ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  Status status() const { return is_ok() ? Status::ok() : std::get<1>(v_); }

 private:
  std::variant<T, Status> v_;
};

namespace detail {
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

// make_error(ErrorCode::InvalidGraph, "matmul '", name, "': expected ...")
template <class... Args>
Status make_error(ErrorCode code, const Args&... args) {
  return Status(code, detail::cat(args...));
}

}  // namespace dnngraph

// Propagate a failed Status (or the Status of a failed Result) to the caller.
#define DNNGRAPH_TRY(expr)                                \
  do {                                                    \
    ::dnngraph::Status dnngraph_try_s_ = (expr);          \
    if (!dnngraph_try_s_.is_ok()) return dnngraph_try_s_; \
  } while (0)

// Evaluate `expr` (a Result<T>); on error return its Status, else move its value into `lhs`,
// which may declare a variable:
//   DNNGRAPH_ASSIGN_OR_RETURN(auto desc, Descriptor::create(kind, what));
//   DNNGRAPH_ASSIGN_OR_RETURN(plan, build_plan(candidate));
// A statement, not an expression: one per line, not as the body of an unbraced if.
#define DNNGRAPH_ASSIGN_OR_RETURN(lhs, expr) \
  DNNGRAPH_ASSIGN_OR_RETURN_IMPL_(DNNGRAPH_CONCAT_(dnngraph_result_, __LINE__), lhs, expr)
#define DNNGRAPH_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                    \
  if (!tmp.is_ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
#define DNNGRAPH_CONCAT_(a, b) DNNGRAPH_CONCAT_IMPL_(a, b)
#define DNNGRAPH_CONCAT_IMPL_(a, b) a##b
