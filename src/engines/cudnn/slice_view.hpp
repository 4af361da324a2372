// Slice on the cuDNN engine as a strided view (slice.cpp). cuDNN 9.19 has no slice operation,
// but a slice of a graph input (a non-virtual tensor the user binds, written by no op of the
// graph) needs none: Y[i] = X[start + i * step] is X's memory at byte offset
// sum(start_d * stride_d) * element size, with strides stride_d * step_d. Such a Y goes to
// cuDNN as a non-virtual tensor of its own (a fresh uid) whose pointer execute derives from
// X's; no operation is emitted for the slice. These functions need no cuDNN (the canonical
// views, the engine's precheck and the CPU tests use them).
#pragma once

#include <cstdint>
#include <vector>

#include "dnngraph/ir/validated_graph.hpp"
#include "dnngraph/status.hpp"

namespace dnngraph::cudnn {

// CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT of every tensor the engine binds itself.
inline constexpr int64_t kTensorAlignment = 16;

// Where a slice's output lies in its input's memory.
struct SliceView {
  std::vector<int64_t> stride;  // Y's strides in elements of X: X's stride times the step
  int64_t element_offset = 0;   // sum(start_d * stride_d)
  int64_t byte_offset = 0;      // element_offset * element size
  // The alignment Y's descriptor declares: the largest power of two up to kTensorAlignment
  // that divides byte_offset (kTensorAlignment when it is 0). A user pointer aligned to
  // kTensorAlignment (what every bound tensor must be) plus byte_offset is aligned to it.
  int64_t alignment = kTensorAlignment;
};

// The view of X[start:end:step] for X's strides `x_stride` (one per dim, as a.start) and
// element type `type`. NotSupported for FP4_E2M1 (half-byte elements: a view could start
// inside a byte, and cuDNN runs FP4 only in block-scaled engines this has not been checked
// with); InvalidArgument when the attributes do not have one entry per dim.
Result<SliceView> slice_view(const std::vector<int64_t>& x_stride, const ir::SliceAttrs& a,
                             DataType type);

// The view of slice node `n` of `g` when it is lowered as one: its input is a graph input
// (non-virtual, not pass-by-value, not FP4, written by no node of `g`), its output is virtual
// (read by other ops) and its window starts on a kTensorAlignment boundary. Otherwise
// NotSupported naming the slice, the tensor and what to do instead.
Result<SliceView> lowered_slice_view(const ir::ValidatedGraph& g, const ir::Node& n);
// Its status alone (the engine's precheck).
Status slice_view_check(const ir::ValidatedGraph& g, const ir::Node& n);

// Whether `n` is a slice that slice_view_check accepts.
bool is_view_slice(const ir::ValidatedGraph& g, const ir::Node& n);

}  // namespace dnngraph::cudnn
