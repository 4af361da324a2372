// Internal types shared by engine.cpp (lowering, heuristics, candidates) and plan.cpp
// (execution): the lowered graph's state and the per-handle cuDNN state.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dnngraph/engines/handle.hpp"
#include "dnngraph/engines/interface.hpp"
#include "dnngraph/engines/kernel_cache.hpp"
#include "engines/cudnn/lowering.hpp"

namespace dnngraph::cudnn {

// The cuDNN engine's per-handle state (Handle::engine_state<HandleState>).
struct HandleState final : EngineState {
  cudnnHandle_t handle = nullptr;
  int device = 0;
  std::mutex mu;                   // one stream per handle: executes on it are serialised
  uint64_t applied_epoch = ~0ull;  // Handle::stream_epoch() last given to cudnnSetStream
  ~HandleState() override;
};
Result<HandleState*> handle_state(Handle& handle);

// A non-virtual tensor the variant pack must bind.
struct IoSlot {
  int64_t uid;
  std::string name;
  bool by_value;
  int constant = -1;  // index into LoweredState::constant_bytes when the plan supplies it
  int64_t elem_size = 0;
};

// Everything one lowered graph owns; shared by its candidates and plans.
struct LoweredState {
  std::unique_ptr<LowerContext> cx;  // owns tensor and operation descriptors
  Descriptor op_graph;
  std::string what;        // "graph 'name' (matmul 'mm0', pointwise ...)"
  std::vector<IoSlot> io;  // ordered by uid
  std::vector<std::array<unsigned char, 16>> constant_bytes;
  int device = 0;
  cudnnHandle_t build_handle = nullptr;
  std::vector<Descriptor> engines;  // engines behind enumerated configs (engine.cpp)
  // Heuristics mode A's configs when lowering already asked for them (the SDPA variants).
  std::vector<Descriptor> configs_a;
  bool has_configs_a = false;
  // Shared by every plan of a dynamic-shape graph given one (kernel_cache.cpp).
  KernelCachePtr kernel_cache;
};

// The kernel cache of `st` (set), locked and set up for its operation graph. Plans are
// finalized with the lock held: builds that share a cache are serialised.
struct KernelCacheLock {
  std::unique_lock<std::mutex> lock;
  cudnnBackendDescriptor_t desc;
};
Result<KernelCacheLock> lock_kernel_cache(const LoweredState& st);

// Wraps a finalized execution plan.
Result<std::unique_ptr<Plan>> make_plan(std::shared_ptr<LoweredState> state, Descriptor plan,
                                        std::string name);

}  // namespace dnngraph::cudnn
