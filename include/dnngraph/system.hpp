// What this process can use: library version, cuDNN, GPUs. Never fails: what is missing is
// reported in the fields.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dnngraph {

struct SystemInfo {
  std::string dnngraph_version;
  bool cuda_built = false;  // the cuDNN engine was compiled in
  bool cudnn_loaded = false;
  int64_t cudnn_version = 0;      // e.g. 91900
  std::string cudnn_path;         // the file dlopen resolved
  std::string cudnn_error;        // why cuDNN is not usable, when it is not
  std::vector<std::string> gpus;  // "NVIDIA H200 (sm_90, 139 GiB)"
  std::string gpu_error;          // why no GPU is visible, when none is
};

SystemInfo system_info();

// The loaded cuDNN's version (e.g. 91900), loading it if needed; 0 when none can be loaded.
int64_t backend_version();
// "9.19.0", or the reason cuDNN is not available.
std::string backend_version_string();

}  // namespace dnngraph
