// The GPUs this process sees and their properties, answered for the engine interface
// (registry.hpp's DeviceProvider): the only place the library asks the CUDA runtime for devices.
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "engines/registry.hpp"

namespace dnngraph::cudnn {

Result<DevicePropertiesPtr> properties_of(int device);  // device_properties.cpp

namespace {

Result<std::vector<std::string>> cuda_gpus() {
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
}

const DeviceProviderRegistrar kDevices(DeviceProvider{cuda_gpus, properties_of});

}  // namespace
}  // namespace dnngraph::cudnn
