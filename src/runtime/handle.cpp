// Handles, the engine registry and what the process can use (system_info).
#include <algorithm>
#include <mutex>
#include <string>

#include "dnngraph/engine.hpp"
#include "dnngraph/handle.hpp"
#include "dnngraph/system.hpp"
#include "dnngraph/version.hpp"

#ifdef DNNGRAPH_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace dnngraph {

std::string Device::to_string() const {
  return kind == Kind::CPU ? std::string("cpu") : "cuda:" + std::to_string(index);
}

#ifndef DNNGRAPH_WITH_CUDA
Engine* cudnn_engine() { return nullptr; }
#endif

namespace {
std::mutex& extra_mu() {
  static std::mutex mu;
  return mu;
}
std::vector<Engine*>& extra_engines() {
  static std::vector<Engine*> v;
  return v;
}
}  // namespace

void register_engine(Engine* engine) {
  std::lock_guard<std::mutex> lock(extra_mu());
  extra_engines().insert(extra_engines().begin(), engine);
}

void unregister_engine(Engine* engine) {
  std::lock_guard<std::mutex> lock(extra_mu());
  auto& v = extra_engines();
  v.erase(std::remove(v.begin(), v.end(), engine), v.end());
}

std::vector<Engine*> registered_engines() {
  std::vector<Engine*> e;
  {
    std::lock_guard<std::mutex> lock(extra_mu());
    e = extra_engines();
  }
  e.push_back(&reference_engine());
  if (Engine* c = cudnn_engine()) e.push_back(c);
  return e;
}

namespace {

// GPUs visible to the CUDA runtime, or the reason none is.
Result<std::vector<std::string>> list_gpus() {
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

}  // namespace

Result<std::shared_ptr<Handle>> Handle::create(Device device) {
  if (device.kind == Device::Kind::CPU) return std::make_shared<Handle>(device);
  auto gpus = list_gpus();
  if (!gpus)
    return make_error(ErrorCode::NotSupported, "cannot create a handle on ", device.to_string(),
                      ": ", gpus.status().message(),
                      " (use a cpu handle to run on the reference engine)");
  if (device.index < 0 || device.index >= static_cast<int>(gpus->size()))
    return make_error(ErrorCode::InvalidArgument, "cannot create a handle on ", device.to_string(),
                      ": ", gpus->size(), " CUDA device(s) visible");
  return std::make_shared<Handle>(device);
}

SystemInfo system_info() {
  SystemInfo s;
  s.dnngraph_version = version();
  Engine* c = cudnn_engine();
  s.cuda_built = c != nullptr;
  if (c) {
    BackendInfo b = c->backend_info();
    s.cudnn_loaded = b.available;
    s.cudnn_version = b.version;
    s.cudnn_path = b.library_path;
    s.cudnn_error = b.error;
  } else {
    s.cudnn_error = "dnngraph was built without the cuDNN engine";
  }
  auto gpus = list_gpus();
  if (gpus) {
    s.gpus = *gpus;
    if (s.gpus.empty()) s.gpu_error = "no CUDA device visible";
  } else {
    s.gpu_error = gpus.status().message();
  }
  return s;
}

int64_t backend_version() {
  Engine* c = cudnn_engine();
  return c ? c->backend_info().version : 0;
}

std::string backend_version_string() {
  Engine* c = cudnn_engine();
  if (!c) return "cuDNN not available: dnngraph was built without the cuDNN engine";
  BackendInfo b = c->backend_info();
  if (!b.available) return "cuDNN not available: " + b.error;
  return detail::cat(b.version / 10000, ".", (b.version / 100) % 100, ".", b.version % 100);
}

}  // namespace dnngraph
