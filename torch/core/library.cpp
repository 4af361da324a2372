// The dnngraph op library. Each op family (ops/norm.cpp, gemm.cpp, conv.cpp, sdpa.cpp) adds its
// schemas with TORCH_LIBRARY_FRAGMENT and its CPU, CUDA, Meta and Autograd kernels; this file
// owns the library itself and the graph cache's controls.
#include <torch/library.h>

#include "core/runtime.hpp"

namespace dnngraph::torch_ops {
namespace {

std::vector<int64_t> cache_info() { return cache_stats(); }
void clear_cache() { cache_clear(); }
void set_cache_capacity(int64_t capacity) { cache_set_capacity(capacity); }
std::vector<std::string> graph_json(const std::string& op) { return cached_graph_json(op); }

}  // namespace

TORCH_LIBRARY(dnngraph, m) {
  // [size, capacity, hits, misses] of the graph cache shared by every op.
  m.def("cache_info() -> int[]", &cache_info);
  m.def("clear_cache() -> ()", &clear_cache);
  m.def("set_cache_capacity(int capacity) -> ()", &set_cache_capacity);
  // The JSON of the cached graphs op `op` built (most recently used first), for tests/debugging.
  m.def("_graph_json(str op) -> str[]", &graph_json);
}

}  // namespace dnngraph::torch_ops
