// The dnngraph op library. Each op family (ops/norm.cpp, gemm.cpp, conv.cpp, sdpa.cpp) adds its
// schemas with TORCH_LIBRARY_FRAGMENT and its CPU, CUDA, Meta and Autograd kernels; this file
// owns the library itself, the graph cache's controls, and the autograd kernel of the backward
// ops.
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
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

// The backward ops have no derivative of their own. As for ATen's ops without double backward,
// a backward run with create_graph=True records a node that raises "derivative for
// dnngraph::<op> is not implemented" when a gradient of the gradient is asked for (instead
// of silently giving zeros); a plain backward redispatches at no cost. The same for the
// training forwards (`*_train`), which the forward ops' autograd kernels call below autograd:
// called directly on tensors that require grad, their outputs refuse a backward.
TORCH_LIBRARY_IMPL(dnngraph, Autograd, m) {
  for (const char* op : {"linear_act_backward",
                         "matmul_epilogue_backward",
                         "conv2d_bias_act_backward",
                         "sdpa_backward",
                         "layer_norm_backward",
                         "rms_norm_backward",
                         "linear_act_train",
                         "matmul_epilogue_train",
                         "conv2d_bias_act_train",
                         "linear_act_train_backward",
                         "matmul_epilogue_train_backward",
                         "conv2d_bias_act_train_backward",
                         "add_rms_norm_backward",
                         "swiglu_backward",
                         "rope_backward",
                         "activation_backward",
                         "conv2d_bias_add_act_train",
                         "residual_block_train",
                         "residual_block_backward",
                         "run_graph"})
    m.impl(op, torch::autograd::autogradNotImplementedFallback());
}

}  // namespace dnngraph::torch_ops
