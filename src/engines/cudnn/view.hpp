// Ops lowered as views on the cuDNN engine (view.cpp). An op whose output only selects
// elements of its input (WindowAttrs below, e.g. slice) needs no cuDNN operation when that input
// is a graph input (a non-virtual tensor the user binds, written by no op of the graph): its
// output Y is the input's memory at byte offset window.offset * element size, with the
// window's strides. Such a Y goes to cuDNN as a non-virtual tensor of its own (a fresh uid)
// whose pointer execute derives from the input's; no operation is emitted for the node. These
// functions need no cuDNN (the canonical views, the engine's precheck and the CPU tests use
// them).
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "dnngraph/ir/validated_graph.hpp"
#include "dnngraph/status.hpp"

namespace dnngraph::cudnn {

// The attribute struct of a window op: its window() gives where the output lies in the input's
// memory (ir/window.hpp).
template <class A>
concept WindowAttrs = requires(const A& a, std::span<const int64_t> s) {
  { a.window(s) } -> std::same_as<std::optional<ir::StridedWindow>>;
};
// Whether op family k is a window op, from the op table.
constexpr bool is_window_op(ir::OpKind k) {
  constexpr bool window[] = {
#define DNNGRAPH_OP_WINDOW(kind, name, Attrs, in, out) WindowAttrs<ir::Attrs>,
      DNNGRAPH_OPS(DNNGRAPH_OP_WINDOW)
#undef DNNGRAPH_OP_WINDOW
  };
  return window[static_cast<size_t>(k)];
}

// CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT of every tensor the engine binds itself.
inline constexpr int64_t kTensorAlignment = 16;

// Where a window op's output lies in its input's memory.
struct WindowView {
  ir::Tensor source;            // the input (a graph input)
  ir::Tensor view;              // the output, described as the view
  std::vector<int64_t> stride;  // the output's strides in elements of the input
  int64_t element_offset = 0;
  int64_t byte_offset = 0;  // element_offset * element size
  // The alignment the output's descriptor declares: the largest power of two up to
  // kTensorAlignment that divides byte_offset (kTensorAlignment when it is 0). A user pointer
  // aligned to kTensorAlignment (what every bound tensor must be) plus byte_offset is aligned
  // to it.
  int64_t alignment = kTensorAlignment;
};

// The view of window `w` of a tensor of element type `type` (source and view left unset).
// NotSupported for sub-byte types (FP4: a view could start inside a byte, and cuDNN runs FP4
// only in block-scaled engines this has not been checked with).
Result<WindowView> window_view(const ir::StridedWindow& w, DataType type);

// The view of node `n` of `g` when its op is a window op (is_window_op) lowered as one:
// its input is a graph input (non-virtual, not pass-by-value, not FP4, written by no node of
// `g`), its output is virtual (read by other ops) and its window starts on a kTensorAlignment
// boundary. Otherwise NotSupported naming the node, the tensor and what to do instead
// (InvalidArgument for a node of another op).
Result<WindowView> lowered_view(const ir::ValidatedGraph& g, const ir::Node& n);

// The engine's precheck: a window op that cannot be lowered as a view is refused with the
// reason; ok for other ops.
Status view_precheck(const ir::ValidatedGraph& g, const ir::Node& n);

// Whether `n` is a window op lowered as a view (it emits no cuDNN operation).
bool is_lowered_view(const ir::ValidatedGraph& g, const ir::Node& n);

}  // namespace dnngraph::cudnn
