// cuDNN is loaded at run time (dlopen) so that dnngraph imports and its reference engine runs
// on machines without cuDNN or a GPU. This header has no cuDNN include: system_info() and the
// GPU tests read the load result without the cuDNN headers on their include path.
#pragma once

#include <cstdint>
#include <string>

namespace dnngraph::cudnn {

struct CudnnLoadInfo {
  bool loaded = false;
  int64_t version = 0;  // cudnnGetVersion(), e.g. 91900
  std::string path;     // the file dlopen resolved (or the name a reused copy answers to)
  std::string error;    // why cuDNN is not usable, when it is not
};

// Loads cuDNN on the first call (thread-safe) and returns the same result afterwards.
const CudnnLoadInfo& load_info();

}  // namespace dnngraph::cudnn
