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

// One rule per op of the table, named infer_<name> after the op's table name (infer_conv_fprop,
// infer_matmul, ...) and defined in src/ir/ops/<family>.cpp; infer_node dispatches on the
// table, so a new op adds its rule there and nothing here.
#define DNNGRAPH_OP_INFER_DECL(kind, name, Attrs, in, out) \
  Status infer_##name(Node& node, const InferContext& ctx);
DNNGRAPH_OPS(DNNGRAPH_OP_INFER_DECL)
#undef DNNGRAPH_OP_INFER_DECL

// sdpa.cpp: the Q / K / V shape rules and the SdpaOptions rules (masks, scale, padding,
// dropout), shared with sdpa_fp8. Q, K and V must be bound.
Status check_sdpa_common(const Node& node, const SdpaOptions& a);
// sdpa.cpp: the ports every SDPA forward binds (sdpa, sdpa_fp8), each required; the first one
// missing is the error.
struct SdpaFwdPorts {
  Tensor q, k, v, o;
};
Result<SdpaFwdPorts> sdpa_forward_ports(const Node& node);
// sdpa.cpp: the ports every SDPA backward binds (sdpa_backward, sdpa_fp8_backward), each
// required; the first one missing is the error.
struct SdpaBwdPorts {
  Tensor q, k, v, o, d_o, stats, dq, dk, dv;
};
Result<SdpaBwdPorts> sdpa_backward_ports(const Node& node);
// sdpa.cpp: a backward's O and DO [b, h_q, s_q, d_v] and STATS [b, h_q, s_q, 1] against Q and
// V's dims (Q, K, V checked).
Status check_sdpa_backward_dims(const Node& node, const SdpaBwdPorts& p);
// sdpa.cpp: a backward's DQ, DK, DV inferred with the dims, layout and type of Q, K, V.
Status infer_sdpa_gradients(Node& node, const SdpaBwdPorts& p, const InferContext& ctx);
// sdpa.cpp: a forward's STATS output (sdpa, sdpa_fp8): refused with is_inference, required
// without it, inferred as packed [b, h_q, s_q, 1] FLOAT (from Q) unless the user set strides.
Status infer_sdpa_stats(Node& node, bool is_inference, const InferContext& ctx);

// Dispatches on node.kind().
Status infer_node(Node& node, const InferContext& ctx);

}  // namespace dnngraph::ir
