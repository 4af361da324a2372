// The engines of this build and the GPUs this process sees. Each engine registers itself from its
// own engine.cpp with one EngineRegistrar at namespace scope; the runtime asks them in rank order
// (lowest first) and takes the first that runs on the handle's device. Not a public header: users
// choose an engine through the handle's device.
#pragma once

#include <string>
#include <string_view>
#include <vector>

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

// The GPUs the CUDA runtime sees ("NVIDIA H200 (sm_90, 139 GiB)"), or why there are none.
Result<std::vector<std::string>> visible_gpus();

}  // namespace dnngraph
