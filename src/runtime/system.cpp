// system_info(): the engines of this build and the GPUs the process sees.
#include "dnngraph/system.hpp"

#include "dnngraph/version.hpp"
#include "engines/registry.hpp"

namespace dnngraph {

SystemInfo system_info() {
  SystemInfo s;
  s.dnngraph_version = version();
  for (Engine* e : registered_engines())
    s.engines.push_back({std::string(e->name()), e->backend_info()});
  auto gpus = visible_gpus();
  if (gpus) {
    s.gpus = *gpus;
    if (s.gpus.empty()) s.gpu_error = "no NVIDIA GPU visible";
  } else {
    s.gpu_error = gpus.status().message();
  }
  return s;
}

}  // namespace dnngraph
