// dnngraph/engines/cudnn.hpp in builds without the cuDNN engine (compiled instead of the rest
// of this folder): the answers say so, and nothing else links to cuDNN or CUDA. (Without the
// cuDNN engine no DeviceProvider is registered: the engine interface answers that there is no
// GPU support.)
#include "dnngraph/engines/cudnn.hpp"

namespace dnngraph {

namespace {
constexpr const char* kNotBuilt = "dnngraph was built without the cuDNN engine";
}  // namespace

CudnnInfo cudnn_info() { return {false, false, 0, "", kNotBuilt}; }

int64_t backend_version() { return 0; }

std::string backend_version_string() { return std::string("cuDNN not available: ") + kNotBuilt; }

}  // namespace dnngraph
