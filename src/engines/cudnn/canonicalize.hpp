// Shapes cuDNN is given, which may differ from the graph's (same memory, other descriptors).
// cuDNN computes wrong results for a ReLU-only graph on 2-D tensors and finds no engine for
// 4-D pointwise-only graphs; rank-3 views of the same data run right (docs/cudnn-engine.md,
// "Shape canonicalization", lists what was seen with which cuDNN).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "dnngraph/ir/graph.hpp"
#include "dnngraph/status.hpp"

namespace dnngraph::cudnn {

struct TensorView {
  std::vector<int64_t> dim;
  std::vector<int64_t> stride;
};
using ViewMap = std::unordered_map<const ir::TensorAttrs*, TensorView>;

// One view per tensor of `graph` (validated). Every tensor first gets leading 1s up to the
// graph's highest rank (at least 3). Then: pointwise/reduction-only graphs are permuted to the
// layout of their first output and their contiguous dims folded, down to rank 3 (NotSupported
// when an input broadcasts along the innermost dim: cuDNN miscomputes it); matmul graphs fold
// their batch dims into one; graphs with a norm get trailing 1s up to rank 4 (norms reduce
// over trailing dims, so trailing 1s keep the meaning).
Result<ViewMap> canonicalize(const ir::ValidatedGraph& graph);

}  // namespace dnngraph::cudnn
