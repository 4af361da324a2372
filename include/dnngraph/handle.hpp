// A handle binds the pipeline to a device (CPU reference engine or one CUDA GPU) and a stream.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

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

class Handle {
 public:
  // A CUDA handle fails with a clear error when no GPU (or no CUDA runtime) is present.
  static Result<std::shared_ptr<Handle>> create(Device device);

  const Device& device() const { return device_; }
  void* stream() const { return stream_; }
  // Records the stream; engines apply it lazily, only when it changed.
  void set_stream(void* stream) {
    if (stream != stream_) {
      stream_ = stream;
      ++stream_epoch_;
    }
  }
  uint64_t stream_epoch() const { return stream_epoch_; }

  // Engine-private per-handle state (e.g. the cudnnHandle_t), created by the engine.
  static constexpr int kEngineSlots = 4;
  std::shared_ptr<void>& engine_state(int slot) { return engine_state_[slot]; }

  explicit Handle(Device d) : device_(d) {}

 private:
  Device device_;
  void* stream_ = nullptr;
  uint64_t stream_epoch_ = 0;
  std::array<std::shared_ptr<void>, kEngineSlots> engine_state_{};
};

using HandlePtr = std::shared_ptr<Handle>;

}  // namespace dnngraph
