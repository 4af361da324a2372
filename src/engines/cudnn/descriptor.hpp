// RAII ownership of cudnnBackendDescriptor_t and the one helper through which every attribute
// is set, so that errors always carry cuDNN's own explanation and the name of what was built.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dnngraph/status.hpp"
#include "engines/cudnn/api.hpp"

namespace dnngraph::cudnn {

// Status for a cuDNN return code: Ok on success, else `code_if_failed` (NotSupported for the
// CUDNN_STATUS_NOT_SUPPORTED family) with "<context>: <what> failed: <cuDNN status> (<last
// error string>)".
Status check(cudnnStatus_t s, std::string_view context, std::string_view what,
             ErrorCode code_if_failed = ErrorCode::BackendError);

class Descriptor {
 public:
  Descriptor() = default;
  ~Descriptor();
  Descriptor(Descriptor&& o) noexcept
      : d_(std::exchange(o.d_, nullptr)), what_(std::move(o.what_)) {}
  Descriptor& operator=(Descriptor&& o) noexcept;
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;

  // `what` names the thing for error messages, e.g. "matmul 'mm0'" or "tensor 'X'".
  static Result<Descriptor> create(cudnnBackendDescriptorType_t type, std::string what);

  cudnnBackendDescriptor_t get() const { return d_; }
  const std::string& what() const { return what_; }
  explicit operator bool() const { return d_ != nullptr; }

  // The single attribute setter; the overloads below only supply count and address.
  Status set(cudnnBackendAttributeName_t attr, cudnnBackendAttributeType_t type, int64_t count,
             const void* data);
  template <class T>
  Status set(cudnnBackendAttributeName_t attr, cudnnBackendAttributeType_t type, const T& v) {
    return set(attr, type, 1, &v);
  }
  template <class T>
  Status set(cudnnBackendAttributeName_t attr, cudnnBackendAttributeType_t type,
             const std::vector<T>& v) {
    return set(attr, type, static_cast<int64_t>(v.size()), v.data());
  }
  // A descriptor-valued attribute.
  Status set(cudnnBackendAttributeName_t attr, const Descriptor& d) {
    cudnnBackendDescriptor_t raw = d.get();
    return set(attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
  }
  Status set(cudnnBackendAttributeName_t attr, cudnnBackendDescriptor_t raw) {
    return set(attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
  }

  Status finalize(ErrorCode code_if_failed = ErrorCode::BackendError);
  Status get(cudnnBackendAttributeName_t attr, cudnnBackendAttributeType_t type, int64_t requested,
             int64_t* count, void* out) const;

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
  std::string what_;
};

// Name of a cuDNN data type / numerical note / behaviour note / knob, for messages and names.
std::string_view numerical_note_name(int note);
std::string_view behavior_note_name(int note);
std::string knob_name(int knob);

}  // namespace dnngraph::cudnn
