// A handle binds the pipeline to a device (CPU reference engine or one CUDA GPU) and a stream,
// and holds each engine's per-handle state (e.g. the cuDNN engine's cudnnHandle_t).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <typeindex>
#include <typeinfo>
#include <utility>
#include <vector>

#include "dnngraph/engines/device_properties.hpp"
#include "dnngraph/status.hpp"

namespace dnngraph {

struct Device {
  enum class Kind { CPU, CUDA };
  Kind kind = Kind::CUDA;
  int index = 0;
  static Device cpu() { return {Kind::CPU, 0}; }
  static Device cuda(int i = 0) { return {Kind::CUDA, i}; }
  bool operator==(const Device&) const = default;
  std::string to_string() const;  // "cpu", "cuda:0"
};

// Base of an engine's per-handle state. An engine derives one type from it and reaches it
// through Handle::engine_state<T>().
class EngineState {
 public:
  virtual ~EngineState() = default;
};

class Handle {
 public:
  // A CUDA handle fails with a clear error when no GPU (or no CUDA runtime) is present.
  static Result<std::shared_ptr<Handle>> create(Device device);

  // A deviceless handle: no GPU, no cuDNN handle, only the properties of the GPU to plan for
  // (device_properties.hpp). Graphs built on it are built ahead of time: they serialize, but
  // execute only after deserialize() onto a handle on a GPU of that kind.
  static Result<std::shared_ptr<Handle>> create_deviceless(DevicePropertiesPtr target);

  explicit Handle(Device d) : device_(d) {}
  Handle(Device d, DevicePropertiesPtr target) : device_(d), target_(std::move(target)) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  const Device& device() const { return device_; }
  // The GPU a deviceless handle plans for; null on a handle on a device.
  const DevicePropertiesPtr& target() const { return target_; }
  void* stream() const { return stream_.load(std::memory_order_acquire); }
  // Records the stream; engines apply it lazily, only when it changed. Safe to call while
  // other threads execute on this handle (they pick the stream up at their next call).
  void set_stream(void* stream) {
    if (stream_.exchange(stream, std::memory_order_acq_rel) != stream)
      stream_epoch_.fetch_add(1, std::memory_order_acq_rel);
  }
  // Moves each time the stream changes. Read it before stream(): a reader that sees an epoch
  // also sees the stream set before it (or a newer one).
  uint64_t stream_epoch() const { return stream_epoch_.load(std::memory_order_acquire); }

  // The engine state of type T on this handle, made by `make()` (a Result<std::unique_ptr<T>>)
  // on first use. Thread-safe: the state is made once, under the handle's lock, and every
  // lookup takes that lock. A failed make() leaves nothing behind, so a later call retries.
  template <class T, class Make>
  Result<T*> engine_state(Make&& make) {
    static_assert(std::is_base_of_v<EngineState, T>, "engine state derives from EngineState");
    std::lock_guard<std::mutex> lock(engine_state_mu_);
    for (auto& [type, state] : engine_state_)
      if (type == std::type_index(typeid(T))) return static_cast<T*>(state.get());
    Result<std::unique_ptr<T>> made = std::forward<Make>(make)();
    if (!made) return made.status();
    T* raw = made.value().get();
    engine_state_.emplace_back(std::type_index(typeid(T)), std::move(made).value());
    return raw;
  }

 private:
  const Device device_;
  const DevicePropertiesPtr target_;
  std::atomic<void*> stream_{nullptr};
  std::atomic<uint64_t> stream_epoch_{0};
  std::mutex engine_state_mu_;
  std::vector<std::pair<std::type_index, std::unique_ptr<EngineState>>> engine_state_;
};

using HandlePtr = std::shared_ptr<Handle>;

}  // namespace dnngraph
