// The engine registry (registry.hpp) and the names of the interface's enumerations.
#include "engines/registry.hpp"

#include <algorithm>
#include <array>
#include <mutex>
#include <utility>

namespace dnngraph {
namespace {

struct Registry {
  std::mutex mu;
  std::vector<std::pair<int, Engine*>> engines;  // sorted by rank
};

// Function-local: registrars in other files run during static initialisation, in any order.
Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

EngineRegistrar::EngineRegistrar(int rank, Engine& (*get)()) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto at = std::upper_bound(r.engines.begin(), r.engines.end(), rank,
                             [](int v, const auto& e) { return v < e.first; });
  r.engines.insert(at, {rank, &get()});
}

void register_engine(Engine* engine) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  const int rank = (r.engines.empty() ? 0 : r.engines.front().first) - 1;
  r.engines.insert(r.engines.begin(), {rank, engine});
}

void unregister_engine(Engine* engine) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::erase_if(r.engines, [engine](const auto& e) { return e.second == engine; });
}

std::vector<Engine*> registered_engines() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<Engine*> out;
  for (const auto& e : r.engines) out.push_back(e.second);
  return out;
}

Engine* find_engine(std::string_view name) {
  for (Engine* e : registered_engines())
    if (e->name() == name) return e;
  return nullptr;
}

std::string_view heur_mode_name(HeurMode m) {
  static constexpr std::array<std::string_view, 3> kNames = {"A", "B", "FALLBACK"};
  return kNames[static_cast<size_t>(m)];
}

namespace {
constexpr std::array<std::string_view, 3> kCudaGraphExecuteNames = {"off", "always", "repeated"};
}

std::string_view cuda_graph_execute_name(CudaGraphExecute m) {
  return kCudaGraphExecuteNames[static_cast<size_t>(m)];
}

std::optional<CudaGraphExecute> parse_cuda_graph_execute(std::string_view name) {
  for (size_t i = 0; i < kCudaGraphExecuteNames.size(); ++i)
    if (kCudaGraphExecuteNames[i] == name) return static_cast<CudaGraphExecute>(i);
  return std::nullopt;
}

}  // namespace dnngraph
