// concatenate -> OPERATION_CONCAT (cuDNN >= 9.7): the input descriptors in order, the output,
// the axis and, when set, the in-place index, as the frontend builds it. The axis is counted
// in the descriptors' dims: canonicalize() gives every tensor leading 1s up to the graph's
// rank (at least 3), so the graph's axis moves by that many.
// Not yet run on a GPU (docs/compatibility.md).
#include <algorithm>

#include "engines/cudnn/lowering.hpp"

namespace dnngraph::cudnn {

Status lower_concatenate(LowerContext& cx, const ir::Node& n) {
  const std::string what = detail::cat("concatenate '", n.name, "'");
  const auto& a = n.as<ir::ConcatAttrs>();
  std::vector<cudnnBackendDescriptor_t> ins;
  for (Role r : ir::op_info(n.kind()).inputs) {  // IN_0, IN_1, ... in order
    ir::Tensor t = n.input(r);
    if (!t) break;
    DNNGRAPH_ASSIGN_OR_RETURN(auto d, cx.tensor(t));
    ins.push_back(d);
  }
  const ir::Tensor y = n.output(Role::Y);
  DNNGRAPH_ASSIGN_OR_RETURN(auto ty, cx.tensor(y));
  size_t rank = 3;
  for (const auto& t : cx.graph().tensors()) rank = std::max(rank, t->dim.size());
  const int64_t axis = a.axis + static_cast<int64_t>(rank - y->dim.size());
  DNNGRAPH_ASSIGN_OR_RETURN(auto op,
                            Descriptor::create(CUDNN_BACKEND_OPERATION_CONCAT_DESCRIPTOR, what));
  DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_CONCAT_AXIS, CUDNN_TYPE_INT64, axis));
  DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_CONCAT_INPUT_DESCS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ins));
  if (a.in_place_index)
    DNNGRAPH_TRY(
        op.set(CUDNN_ATTR_OPERATION_CONCAT_INPLACE_INDEX, CUDNN_TYPE_INT64, *a.in_place_index));
  DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_CONCAT_OUTPUT_DESC, ty));
  return cx.add_op(std::move(op));
}

}  // namespace dnngraph::cudnn
