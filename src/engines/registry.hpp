// The engines of this build and the GPUs this process sees. Each engine registers itself from its
// own engine.cpp with one EngineRegistrar at namespace scope; the runtime asks them in rank order
// (lowest first) and takes the first that runs on the handle's device. Not a public header: users
// choose an engine through the handle's device.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "dnngraph/engines/device_properties.hpp"
#include "dnngraph/engines/interface.hpp"

namespace dnngraph {

class EngineRegistrar {
 public:
  // `get` returns the engine (a function-local static); called once, at registration.
  EngineRegistrar(int rank, Engine& (*get)());
};

// Registered engines, lowest rank first.
std::vector<Engine*> registered_engines();
// Puts an engine (which must outlive its use) ahead of every registered one, the latest ahead
// of earlier ones: tests, engines from outside the library. unregister_engine removes it.
void register_engine(Engine* engine);
void unregister_engine(Engine* engine);
// The engine of that name, or nullptr when this build has none.
Engine* find_engine(std::string_view name);

// The GPUs the CUDA runtime sees ("NVIDIA H200 (sm_90, 139 GiB)"), or why there are none:
// asked of the engine that registered a DeviceProvider (the cuDNN engine), so that the engine
// interface itself needs no CUDA.
Result<std::vector<std::string>> visible_gpus();

// What an engine that runs on GPUs answers for the engine interface: the GPUs it sees and a
// GPU's properties (DeviceProperties::from_device). Without one (a build without the cuDNN
// engine) both say the build has no GPU support.
struct DeviceProvider {
  Result<std::vector<std::string>> (*visible_gpus)();
  Result<DevicePropertiesPtr> (*properties)(int device);
};
class DeviceProviderRegistrar {
 public:
  explicit DeviceProviderRegistrar(DeviceProvider provider);
};

}  // namespace dnngraph
