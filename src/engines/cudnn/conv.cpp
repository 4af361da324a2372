// Convolution fprop / dgrad / wgrad -> CONVOLUTION descriptor + one operation descriptor.
#include "engines/cudnn/lowering.hpp"

namespace dnngraph::cudnn {
namespace {

std::vector<int64_t> or_fill(const std::vector<int64_t>& v, size_t n, int64_t fill) {
  return v.empty() ? std::vector<int64_t>(n, fill) : v;
}

// Which ports each direction reads and writes, and the attribute names they map to.
struct ConvPorts {
  cudnnBackendDescriptorType_t op;
  ir::Role in0;  // first input role
  ir::Role in1;  // second input role
  ir::Role out;  // output role
  cudnnBackendAttributeName_t a_in0, a_in1, a_out, a_conv, a_alpha, a_beta;
};

// The three directions differ only in their ports and attribute names (ConvPorts).
Status lower_conv(LowerContext& cx, const ir::Node& n) {
  const std::string what = detail::cat(op_kind_name(n.kind()), " '", n.name, "'");
  ConvPorts p{};
  const ir::ConvAttrs* attrs = nullptr;
  switch (n.kind()) {
    case ir::OpKind::ConvFprop:
      attrs = &n.as<ir::ConvFpropAttrs>();
      p = {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
           Role::X,
           Role::W,
           Role::Y,
           CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
           CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
           CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
           CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
           CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
           CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA};
      break;
    case ir::OpKind::ConvDgrad:
      attrs = &n.as<ir::ConvDgradAttrs>();
      p = {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
           Role::DY,
           Role::W,
           Role::DX,
           CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
           CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
           CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
           CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
           CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
           CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA};
      break;
    case ir::OpKind::ConvWgrad:
      attrs = &n.as<ir::ConvWgradAttrs>();
      p = {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
           Role::DY,
           Role::X,
           Role::DW,
           CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
           CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
           CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
           CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
           CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
           CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA};
      break;
    default:
      return make_error(ErrorCode::Internal, what, ": not a convolution");
  }
  const ir::Tensor in0 = n.input(p.in0), in1 = n.input(p.in1), out = n.output(p.out);
  const size_t spatial = cx.view(out).dim.size() - 2;
  if (spatial < 1 || spatial > 3)
    return make_error(ErrorCode::NotSupported, what, ": cuDNN convolutions take 1 to 3 spatial ",
                      "dims but ", out->describe(), " has ", spatial);

  DNNGRAPH_ASSIGN_OR_RETURN(Descriptor c, Descriptor::create(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR,
                                                             what + " (conv desc)"));
  const cudnnDataType_t comp = to_cudnn(cx.compute_type(n));
  const cudnnConvolutionMode_t mode =
      attrs->cross_correlation ? CUDNN_CROSS_CORRELATION : CUDNN_CONVOLUTION;
  const int64_t spatial_dims = static_cast<int64_t>(spatial);
  DNNGRAPH_TRY(c.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, comp));
  DNNGRAPH_TRY(c.set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, mode));
  DNNGRAPH_TRY(c.set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, spatial_dims));
  DNNGRAPH_TRY(c.set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64,
                     or_fill(attrs->dilation, spatial, 1)));
  DNNGRAPH_TRY(c.set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64,
                     or_fill(attrs->stride, spatial, 1)));
  DNNGRAPH_TRY(c.set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64,
                     or_fill(attrs->pre_padding, spatial, 0)));
  DNNGRAPH_TRY(c.set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64,
                     or_fill(attrs->post_padding, spatial, 0)));
  DNNGRAPH_TRY(c.finalize(ErrorCode::NotSupported));

  DNNGRAPH_ASSIGN_OR_RETURN(auto t0, cx.tensor(in0));
  DNNGRAPH_ASSIGN_OR_RETURN(auto t1, cx.tensor(in1));
  DNNGRAPH_ASSIGN_OR_RETURN(auto to, cx.tensor(out));
  DNNGRAPH_ASSIGN_OR_RETURN(Descriptor op, Descriptor::create(p.op, what));
  const float alpha = 1.0f, beta = 0.0f;
  DNNGRAPH_TRY(op.set(p.a_in0, t0));
  DNNGRAPH_TRY(op.set(p.a_in1, t1));
  DNNGRAPH_TRY(op.set(p.a_out, to));
  DNNGRAPH_TRY(op.set(p.a_conv, c));
  DNNGRAPH_TRY(op.set(p.a_alpha, CUDNN_TYPE_FLOAT, alpha));
  DNNGRAPH_TRY(op.set(p.a_beta, CUDNN_TYPE_FLOAT, beta));
  cx.keep(std::move(c));
  return cx.add_op(std::move(op));
}

}  // namespace

Status lower_conv_fprop(LowerContext& cx, const ir::Node& n) { return lower_conv(cx, n); }
Status lower_conv_dgrad(LowerContext& cx, const ir::Node& n) { return lower_conv(cx, n); }
Status lower_conv_wgrad(LowerContext& cx, const ir::Node& n) { return lower_conv(cx, n); }

}  // namespace dnngraph::cudnn
