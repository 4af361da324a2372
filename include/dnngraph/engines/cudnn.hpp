// What only the cuDNN engine has: the cuDNN library it loaded (at run time, with dlopen).
// Available in every build: without the cuDNN engine, cudnn_info().built is false.
#pragma once

#include <cstdint>
#include <string>

namespace dnngraph {

struct CudnnInfo {
  bool built = false;        // the cuDNN engine was compiled in
  bool loaded = false;       // the library was loaded and is usable
  int64_t version = 0;       // cudnnGetVersion(), e.g. 91900
  std::string library_path;  // the file dlopen resolved
  std::string error;         // why cuDNN is not usable, when it is not
};

// Loads cuDNN on the first call (thread-safe); never fails: what is missing is in `error`.
CudnnInfo cudnn_info();

// The loaded cuDNN's version (e.g. 91900), loading it if needed; 0 when none can be loaded.
int64_t backend_version();
// "9.19.0", or the reason cuDNN is not available.
std::string backend_version_string();

}  // namespace dnngraph
