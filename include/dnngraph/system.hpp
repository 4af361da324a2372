// What this process can use: library version, cuDNN, GPUs. Never fails: what is missing is
// reported in the fields.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dnngraph {

struct SystemInfo {
  std::string dnngraph_version;
  bool cuda_built = false;          // the cuDNN engine was compiled in
  bool cudnn_loaded = false;
  int64_t cudnn_version = 0;        // e.g. 91900
  std::string cudnn_path;           // the file dlopen resolved
  std::string cudnn_error;          // why cuDNN is not usable, when it is not
  std::vector<std::string> gpus;    // "NVIDIA H200 (sm_90, 139 GiB)"
  std::string gpu_error;            // why no GPU is visible, when none is
};

SystemInfo system_info();

}  // namespace dnngraph
