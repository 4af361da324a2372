// Reduction -> REDUCTION descriptor + OPERATION_REDUCTION. The reduced dims are those where Y
// has extent 1 and X does not (the canonical views keep that relation).
#include "engines/cudnn/lowering.hpp"

namespace dnngraph::cudnn {
namespace {

// CUDNN_REDUCE_TENSOR_* in ReductionMode order.
constexpr std::array<cudnnReduceTensorOp_t, 8> kModes = {
    CUDNN_REDUCE_TENSOR_ADD,   CUDNN_REDUCE_TENSOR_MUL,  CUDNN_REDUCE_TENSOR_MIN,
    CUDNN_REDUCE_TENSOR_MAX,   CUDNN_REDUCE_TENSOR_AMAX, CUDNN_REDUCE_TENSOR_AVG,
    CUDNN_REDUCE_TENSOR_NORM1, CUDNN_REDUCE_TENSOR_NORM2};
static_assert(kModes.back() == CUDNN_REDUCE_TENSOR_NORM2, "one mode per ReductionMode");

cudnnReduceTensorOp_t mode_of(ReductionMode m) {
  return entry_of(kModes, m, CUDNN_REDUCE_TENSOR_ADD);
}

}  // namespace

Status add_reduction(LowerContext& cx, const std::string& what, cudnnReduceTensorOp_t mode,
                     DataType compute, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
  DNNGRAPH_ASSIGN_OR_RETURN(
      auto rd, Descriptor::create(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, what + " (reduction desc)"));
  const cudnnDataType_t comp = to_cudnn(compute);
  DNNGRAPH_TRY(rd.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, mode));
  DNNGRAPH_TRY(rd.set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, comp));
  DNNGRAPH_TRY(rd.finalize(ErrorCode::NotSupported));
  DNNGRAPH_ASSIGN_OR_RETURN(auto od,
                            Descriptor::create(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, what));
  DNNGRAPH_TRY(od.set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x));
  DNNGRAPH_TRY(od.set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y));
  DNNGRAPH_TRY(od.set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, rd));
  cx.keep(std::move(rd));
  return cx.add_op(std::move(od));
}

Status lower_reduction(LowerContext& cx, const ir::Node& n) {
  const auto& a = n.as<ir::ReductionAttrs>();
  const std::string what =
      detail::cat("reduction ", reduction_mode_name(a.mode), " '", n.name, "'");
  ir::Tensor x = n.input(Role::X), y = n.output(Role::Y);
  DNNGRAPH_ASSIGN_OR_RETURN(auto tx, cx.tensor(x));
  DNNGRAPH_ASSIGN_OR_RETURN(auto ty, cx.tensor(y));
  return add_reduction(cx, what, mode_of(a.mode), cx.compute_type(n), tx, ty);
}

}  // namespace dnngraph::cudnn
