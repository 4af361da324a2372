// Devices and handles (dnngraph/engines/handle.hpp), and the GPUs the process sees (asked of
// the engine that provides them, registry.hpp).
#include "dnngraph/engines/handle.hpp"

#include <optional>
#include <string>

#include "engines/registry.hpp"

namespace dnngraph {

std::string Device::to_string() const {
  return kind == Kind::CPU ? std::string("cpu") : "cuda:" + std::to_string(index);
}

namespace {
constexpr const char* kCpuHandleHint = "use Handle::create(Device::cpu()) for the reference engine";

std::optional<DeviceProvider>& device_provider() {
  static std::optional<DeviceProvider> p;
  return p;
}
}  // namespace

DeviceProviderRegistrar::DeviceProviderRegistrar(DeviceProvider provider) {
  device_provider() = provider;
}

Result<std::vector<std::string>> visible_gpus() {
  if (device_provider()) return device_provider()->visible_gpus();
  return make_error(ErrorCode::NotSupported, "dnngraph was built without CUDA");
}

Result<DevicePropertiesPtr> DeviceProperties::from_device(int device) {
  if (device_provider()) return device_provider()->properties(device);
  return make_error(ErrorCode::NotSupported, "device properties of cuda:", device,
                    ": dnngraph was built without the cuDNN engine");
}

Result<std::shared_ptr<Handle>> Handle::create(Device device) {
  if (device.kind == Device::Kind::CPU) return std::make_shared<Handle>(device);
  auto gpus = visible_gpus();
  if (!gpus)
    return make_error(ErrorCode::NotSupported, "cannot create a handle on ", device.to_string(),
                      ": ", gpus.status().message(), "; ", kCpuHandleHint);
  if (device.index < 0 || device.index >= static_cast<int>(gpus->size()))
    return make_error(ErrorCode::InvalidArgument, "cannot create a handle on ", device.to_string(),
                      ": ", gpus->size(), " CUDA device(s) visible");
  return std::make_shared<Handle>(device);
}

Result<std::shared_ptr<Handle>> Handle::create_deviceless(DevicePropertiesPtr target) {
  if (!target)
    return make_error(ErrorCode::InvalidArgument,
                      "create_deviceless: no device properties given (make them with "
                      "DeviceProperties::from_json or from_device)");
  const Device d = Device::cuda(target->device_id());
  return std::make_shared<Handle>(d, std::move(target));
}

}  // namespace dnngraph
