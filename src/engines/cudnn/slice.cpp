// Slice on the cuDNN engine. cuDNN 9.19 has no slice operation (the cuDNN frontend 1.32 refuses
// slice below 9.22), and none is needed for a slice of a graph input: slice is a window op
// (SliceAttrs::window), so its output is a strided window into the user's buffer (view.hpp).
// lower_slice emits no operation; it marks the output as a view of the input, so that the ops
// reading it get a non-virtual descriptor with a fresh uid (LowerContext::tensor), and the plan
// binds it at execute to the input's pointer plus the byte offset (plan.cpp). Other slices are
// refused with the reason (lowered_view).

#include "engines/cudnn/lowering.hpp"

namespace dnngraph::cudnn {

Status lower_slice(LowerContext& cx, const ir::Node& n) { return lower_view(cx, n); }

}  // namespace dnngraph::cudnn
