// DeviceProperties (dnngraph/engines/device_properties.hpp): the JSON text and the fields dnngraph
// reads from it. from_device() asks cuDNN and lives with the cuDNN engine
// (engines/cudnn/device_properties.cpp, or unavailable.cpp in builds without it).
#include "dnngraph/engines/device_properties.hpp"

#include <nlohmann/json.hpp>

#include "dnngraph/engines/handle.hpp"

namespace dnngraph {
namespace {

constexpr const char* kWhat = "device properties JSON";

// An integer field: required ones must be present; -1 marks an absent optional one.
Result<int64_t> integer_field(const nlohmann::json& j, const char* key, bool required) {
  auto it = j.find(key);
  if (it == j.end()) {
    if (!required) return int64_t{-1};
    return make_error(ErrorCode::InvalidArgument, kWhat, ": field '", key,
                      "' is missing; pass the text DeviceProperties::to_json() (or the "
                      "frontend's DeviceProperties.serialize()) produced");
  }
  if (!it->is_number_integer())
    return make_error(ErrorCode::InvalidArgument, kWhat, ": field '", key,
                      "' must be an integer, found ", it->dump());
  return it->get<int64_t>();
}

std::string capability(int64_t device_version) {
  return detail::cat(device_version / 100, ".", (device_version % 100) / 10);
}

}  // namespace

Result<DevicePropertiesPtr> DeviceProperties::from_json(std::string_view json) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json);
  } catch (const std::exception& e) {
    return make_error(ErrorCode::InvalidArgument, kWhat, " does not parse: ", e.what());
  }
  if (!j.is_object())
    return make_error(ErrorCode::InvalidArgument, kWhat, ": expected an object, found ",
                      j.type_name());
  auto p = std::make_shared<DeviceProperties>();
  DNNGRAPH_ASSIGN_OR_RETURN(p->device_version_, integer_field(j, "deviceVer", true));
  DNNGRAPH_ASSIGN_OR_RETURN(p->sm_count_, integer_field(j, "multiProcessorCount", true));
  DNNGRAPH_ASSIGN_OR_RETURN(int64_t id, integer_field(j, "cudaDeviceId", false));
  DNNGRAPH_ASSIGN_OR_RETURN(p->smem_optin_,
                            integer_field(j, "maxSharedMemoryPerBlockOptin", false));
  if (p->device_version_ <= 0 || p->sm_count_ <= 0)
    return make_error(ErrorCode::InvalidArgument, kWhat,
                      ": 'deviceVer' and 'multiProcessorCount' must be positive, found ",
                      p->device_version_, " and ", p->sm_count_);
  p->device_id_ = id < 0 ? 0 : static_cast<int>(id);
  auto name = j.find("deviceName");
  if (name != j.end() && !name->is_string())
    return make_error(ErrorCode::InvalidArgument, kWhat,
                      ": field 'deviceName' must be a string, found ", name->dump());
  p->name_ = name != j.end() ? name->get<std::string>() : std::string("unnamed GPU");
  p->json_ = std::string(json);
  return DevicePropertiesPtr(std::move(p));
}

Result<DevicePropertiesPtr> DeviceProperties::from_handle(const Handle& handle) {
  if (handle.target()) return handle.target();
  if (handle.device().kind != Device::Kind::CUDA)
    return make_error(ErrorCode::InvalidArgument,
                      "device properties describe a CUDA GPU, but the handle is on ",
                      handle.device().to_string());
  return from_device(handle.device().index);
}

std::string DeviceProperties::compute_capability() const { return capability(device_version_); }

std::string DeviceProperties::describe() const {
  return detail::cat(name_, " (compute capability ", compute_capability(), ", ", sm_count_,
                     " SMs)");
}

std::string DeviceProperties::differences(const DeviceProperties& device) const {
  std::string out;
  auto add = [&out](const std::string& field, const std::string& here, const std::string& there) {
    out += detail::cat(out.empty() ? "" : ", ", field, " ", here, " in the target, ", there,
                       " on the device");
  };
  if (device_version_ != device.device_version_)
    add("compute capability", compute_capability(), device.compute_capability());
  if (sm_count_ != device.sm_count_)
    add("SM count", std::to_string(sm_count_), std::to_string(device.sm_count_));
  if (name_ != device.name_) add("name", "'" + name_ + "'", "'" + device.name_ + "'");
  return out;
}

}  // namespace dnngraph
