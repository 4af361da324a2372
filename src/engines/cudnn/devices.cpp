// The GPUs this process sees and their properties, answered for the engine interface
// (registry.hpp's DeviceProvider): the only place the library asks the CUDA runtime for devices.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "engines/registry.hpp"

namespace dnngraph::cudnn {

Result<DevicePropertiesPtr> properties_of(int device);  // device_properties.cpp

namespace {

// "X.Y" of a CUDA version number (12080 -> "12.8").
std::string cuda_version(int v) { return detail::cat(v / 1000, ".", v % 1000 / 10); }

// Why cudaGetDeviceCount found no GPU (err), in the user's terms rather than the runtime's:
// without a driver the runtime says "driver version is insufficient", which points the wrong
// way on a machine that has no GPU at all.
Status no_gpu(cudaError_t err) {
  int driver = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  cudaGetLastError();  // clear the sticky error so later calls start clean
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (err == cudaErrorInsufficientDriver && driver > 0)
    return make_error(ErrorCode::NotSupported, "the NVIDIA driver supports CUDA up to ",
                      cuda_version(driver), ", older than the CUDA ", cuda_version(CUDART_VERSION),
                      " runtime dnngraph was built with: update "
                      "the driver");
  if (err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice || err == cudaSuccess) {
    if (visible && driver > 0)
      return make_error(ErrorCode::NotSupported,
                        "no NVIDIA GPU visible (CUDA_VISIBLE_DEVICES=", visible, ")");
    return make_error(ErrorCode::NotSupported, "no NVIDIA GPU or driver on this machine");
  }
  return make_error(ErrorCode::NotSupported,
                    "the CUDA runtime could not list the GPUs: ", cudaGetErrorName(err), " (",
                    cudaGetErrorString(err), ")");
}

Result<std::vector<std::string>> cuda_gpus() {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess || n == 0) return no_gpu(err);
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
