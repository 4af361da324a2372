// Pointwise ops -> POINTWISE descriptor + OPERATION_POINTWISE, every mode of the IR.
#include "engines/cudnn/lowering.hpp"

namespace dnngraph::cudnn {
namespace {

// CUDNN_POINTWISE_* in PointwiseMode order.
constexpr std::array<cudnnPointwiseMode_t, kPointwiseModeCount> kModes = {
    CUDNN_POINTWISE_ADD,
    CUDNN_POINTWISE_SUB,
    CUDNN_POINTWISE_MUL,
    CUDNN_POINTWISE_DIV,
    CUDNN_POINTWISE_MAX,
    CUDNN_POINTWISE_MIN,
    CUDNN_POINTWISE_POW,
    CUDNN_POINTWISE_ABS,
    CUDNN_POINTWISE_NEG,
    CUDNN_POINTWISE_EXP,
    CUDNN_POINTWISE_LOG,
    CUDNN_POINTWISE_SQRT,
    CUDNN_POINTWISE_RSQRT,
    CUDNN_POINTWISE_RECIPROCAL,
    CUDNN_POINTWISE_TANH_FWD,
    CUDNN_POINTWISE_SIGMOID_FWD,
    CUDNN_POINTWISE_RELU_FWD,
    CUDNN_POINTWISE_GELU_FWD,
    CUDNN_POINTWISE_GELU_APPROX_TANH_FWD,
    CUDNN_POINTWISE_SWISH_FWD,
    CUDNN_POINTWISE_ELU_FWD,
    CUDNN_POINTWISE_SOFTPLUS_FWD,
    CUDNN_POINTWISE_ERF,
    CUDNN_POINTWISE_SIN,
    CUDNN_POINTWISE_COS,
    CUDNN_POINTWISE_FLOOR,
    CUDNN_POINTWISE_CEIL,
    CUDNN_POINTWISE_IDENTITY,
    CUDNN_POINTWISE_CMP_EQ,
    CUDNN_POINTWISE_CMP_NEQ,
    CUDNN_POINTWISE_CMP_GT,
    CUDNN_POINTWISE_CMP_GE,
    CUDNN_POINTWISE_CMP_LT,
    CUDNN_POINTWISE_CMP_LE,
    CUDNN_POINTWISE_LOGICAL_AND,
    CUDNN_POINTWISE_LOGICAL_OR,
    CUDNN_POINTWISE_LOGICAL_NOT,
    CUDNN_POINTWISE_BINARY_SELECT,
    CUDNN_POINTWISE_RELU_BWD,
    CUDNN_POINTWISE_GELU_BWD,
    CUDNN_POINTWISE_GELU_APPROX_TANH_BWD,
    CUDNN_POINTWISE_SIGMOID_BWD,
    CUDNN_POINTWISE_TANH_BWD,
    CUDNN_POINTWISE_SWISH_BWD,
    CUDNN_POINTWISE_ELU_BWD,
    CUDNN_POINTWISE_SOFTPLUS_BWD,
    CUDNN_POINTWISE_GEN_INDEX,
    CUDNN_POINTWISE_ADD_SQUARE,
    CUDNN_POINTWISE_MOD,
    CUDNN_POINTWISE_TAN};
static_assert(kModes.back() == CUDNN_POINTWISE_TAN, "one mode per PointwiseMode");

cudnnPointwiseMode_t mode_of(PointwiseMode m) {
  return entry_of(kModes, m, CUDNN_POINTWISE_IDENTITY);
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
