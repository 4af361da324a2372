// block_scale_quantize -> OPERATION_BLOCK_SCALE_QUANTIZE and block_scale_dequantize ->
// OPERATION_BLOCK_SCALE_DEQUANTIZE (cuDNN >= 9.7), with the attributes the frontend sets: the
// tensors, the math precision (the node's compute type) and the block size (one int32 for
// quantize, whose axis the SCALE tensor's dims say; one per dim for dequantize, padded with
// leading 1s to the descriptors' rank, as canonicalize() pads the tensors). cuDNN runs them
// fused with a matmul on GPUs with block-scaled tensor cores; elsewhere its engine search
// refuses the graph and says why. Not yet run on a GPU (docs/compatibility.md).
#include "engines/cudnn/lowering.hpp"

namespace dnngraph::cudnn {

Status lower_block_scale_quantize(LowerContext& cx, const ir::Node& n) {
  const std::string what = detail::cat("block_scale_quantize '", n.name, "'");
  const auto& a = n.as<ir::BlockScaleQuantizeAttrs>();
  DNNGRAPH_ASSIGN_OR_RETURN(auto tx, cx.tensor(n.input(Role::X)));
  DNNGRAPH_ASSIGN_OR_RETURN(auto ty, cx.tensor(n.output(Role::Y)));
  DNNGRAPH_ASSIGN_OR_RETURN(auto ts, cx.tensor(n.output(Role::SCALE)));
  DNNGRAPH_ASSIGN_OR_RETURN(
      auto op, Descriptor::create(CUDNN_BACKEND_OPERATION_BLOCK_SCALE_QUANTIZE_DESCRIPTOR, what));
  DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_BLOCK_SCALE_QUANTIZE_XDESC, tx));
  DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_BLOCK_SCALE_QUANTIZE_YDESC, ty));
  DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_BLOCK_SCALE_QUANTIZE_SCALE_DESC, ts));
  DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_BLOCK_SCALE_QUANTIZE_MATH_PREC, CUDNN_TYPE_DATA_TYPE,
                      to_cudnn(cx.compute_type(n))));
  const int32_t block = static_cast<int32_t>(a.block_size);
  DNNGRAPH_TRY(
      op.set(CUDNN_ATTR_OPERATION_BLOCK_SCALE_QUANTIZE_BLOCK_SIZE, CUDNN_TYPE_INT32, block));
  return cx.add_op(std::move(op));
}

Status lower_block_scale_dequantize(LowerContext& cx, const ir::Node& n) {
  const std::string what = detail::cat("block_scale_dequantize '", n.name, "'");
  const auto& a = n.as<ir::BlockScaleDequantizeAttrs>();
  const ir::Tensor x = n.input(Role::X);
  DNNGRAPH_ASSIGN_OR_RETURN(auto tx, cx.tensor(x));
  DNNGRAPH_ASSIGN_OR_RETURN(auto ts, cx.tensor(n.input(Role::SCALE)));
  DNNGRAPH_ASSIGN_OR_RETURN(auto ty, cx.tensor(n.output(Role::Y)));
  DNNGRAPH_ASSIGN_OR_RETURN(
      auto op, Descriptor::create(CUDNN_BACKEND_OPERATION_BLOCK_SCALE_DEQUANTIZE_DESCRIPTOR, what));
  DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_BLOCK_SCALE_DEQUANTIZE_XDESC, tx));
  DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_BLOCK_SCALE_DEQUANTIZE_SCALE_DESC, ts));
  DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_BLOCK_SCALE_DEQUANTIZE_YDESC, ty));
  DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_BLOCK_SCALE_DEQUANTIZE_MATH_PREC, CUDNN_TYPE_DATA_TYPE,
                      to_cudnn(cx.compute_type(n))));
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
