// Shape rules of block_scale_quantize and block_scale_dequantize (the cuDNN frontend's; the
// OCP MX and NVIDIA NVFP4 block scaling). Quantize: blocks of block_size elements along the
// axis (default the last dim), which must divide it; Y has X's dims and the quantized type the
// caller sets (FP8_E4M3, FP8_E5M2 or FP4_E2M1); SCALE has the axis divided by block_size and
// type FP8_E8M0 (MX, the default) or FP8_E4M3 (NVFP4: Y FP4_E2M1). Dequantize: block_size
// holds one entry per trailing dim, and SCALE's dims times the blocks are X's.
#include <algorithm>

#include "ir/ops/common.hpp"

namespace dnngraph::ir {

namespace {

// Sets dims (or checks the caller's) and default strides packed in `order` (outermost first).
Status fill(const Node& n, Role role, const Tensor& t, const std::vector<int64_t>& dims,
            const std::vector<int64_t>& order) {
  DNNGRAPH_TRY(set_output_dims(n, role, t, dims));
  if (t->stride.empty()) t->stride = packed_strides(dims, order);
  return Status::ok();
}

}  // namespace

Status infer_block_scale_quantize(Node& n, const InferContext&) {
  const auto& a = n.as<BlockScaleQuantizeAttrs>();
  DNNGRAPH_PORT(x, required_input(n, Role::X));
  DNNGRAPH_PORT(y, required_output(n, Role::Y));
  DNNGRAPH_PORT(scale, required_output(n, Role::SCALE));
  DNNGRAPH_TRY(check_rank(n, Role::X, x, 1, SIZE_MAX));
  const int64_t rank = static_cast<int64_t>(x->dim.size());
  const int64_t axis = a.axis.value_or(rank - 1);
  if (axis < 0 || axis >= rank)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": axis ", axis, " is not a dim of ",
                      port_label(Role::X, x), " (dims ", dims_str(x->dim), "); expected 0 to ",
                      rank - 1);
  const int64_t extent = x->dim[static_cast<size_t>(axis)];
  if (a.block_size < 1 || extent % a.block_size != 0)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": block_size ", a.block_size,
                      " must be 1 or more and divide dim ", axis, " (", extent, ") of ",
                      port_label(Role::X, x), "; pad X or pick a divisor (MX formats use 32)");
  if (!is_floating(x->data_type))
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(Role::X, x),
                      " has data type ", data_type_name(x->data_type),
                      "; block_scale_quantize reads a floating-point tensor");
  if (y->data_type != DataType::FP8_E4M3 && y->data_type != DataType::FP8_E5M2 &&
      y->data_type != DataType::FP4_E2M1)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": output ", port_label(Role::Y, y),
                      " has data type ", data_type_name(y->data_type),
                      "; set it to the quantized type: FP8_E4M3, FP8_E5M2 (MXFP8) or FP4_E2M1 "
                      "(MXFP4, NVFP4)");
  if (scale->data_type == DataType::NotSet) scale->data_type = DataType::FP8_E8M0;
  const bool nvfp4 = scale->data_type == DataType::FP8_E4M3 && y->data_type == DataType::FP4_E2M1;
  if (scale->data_type != DataType::FP8_E8M0 && !nvfp4)
    return make_error(
        ErrorCode::InvalidGraph, op_label(n), ": output ", port_label(Role::SCALE, scale),
        " has data type ", data_type_name(scale->data_type), " (Y is ",
        data_type_name(y->data_type),
        "); block scales are FP8_E8M0 for the MX formats (leave it unset), or FP8_E4M3 for "
        "NVFP4, whose Y is FP4_E2M1");
  std::vector<int64_t> order = order_like(x, x->dim.size());
  if (a.transpose) {  // the axis innermost, the other dims in X's order around it
    std::vector<int64_t> inner_first(order.rbegin(), order.rend());
    std::rotate(inner_first.begin(), std::find(inner_first.begin(), inner_first.end(), axis),
                inner_first.end());
    order.assign(inner_first.rbegin(), inner_first.rend());
  }
  std::vector<int64_t> sdims = x->dim;
  sdims[static_cast<size_t>(axis)] = extent / a.block_size;
  DNNGRAPH_TRY(fill(n, Role::Y, y, x->dim, order));
  return fill(n, Role::SCALE, scale, sdims, order);
}

Status infer_block_scale_dequantize(Node& n, const InferContext& ctx) {
  const auto& a = n.as<BlockScaleDequantizeAttrs>();
  DNNGRAPH_PORT(x, required_input(n, Role::X));
  DNNGRAPH_PORT(scale, required_input(n, Role::SCALE));
  DNNGRAPH_PORT(y, required_output(n, Role::Y));
  const size_t rank = x->dim.size();
  if (a.block_size.empty() || a.block_size.size() > rank)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": block_size ", dims_str(a.block_size),
                      " must have 1 to ", rank, " entries (one per trailing dim of ",
                      port_label(Role::X, x), ", dims ", dims_str(x->dim), ")");
  DNNGRAPH_TRY(check_rank(n, Role::SCALE, scale, rank, rank));
  const size_t lead = rank - a.block_size.size();
  for (size_t d = 0; d < rank; ++d) {
    const int64_t b = d < lead ? 1 : a.block_size[d - lead];
    if (b < 1 || x->dim[d] % b != 0 || scale->dim[d] != x->dim[d] / b)
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": dim ", d, " of ",
                        port_label(Role::SCALE, scale), " (dims ", dims_str(scale->dim),
                        ") must be dim ", d, " of ", port_label(Role::X, x), " (dims ",
                        dims_str(x->dim), ") divided by its block ", b, " (block_size ",
                        dims_str(a.block_size), ")");
  }
  if (!is_floating(scale->data_type))
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(Role::SCALE, scale),
                      " has data type ", data_type_name(scale->data_type),
                      "; block scales are floating point (FP8_E8M0 for the MX formats)");
  return infer_output(n, Role::Y, y, x->dim, x, ctx, DataType::Float);
}

}  // namespace dnngraph::ir
