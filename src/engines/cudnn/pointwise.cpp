// Pointwise ops -> POINTWISE descriptor + OPERATION_POINTWISE, every mode of the IR.
#include "engines/cudnn/lowering.hpp"

namespace dnngraph::cudnn {
namespace {

cudnnPointwiseMode_t mode_of(PointwiseMode m) {
  using M = PointwiseMode;
  switch (m) {
    case M::Add:
      return CUDNN_POINTWISE_ADD;
    case M::Sub:
      return CUDNN_POINTWISE_SUB;
    case M::Mul:
      return CUDNN_POINTWISE_MUL;
    case M::Div:
      return CUDNN_POINTWISE_DIV;
    case M::Max:
      return CUDNN_POINTWISE_MAX;
    case M::Min:
      return CUDNN_POINTWISE_MIN;
    case M::Pow:
      return CUDNN_POINTWISE_POW;
    case M::Abs:
      return CUDNN_POINTWISE_ABS;
    case M::Neg:
      return CUDNN_POINTWISE_NEG;
    case M::Exp:
      return CUDNN_POINTWISE_EXP;
    case M::Log:
      return CUDNN_POINTWISE_LOG;
    case M::Sqrt:
      return CUDNN_POINTWISE_SQRT;
    case M::Rsqrt:
      return CUDNN_POINTWISE_RSQRT;
    case M::Reciprocal:
      return CUDNN_POINTWISE_RECIPROCAL;
    case M::Tanh:
      return CUDNN_POINTWISE_TANH_FWD;
    case M::Sigmoid:
      return CUDNN_POINTWISE_SIGMOID_FWD;
    case M::Relu:
      return CUDNN_POINTWISE_RELU_FWD;
    case M::Gelu:
      return CUDNN_POINTWISE_GELU_FWD;
    case M::GeluApproxTanh:
      return CUDNN_POINTWISE_GELU_APPROX_TANH_FWD;
    case M::Silu:
      return CUDNN_POINTWISE_SWISH_FWD;
    case M::Elu:
      return CUDNN_POINTWISE_ELU_FWD;
    case M::Softplus:
      return CUDNN_POINTWISE_SOFTPLUS_FWD;
    case M::Erf:
      return CUDNN_POINTWISE_ERF;
    case M::Sin:
      return CUDNN_POINTWISE_SIN;
    case M::Cos:
      return CUDNN_POINTWISE_COS;
    case M::Floor:
      return CUDNN_POINTWISE_FLOOR;
    case M::Ceil:
      return CUDNN_POINTWISE_CEIL;
    case M::Identity:
      return CUDNN_POINTWISE_IDENTITY;
    case M::CmpEq:
      return CUDNN_POINTWISE_CMP_EQ;
    case M::CmpNeq:
      return CUDNN_POINTWISE_CMP_NEQ;
    case M::CmpGt:
      return CUDNN_POINTWISE_CMP_GT;
    case M::CmpGe:
      return CUDNN_POINTWISE_CMP_GE;
    case M::CmpLt:
      return CUDNN_POINTWISE_CMP_LT;
    case M::CmpLe:
      return CUDNN_POINTWISE_CMP_LE;
    case M::LogicalAnd:
      return CUDNN_POINTWISE_LOGICAL_AND;
    case M::LogicalOr:
      return CUDNN_POINTWISE_LOGICAL_OR;
    case M::LogicalNot:
      return CUDNN_POINTWISE_LOGICAL_NOT;
    case M::BinarySelect:
      return CUDNN_POINTWISE_BINARY_SELECT;
    case M::ReluBwd:
      return CUDNN_POINTWISE_RELU_BWD;
    case M::GeluBwd:
      return CUDNN_POINTWISE_GELU_BWD;
    case M::GeluApproxTanhBwd:
      return CUDNN_POINTWISE_GELU_APPROX_TANH_BWD;
    case M::SigmoidBwd:
      return CUDNN_POINTWISE_SIGMOID_BWD;
    case M::TanhBwd:
      return CUDNN_POINTWISE_TANH_BWD;
    case M::SiluBwd:
      return CUDNN_POINTWISE_SWISH_BWD;
    case M::EluBwd:
      return CUDNN_POINTWISE_ELU_BWD;
    case M::SoftplusBwd:
      return CUDNN_POINTWISE_SOFTPLUS_BWD;
    case M::GenIndex:
      return CUDNN_POINTWISE_GEN_INDEX;
    case M::AddSquare:
      return CUDNN_POINTWISE_ADD_SQUARE;
    case M::Mod:
      return CUDNN_POINTWISE_MOD;
    case M::Tan:
      return CUDNN_POINTWISE_TAN;
  }
  return CUDNN_POINTWISE_IDENTITY;
}

bool is_backward(cudnnPointwiseMode_t m) { return m >= 200 && m < 300; }

// Sets the optional activation parameters; cuDNN reads them as double for double math, else
// as float.
Status set_params(Descriptor& pw, const ir::PointwiseAttrs& a, bool as_double) {
  auto put = [&](cudnnBackendAttributeName_t attr, const std::optional<double>& v) -> Status {
    if (!v) return Status::ok();
    if (as_double) return pw.set(attr, CUDNN_TYPE_DOUBLE, *v);
    const float f = static_cast<float>(*v);
    return pw.set(attr, CUDNN_TYPE_FLOAT, f);
  };
  DNNGRAPH_TRY(put(CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, a.relu_lower_clip));
  DNNGRAPH_TRY(put(CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP, a.relu_upper_clip));
  DNNGRAPH_TRY(put(CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP_SLOPE, a.relu_lower_clip_slope));
  DNNGRAPH_TRY(put(CUDNN_ATTR_POINTWISE_ELU_ALPHA, a.elu_alpha));
  DNNGRAPH_TRY(put(CUDNN_ATTR_POINTWISE_SOFTPLUS_BETA, a.softplus_beta));
  DNNGRAPH_TRY(put(CUDNN_ATTR_POINTWISE_SWISH_BETA, a.swish_beta));
  return Status::ok();
}

Status add_pointwise_impl(LowerContext& cx, const std::string& what, cudnnPointwiseMode_t mode,
                          DataType compute, const ir::PointwiseAttrs* params,
                          cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                          cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y, int64_t axis) {
  DNNGRAPH_ASSIGN_OR_RETURN(Descriptor pw, Descriptor::create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR,
                                                              what + " (pointwise desc)"));
  const cudnnDataType_t prec = to_cudnn(compute);
  DNNGRAPH_TRY(pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, mode));
  DNNGRAPH_TRY(pw.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, prec));
  if (params) DNNGRAPH_TRY(set_params(pw, *params, compute == DataType::Double));
  if (axis >= 0) DNNGRAPH_TRY(pw.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, axis));
  DNNGRAPH_TRY(pw.finalize(ErrorCode::NotSupported));

  DNNGRAPH_ASSIGN_OR_RETURN(Descriptor op,
                            Descriptor::create(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, what));
  DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw));
  if (is_backward(mode)) {
    // Backward activations: dy (in0), x (in1) -> dx.
    DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_POINTWISE_DYDESC, x));
    DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, b));
    DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_POINTWISE_DXDESC, y));
  } else {
    DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x));
    if (b) DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b));
    if (t) DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t));
    DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y));
  }
  cx.keep(std::move(pw));
  return cx.add_op(std::move(op));
}

}  // namespace

Status add_pointwise(LowerContext& cx, const std::string& what, cudnnPointwiseMode_t mode,
                     DataType compute, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                     cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y, int64_t axis) {
  return add_pointwise_impl(cx, what, mode, compute, nullptr, x, b, t, y, axis);
}

Status add_pointwise_node(LowerContext& cx, const std::string& what, const ir::Node& n,
                          cudnnBackendDescriptor_t in0, cudnnBackendDescriptor_t in1,
                          cudnnBackendDescriptor_t in2, cudnnBackendDescriptor_t y) {
  const auto& a = n.as<ir::PointwiseAttrs>();
  const int64_t axis = a.mode == PointwiseMode::GenIndex ? *a.axis : -1;
  return add_pointwise_impl(cx, what, mode_of(a.mode), cx.compute_type(n), &a, in0, in1, in2, y,
                            axis);
}

Status lower_pointwise(LowerContext& cx, const ir::Node& n) {
  const auto& a = n.as<ir::PointwiseAttrs>();
  const std::string what =
      detail::cat("pointwise ", pointwise_mode_name(a.mode), " '", n.name, "'");
  const int arity = pointwise_arity(a.mode);
  cudnnBackendDescriptor_t in[3] = {nullptr, nullptr, nullptr};
  static constexpr Role kRoles[] = {Role::IN_0, Role::IN_1, Role::IN_2};
  for (int i = 0; i < arity; ++i) {
    ir::Tensor t = n.input(kRoles[i]);
    DNNGRAPH_ASSIGN_OR_RETURN(in[i], cx.tensor(t));
  }
  ir::Tensor out = n.output(Role::OUT_0);
  DNNGRAPH_ASSIGN_OR_RETURN(auto y, cx.tensor(out));
  int64_t axis = -1;
  if (a.mode == PointwiseMode::GenIndex) {
    // The canonical view may only have added leading 1s: then the axis moves by their count.
    // A permuted or folded view (pointwise-only graphs) has no axis to match.
    const TensorView& v = cx.view(out);
    const size_t pad = v.dim.size() >= out->dim.size() ? v.dim.size() - out->dim.size() : 0;
    bool same = v.dim.size() >= out->dim.size();
    for (size_t i = 0; same && i < v.dim.size(); ++i)
      same = i < pad ? v.dim[i] == 1 : v.dim[i] == out->dim[i - pad];
    if (!same)
      return make_error(ErrorCode::NotSupported, what,
                        ": GEN_INDEX on a tensor the cuDNN engine describes with other dims (",
                        "it folds the dims of pointwise-only graphs); use it inside a graph with "
                        "a matmul or reduction, or run this graph on the CPU reference engine");
    axis = *a.axis + static_cast<int64_t>(pad);
  }
  return add_pointwise_impl(cx, what, mode_of(a.mode), cx.compute_type(n), &a, in[0], in[1], in[2],
                            y, axis);
}

}  // namespace dnngraph::cudnn
