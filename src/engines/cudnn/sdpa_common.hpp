// Pieces shared by the SDPA forward (sdpa.cpp) and backward (sdpa_backward.cpp) lowerings: the
// shape checks, the matmul with optional sequence-length overrides, the scale, and the masked
// scores S = scale * Q.K^T (+ bias) with the padding / causal / window masks applied as cuDNN's
// fused flash-attention engines recognise them (GEN_INDEX row/col, integer compares,
// BINARY_SELECT with the lowest float).
#pragma once

#include <string>
#include <vector>

#include "engines/cudnn/lowering.hpp"

namespace dnngraph::cudnn {

struct SdpaShape {
  int64_t b = 0, hq = 0, hk = 0, hv = 0, sq = 0, skv = 0, d = 0, dv = 0;
  std::vector<int64_t> sdim() const { return {b, hq, sq, skv}; }
};

// The frontend's mask rules (NotSupported naming the op): a left bound, or a bottom-right right
// bound, with s_q > s_kv and no padding mask.
Status sdpa_mask_rules(const std::string& what, const ir::SdpaOptions& a, int64_t sq, int64_t skv,
                       bool padding);
// The backwards' STATS input: NotSupported unless packed [b,h,s_q,1] before cuDNN 9.26.
Status sdpa_check_stats_layout(LowerContext& cx, const std::string& what, const ir::Tensor& stats);

// Descriptors of the optional per-batch sequence lengths (null when not wired).
struct SdpaSeqLens {
  cudnnBackendDescriptor_t q = nullptr, kv = nullptr;
  bool any() const { return q || kv; }
};

// Dropout of P, as cuDNN's fused attention graphs express it: P * MASK * SCALE. MASK comes from
// an RNG operation (Bernoulli with keep probability 1 - p, Philox seeded by SEED / OFFSET;
// written to RNG_DUMP when the graph has it) or is the DROPOUT_MASK tensor; SCALE is the
// constant 1/(1-p) or DROPOUT_SCALE. SCALE_INV (the backward's factor of D) is 1 - p. The mask
// form is refused in the backward (cuDNN computes wrong gradients, docs/cudnn-engine.md). All
// null without dropout.
struct SdpaDropout {
  cudnnBackendDescriptor_t mask = nullptr, scale = nullptr, scale_inv = nullptr;
  bool any() const { return mask != nullptr; }
};
Result<SdpaDropout> sdpa_dropout(LowerContext& cx, const ir::Node& n, const std::string& what,
                                 const ir::SdpaOptions& a, const SdpaShape& s, bool backward);

// NotSupported naming the op and the feature.
Status sdpa_unsupported(const std::string& what, const std::string& feature);

// Checks what the lowering cannot express (ranks, head ratios, strides off 16 bytes) and reads
// the shape.
Result<SdpaShape> sdpa_shape(LowerContext& cx, const ir::Node& n, const std::string& what,
                             const ir::SdpaOptions& a);

// Registers the node's ragged offsets (<X>_RAGGED_OFFSET ports) with the context, so that the
// descriptors of Q, K, V, O, STATS (dO, dQ, dK, dV) carry CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC.
// Call before any of them is lowered.
void sdpa_set_ragged(LowerContext& cx, const ir::Node& n);

// The SEQ_LEN_Q / SEQ_LEN_KV descriptors.
Result<SdpaSeqLens> sdpa_seq_lens(LowerContext& cx, const ir::Node& n);

// K (or V) described transposed over the same memory: [b,h,s,d] -> [b,h,d,s].
TensorView sdpa_transposed(const TensorView& v);

// C = A . B (float accumulation) with the optional GEMM M/N/K override tensors.
Status sdpa_matmul(LowerContext& cx, const std::string& name, cudnnBackendDescriptor_t a,
                   cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c,
                   cudnnBackendDescriptor_t m_override = nullptr,
                   cudnnBackendDescriptor_t n_override = nullptr,
                   cudnnBackendDescriptor_t k_override = nullptr);

// Y is X under another view (dims/strides): cuDNN's RESHAPE operation.
Status sdpa_reshape(LowerContext& cx, const std::string& name, cudnnBackendDescriptor_t x,
                    cudnnBackendDescriptor_t y);

// The scale: the ATTN_SCALE tensor, else the attribute, else 1/sqrt(d).
Result<cudnnBackendDescriptor_t> sdpa_scale(LowerContext& cx, const ir::Node& n,
                                            const std::string& what, const ir::SdpaOptions& a,
                                            int64_t d);

// S = scale * Q.K^T (* each of `factors`, the FP8 descales) (+ BIAS) with the padding mask,
// then the right bound (causal) and the left bound applied; float [b,hq,sq,skv]. `kt` is K
// described as [b,hk,d,skv].
Result<cudnnBackendDescriptor_t> sdpa_masked_scores(
    LowerContext& cx, const ir::Node& n, const std::string& what, const ir::SdpaOptions& a,
    const SdpaShape& s, cudnnBackendDescriptor_t q, cudnnBackendDescriptor_t kt,
    cudnnBackendDescriptor_t scale, const SdpaSeqLens& lens,
    const std::vector<cudnnBackendDescriptor_t>& factors = {});

// x with the padding mask (row < SEQ_LEN_Q and col < SEQ_LEN_KV) applied again: the backward
// re-applies it after subtracting the stats, as cuDNN's own graphs do.
Result<cudnnBackendDescriptor_t> sdpa_padding_select(LowerContext& cx, const std::string& what,
                                                     const std::string& tag,
                                                     cudnnBackendDescriptor_t x, const SdpaShape& s,
                                                     const SdpaSeqLens& lens);

// The node's subgraph `name` ("score_mod" / "score_mod_bprop", sdpa_score_mod.cpp) spliced in
// after `input`: its pointwise nodes on virtual float tensors, graph tensors for its
// SCORE_MOD_IN_* inputs; returns the descriptor of its output (`input` itself when the node has
// no such subgraph).
Result<cudnnBackendDescriptor_t> sdpa_score_mod(LowerContext& cx, const ir::Node& n,
                                                const std::string& what, std::string_view name,
                                                cudnnBackendDescriptor_t input);

}  // namespace dnngraph::cudnn
