// What this process can use: library version, engines, GPUs. Never fails: what is missing is
// reported in the fields. (The cuDNN engine's own details: dnngraph/engines/cudnn.hpp.)
#pragma once

#include <string>
#include <vector>

#include "dnngraph/engines/interface.hpp"

namespace dnngraph {

struct EngineSummary {
  std::string name;     // "reference", "cudnn"
  BackendInfo backend;  // the library behind it, if any
};

struct SystemInfo {
  std::string dnngraph_version;
  std::vector<EngineSummary> engines;  // this build's engines, in the order the runtime asks them
  std::vector<std::string> gpus;       // "NVIDIA H200 (sm_90, 139 GiB)"
  std::string gpu_error;               // why no GPU is visible, when none is
};

SystemInfo system_info();

}  // namespace dnngraph
