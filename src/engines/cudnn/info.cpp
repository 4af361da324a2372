// dnngraph/engines/cudnn.hpp in builds with the cuDNN engine (unavailable.cpp otherwise).
#include "dnngraph/engines/cudnn.hpp"

#include "dnngraph/status.hpp"
#include "engines/cudnn/loader.hpp"

namespace dnngraph {

CudnnInfo cudnn_info() {
  const cudnn::CudnnLoadInfo& l = cudnn::load_info();
  return {true, l.loaded, l.version, l.path, l.error};
}

int64_t backend_version() { return cudnn::load_info().version; }

std::string backend_version_string() {
  const cudnn::CudnnLoadInfo& l = cudnn::load_info();
  if (!l.loaded) return "cuDNN not available: " + l.error;
  return detail::cat(l.version / 10000, ".", (l.version / 100) % 100, ".", l.version % 100);
}

}  // namespace dnngraph
