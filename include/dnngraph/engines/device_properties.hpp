// What a GPU is, as cuDNN describes it to plan for it: the target of a deviceless
// (ahead-of-time) build. A graph built for DeviceProperties is lowered, given its heuristics and
// has its plans finalized with no GPU and no cuDNN handle, then serialized; the bytes are
// deserialized with a handle on a GPU of that kind and executed there (docs/cudnn-engine.md).
//
// The text form is cuDNN's own (CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, cuDNN >= 9.8): a JSON
// object with fields such as "deviceVer" (compute capability * 100, e.g. 900 for 9.0),
// "multiProcessorCount" and "deviceName". from_json() checks the fields dnngraph reads; cuDNN
// checks the rest when a graph is built for the properties.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "dnngraph/status.hpp"

namespace dnngraph {

class Handle;
class DeviceProperties;
using DevicePropertiesPtr = std::shared_ptr<const DeviceProperties>;

class DeviceProperties {
 public:
  // From the JSON text of to_json() (or of the frontend's DeviceProperties.serialize()).
  // InvalidArgument, naming the field, when the text is not such an object.
  static Result<DevicePropertiesPtr> from_json(std::string_view json);
  // The properties of CUDA device `device`, as cuDNN reads them (needs the cuDNN engine,
  // cuDNN >= 9.8 and the GPU).
  static Result<DevicePropertiesPtr> from_device(int device);
  // The properties of a handle's device: the target of a deviceless handle, else those of its
  // GPU (from_device).
  static Result<DevicePropertiesPtr> from_handle(const Handle& handle);

  const std::string& to_json() const { return json_; }
  const std::string& device_name() const { return name_; }
  int64_t device_version() const { return device_version_; }  // e.g. 900
  std::string compute_capability() const;                     // e.g. "9.0"
  int64_t sm_count() const { return sm_count_; }
  int device_id() const { return device_id_; }  // "cudaDeviceId", 0 when absent
  // Bytes of shared memory one block may opt into; -1 when the JSON does not say.
  int64_t max_shared_memory_per_block_optin() const { return smem_optin_; }
  // "NVIDIA H200 (compute capability 9.0, 132 SMs)".
  std::string describe() const;
  // What differs between this (the target) and `device`: "" when the compute capability, the
  // SM count and the name agree, else e.g. "compute capability 9.0 here, 8.0 on the device".
  std::string differences(const DeviceProperties& device) const;
  // Whether a plan built for this target can run on `device` (same compute capability).
  bool compatible_with(const DeviceProperties& device) const {
    return device_version_ == device.device_version_;
  }

 private:
  std::string json_;
  std::string name_;
  int64_t device_version_ = 0;
  int64_t sm_count_ = 0;
  int device_id_ = 0;
  int64_t smem_optin_ = -1;
};

}  // namespace dnngraph
