// block_scale_quantize -> OPERATION_BLOCK_SCALE_QUANTIZE and block_scale_dequantize ->
// OPERATION_BLOCK_SCALE_DEQUANTIZE (cuDNN >= 9.7), with the attributes the frontend sets: the
// tensors, the math precision (the node's compute type) and the block size (one int32 for
// quantize, whose axis the SCALE tensor's dims say; one per dim for dequantize, padded with
// leading 1s to the descriptors' rank, as canonicalize() pads the tensors). cuDNN runs them
// fused with a matmul on GPUs with block-scaled tensor cores; elsewhere its engine search
// refuses the graph and says why. Not yet run on a GPU (docs/compatibility.md).
#include "engines/cudnn/lowering.hpp"

namespace dnngraph::cudnn {

namespace {

// The attributes of one of the two operations.
struct BlockScaleAttrs {
  cudnnBackendDescriptorType_t op;
  cudnnBackendAttributeName_t x, y, scale, math_prec;
};

// The operation's descriptor with its X, Y and SCALE tensors and the math precision (the node's
// compute type) set.
Result<Descriptor> block_scale_op(LowerContext& cx, const ir::Node& n, const std::string& what,
                                  const BlockScaleAttrs& at, const ir::Tensor& x,
                                  const ir::Tensor& y, const ir::Tensor& scale) {
  DNNGRAPH_ASSIGN_OR_RETURN(auto tx, cx.tensor(x));
  DNNGRAPH_ASSIGN_OR_RETURN(auto ty, cx.tensor(y));
  DNNGRAPH_ASSIGN_OR_RETURN(auto ts, cx.tensor(scale));
  DNNGRAPH_ASSIGN_OR_RETURN(auto op, Descriptor::create(at.op, what));
  DNNGRAPH_TRY(op.set(at.x, tx));
  DNNGRAPH_TRY(op.set(at.y, ty));
  DNNGRAPH_TRY(op.set(at.scale, ts));
  DNNGRAPH_TRY(op.set(at.math_prec, CUDNN_TYPE_DATA_TYPE, to_cudnn(cx.compute_type(n))));
  return op;
}

}  // namespace

Status lower_block_scale_quantize(LowerContext& cx, const ir::Node& n) {
  const std::string what = detail::cat("block_scale_quantize '", n.name, "'");
  const auto& a = n.as<ir::BlockScaleQuantizeAttrs>();
  DNNGRAPH_ASSIGN_OR_RETURN(
      auto op, block_scale_op(cx, n, what,
                              {CUDNN_BACKEND_OPERATION_BLOCK_SCALE_QUANTIZE_DESCRIPTOR,
                               CUDNN_ATTR_OPERATION_BLOCK_SCALE_QUANTIZE_XDESC,
                               CUDNN_ATTR_OPERATION_BLOCK_SCALE_QUANTIZE_YDESC,
                               CUDNN_ATTR_OPERATION_BLOCK_SCALE_QUANTIZE_SCALE_DESC,
                               CUDNN_ATTR_OPERATION_BLOCK_SCALE_QUANTIZE_MATH_PREC},
                              n.input(Role::X), n.output(Role::Y), n.output(Role::SCALE)));
  const int32_t block = static_cast<int32_t>(a.block_size);
  DNNGRAPH_TRY(
      op.set(CUDNN_ATTR_OPERATION_BLOCK_SCALE_QUANTIZE_BLOCK_SIZE, CUDNN_TYPE_INT32, block));
  return cx.add_op(std::move(op));
}

Status lower_block_scale_dequantize(LowerContext& cx, const ir::Node& n) {
  const std::string what = detail::cat("block_scale_dequantize '", n.name, "'");
  const auto& a = n.as<ir::BlockScaleDequantizeAttrs>();
  const ir::Tensor x = n.input(Role::X);
  DNNGRAPH_ASSIGN_OR_RETURN(
      auto op, block_scale_op(cx, n, what,
                              {CUDNN_BACKEND_OPERATION_BLOCK_SCALE_DEQUANTIZE_DESCRIPTOR,
                               CUDNN_ATTR_OPERATION_BLOCK_SCALE_DEQUANTIZE_XDESC,
                               CUDNN_ATTR_OPERATION_BLOCK_SCALE_DEQUANTIZE_YDESC,
                               CUDNN_ATTR_OPERATION_BLOCK_SCALE_DEQUANTIZE_SCALE_DESC,
                               CUDNN_ATTR_OPERATION_BLOCK_SCALE_DEQUANTIZE_MATH_PREC},
                              x, n.output(Role::Y), n.input(Role::SCALE)));
  const size_t rank = cx.view(x).dim.size();
  std::vector<int32_t> blocks(rank - a.block_size.size(), 1);
  for (int64_t b : a.block_size) blocks.push_back(static_cast<int32_t>(b));
  DNNGRAPH_TRY(
      op.set(CUDNN_ATTR_OPERATION_BLOCK_SCALE_DEQUANTIZE_BLOCK_SIZE, CUDNN_TYPE_INT32, blocks));
  if (a.negative_scale) {
    const bool neg = true;
    DNNGRAPH_TRY(
        op.set(CUDNN_ATTR_OPERATION_BLOCK_SCALE_DEQUANTIZE_NEG_SCALE, CUDNN_TYPE_BOOLEAN, neg));
  }
  return cx.add_op(std::move(op));
}

}  // namespace dnngraph::cudnn
