// Internal: one inference-and-check entry point per op family, called by Graph::validate() in
// topological order. Each one reads the node's inputs (dims, strides and data types already
// known), fills what is missing on its outputs (dims, strides, data types, defaulted
// attributes) and checks what the user set. Messages name the op and the tensor by name.
#pragma once

#include "dnngraph/ir/ops.hpp"
#include "dnngraph/status.hpp"
#include "dnngraph/types.hpp"

namespace dnngraph::ir {

// The graph's context types, used to default missing data types.
struct InferContext {
  DataType io = DataType::NotSet;           // non-virtual tensors
  DataType intermediate = DataType::Float;  // virtual tensors
  DataType compute = DataType::Float;       // node compute type
};

Status infer_conv(Node& node, const InferContext& ctx);  // conv_fprop, conv_dgrad, conv_wgrad
Status infer_matmul(Node& node, const InferContext& ctx);
Status infer_pointwise(Node& node, const InferContext& ctx);
Status infer_reduction(Node& node, const InferContext& ctx);
Status infer_norm_forward(Node& node, const InferContext& ctx);
Status infer_norm_backward(Node& node, const InferContext& ctx);
Status infer_softmax(Node& node, const InferContext& ctx);
Status infer_sdpa(Node& node, const InferContext& ctx);
Status infer_sdpa_backward(Node& node, const InferContext& ctx);
Status infer_sdpa_fp8(Node& node, const InferContext& ctx);
Status infer_sdpa_fp8_backward(Node& node, const InferContext& ctx);
// sdpa.cpp: the Q / K / V shape rules and the SdpaOptions rules (masks, scale, padding,
// dropout), shared with sdpa_fp8. Q, K and V must be bound.
Status check_sdpa_common(const Node& node, const SdpaOptions& a);
// sdpa.cpp: a forward's STATS output (sdpa, sdpa_fp8): refused with is_inference, required
// without it, inferred as packed [b, h_q, s_q, 1] FLOAT (from Q) unless the user set strides.
Status infer_sdpa_stats(Node& node, bool is_inference, const InferContext& ctx);
Status infer_slice(Node& node, const InferContext& ctx);
Status infer_genstats(Node& node, const InferContext& ctx);
Status infer_transpose(Node& node, const InferContext& ctx);
Status infer_reshape(Node& node, const InferContext& ctx);
Status infer_concat(Node& node, const InferContext& ctx);
Status infer_block_scale_quantize(Node& node, const InferContext& ctx);
Status infer_block_scale_dequantize(Node& node, const InferContext& ctx);
Status infer_moe_grouped_matmul(Node& node, const InferContext& ctx);

// Dispatches on node.kind().
Status infer_node(Node& node, const InferContext& ctx);

}  // namespace dnngraph::ir
