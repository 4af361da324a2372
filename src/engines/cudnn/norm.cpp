// Layer / RMS / batch / instance / adaptive layer norm, forward and backward ->
// OPERATION_NORM_FORWARD / _BACKWARD. The canonical views give every tensor rank >= 4 (trailing
// 1s), which is what these ops expect.
#include "engines/cudnn/lowering.hpp"

namespace dnngraph::cudnn {
namespace {

cudnnBackendNormMode_t mode_of(ir::NormKind k) {
  switch (k) {
    case ir::NormKind::LayerNorm:
      return CUDNN_LAYER_NORM;
    case ir::NormKind::RmsNorm:
      return CUDNN_RMS_NORM;
    case ir::NormKind::BatchNorm:
      return CUDNN_BATCH_NORM;
    case ir::NormKind::InstanceNorm:
      return CUDNN_INSTANCE_NORM;
    case ir::NormKind::AdaLayerNorm:
      return CUDNN_ADA_LAYER_NORM;
  }
  return CUDNN_LAYER_NORM;
}

struct PortAttr {
  Role role;
  bool is_input;
  cudnnBackendAttributeName_t attr;
};

// Binds every present port to its attribute.
Status bind_ports(LowerContext& cx, const ir::Node& n, Descriptor& op,
                  std::initializer_list<PortAttr> ports) {
  for (const auto& p : ports) {
    ir::Tensor t = p.is_input ? n.input(p.role) : n.output(p.role);
    if (!t) continue;
    DNNGRAPH_ASSIGN_OR_RETURN(auto d, cx.tensor(t));
    DNNGRAPH_TRY(op.set(p.attr, d));
  }
  return Status::ok();
}

// Forward and backward share the mode and the port binding.
Status lower_norm(LowerContext& cx, const ir::Node& n) {
  const bool fwd = n.kind() == ir::OpKind::NormFwd;
  const ir::NormKind kind = fwd ? n.as<ir::NormFwdAttrs>().kind : n.as<ir::NormBwdAttrs>().kind;
  const std::string what =
      detail::cat(op_kind_name(n.kind()), " ", ir::norm_kind_name(kind), " '", n.name, "'");
  const cudnnBackendNormMode_t mode = mode_of(kind);
  if (fwd) {
    const auto& a = n.as<ir::NormFwdAttrs>();
    DNNGRAPH_ASSIGN_OR_RETURN(
        Descriptor op, Descriptor::create(CUDNN_BACKEND_OPERATION_NORM_FORWARD_DESCRIPTOR, what));
    const cudnnBackendNormFwdPhase_t phase =
        a.phase == NormForwardPhase::Training ? CUDNN_NORM_FWD_TRAINING : CUDNN_NORM_FWD_INFERENCE;
    DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_NORM_FWD_MODE, CUDNN_TYPE_NORM_MODE, mode));
    DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_NORM_FWD_PHASE, CUDNN_TYPE_NORM_FWD_PHASE, phase));
    // Batchnorm inference reads MEAN / INV_VARIANCE; training writes them.
    DNNGRAPH_TRY(bind_ports(
        cx, n, op,
        {{Role::X, true, CUDNN_ATTR_OPERATION_NORM_FWD_XDESC},
         {Role::SCALE, true, CUDNN_ATTR_OPERATION_NORM_FWD_SCALE_DESC},
         {Role::BIAS, true, CUDNN_ATTR_OPERATION_NORM_FWD_BIAS_DESC},
         {Role::EPSILON, true, CUDNN_ATTR_OPERATION_NORM_FWD_EPSILON_DESC},
         {Role::MOMENTUM, true, CUDNN_ATTR_OPERATION_NORM_FWD_EXP_AVG_FACTOR_DESC},
         {Role::PREV_RUNNING_MEAN, true, CUDNN_ATTR_OPERATION_NORM_FWD_INPUT_RUNNING_MEAN_DESC},
         {Role::PREV_RUNNING_VAR, true, CUDNN_ATTR_OPERATION_NORM_FWD_INPUT_RUNNING_VAR_DESC},
         {Role::MEAN, true, CUDNN_ATTR_OPERATION_NORM_FWD_MEAN_DESC},
         {Role::INV_VARIANCE, true, CUDNN_ATTR_OPERATION_NORM_FWD_INV_VARIANCE_DESC},
         {Role::Y, false, CUDNN_ATTR_OPERATION_NORM_FWD_YDESC},
         {Role::MEAN, false, CUDNN_ATTR_OPERATION_NORM_FWD_MEAN_DESC},
         {Role::INV_VARIANCE, false, CUDNN_ATTR_OPERATION_NORM_FWD_INV_VARIANCE_DESC},
         {Role::NEXT_RUNNING_MEAN, false, CUDNN_ATTR_OPERATION_NORM_FWD_OUTPUT_RUNNING_MEAN_DESC},
         {Role::NEXT_RUNNING_VAR, false, CUDNN_ATTR_OPERATION_NORM_FWD_OUTPUT_RUNNING_VAR_DESC}}));
    return cx.add_op(std::move(op));
  }
  DNNGRAPH_ASSIGN_OR_RETURN(
      Descriptor op, Descriptor::create(CUDNN_BACKEND_OPERATION_NORM_BACKWARD_DESCRIPTOR, what));
  DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_NORM_BWD_MODE, CUDNN_TYPE_NORM_MODE, mode));
  DNNGRAPH_TRY(
      bind_ports(cx, n, op,
                 {{Role::DY, true, CUDNN_ATTR_OPERATION_NORM_BWD_DYDESC},
                  {Role::X, true, CUDNN_ATTR_OPERATION_NORM_BWD_XDESC},
                  {Role::SCALE, true, CUDNN_ATTR_OPERATION_NORM_BWD_SCALE_DESC},
                  {Role::MEAN, true, CUDNN_ATTR_OPERATION_NORM_BWD_MEAN_DESC},
                  {Role::INV_VARIANCE, true, CUDNN_ATTR_OPERATION_NORM_BWD_INV_VARIANCE_DESC},
                  {Role::DX, false, CUDNN_ATTR_OPERATION_NORM_BWD_DXDESC},
                  {Role::DSCALE, false, CUDNN_ATTR_OPERATION_NORM_BWD_DSCALE_DESC},
                  {Role::DBIAS, false, CUDNN_ATTR_OPERATION_NORM_BWD_DBIAS_DESC}}));
  return cx.add_op(std::move(op));
}

}  // namespace

Status lower_norm_forward(LowerContext& cx, const ir::Node& n) { return lower_norm(cx, n); }
Status lower_norm_backward(LowerContext& cx, const ir::Node& n) { return lower_norm(cx, n); }

}  // namespace dnngraph::cudnn
