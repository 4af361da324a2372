// Devices and handles (dnngraph/engines/handle.hpp), and the GPUs the process sees.
#include "dnngraph/engines/handle.hpp"

#include <string>

#include "engines/registry.hpp"

#ifdef DNNGRAPH_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace dnngraph {

std::string Device::to_string() const {
  return kind == Kind::CPU ? std::string("cpu") : "cuda:" + std::to_string(index);
}

Result<std::vector<std::string>> visible_gpus() {
#ifdef DNNGRAPH_WITH_CUDA
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return make_error(ErrorCode::NotSupported, "no CUDA device: ", cudaGetErrorString(err));
  }
  std::vector<std::string> gpus;
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    gpus.push_back(
        detail::cat(p.name, " (sm_", p.major, p.minor, ", ", p.totalGlobalMem >> 30, " GiB)"));
  }
  return gpus;
#else
  return make_error(ErrorCode::NotSupported, "dnngraph was built without CUDA");
#endif
}

Result<std::shared_ptr<Handle>> Handle::create(Device device) {
  if (device.kind == Device::Kind::CPU) return std::make_shared<Handle>(device);
  auto gpus = visible_gpus();
  if (!gpus)
    return make_error(ErrorCode::NotSupported, "cannot create a handle on ", device.to_string(),
                      ": ", gpus.status().message(),
                      " (use a cpu handle to run on the reference engine)");
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
