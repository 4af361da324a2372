// The op table: one struct of attributes per op family, each declaring its fields once
// (fields()), the table DNNGRAPH_OPS that names each family and lists its ports, and the Node
// that carries one. Everything that walks ops (OpKind, names, JSON, fingerprint, dot, to_table,
// port checks, and each layer's dispatch: infer_<name>, run_<name>, lower_<name>,
// bind_op_<name>) derives from these declarations; docs/adding-an-op.md says how to add one.
#pragma once

#include <array>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "dnngraph/ir/roles.hpp"
#include "dnngraph/ir/tensor.hpp"
#include "dnngraph/ir/window.hpp"

namespace dnngraph::ir {

// Each attribute struct declares its fields once, in a static `fields(self, visit)` that calls
// visit(key, member) (or visit(key, member, FieldUse::Required)) per field, in a fixed order.
// key is the field's name in JSON, Python and messages. Field types: bool, int64_t, double,
// std::optional of those two, std::vector<int64_t>, and the enumerations of types.hpp (by name).
enum class FieldUse { Optional, Required };  // Required: a JSON file must give it

// Calls visit(key, field[, use]) for every field of the attribute struct `a` (const or not).
template <class A, class V>
void for_each_field(A& a, V&& visit) {
  std::remove_const_t<A>::fields(a, visit);
}

// Convolution (2-D when 2 spatial dims, 3-D when 3). Padding is per side.
struct ConvAttrs {
  std::vector<int64_t> pre_padding;   // one per spatial dim
  std::vector<int64_t> post_padding;  // one per spatial dim
  std::vector<int64_t> stride;
  std::vector<int64_t> dilation;
  // Groups are read from the shapes (C_in / W's C); kept here for validation when set.
  std::optional<int64_t> group_count;
  bool cross_correlation = true;  // false = true convolution (flipped filter)

  ConvAttrs& set_padding(std::vector<int64_t> p) {
    pre_padding = p;
    post_padding = std::move(p);
    return *this;
  }
  ConvAttrs& set_pre_padding(std::vector<int64_t> p) {
    pre_padding = std::move(p);
    return *this;
  }
  ConvAttrs& set_post_padding(std::vector<int64_t> p) {
    post_padding = std::move(p);
    return *this;
  }
  ConvAttrs& set_stride(std::vector<int64_t> s) {
    stride = std::move(s);
    return *this;
  }
  ConvAttrs& set_dilation(std::vector<int64_t> d) {
    dilation = std::move(d);
    return *this;
  }
  ConvAttrs& set_group_count(int64_t g) {
    group_count = g;
    return *this;
  }
  bool operator==(const ConvAttrs&) const = default;
  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("pre_padding", s.pre_padding);
    v("post_padding", s.post_padding);
    v("stride", s.stride);
    v("dilation", s.dilation);
    v("group_count", s.group_count);
    v("cross_correlation", s.cross_correlation);
  }
};
// Setters that return the derived type, so `ConvFpropAttrs().set_padding({1, 1})` stays a
// ConvFpropAttrs.
template <class Self>
struct ConvSetters : ConvAttrs {
  Self& set_padding(std::vector<int64_t> p) {
    ConvAttrs::set_padding(std::move(p));
    return self();
  }
  Self& set_pre_padding(std::vector<int64_t> p) {
    ConvAttrs::set_pre_padding(std::move(p));
    return self();
  }
  Self& set_post_padding(std::vector<int64_t> p) {
    ConvAttrs::set_post_padding(std::move(p));
    return self();
  }
  Self& set_stride(std::vector<int64_t> s) {
    ConvAttrs::set_stride(std::move(s));
    return self();
  }
  Self& set_dilation(std::vector<int64_t> d) {
    ConvAttrs::set_dilation(std::move(d));
    return self();
  }
  Self& set_group_count(int64_t g) {
    ConvAttrs::set_group_count(g);
    return self();
  }
  bool operator==(const ConvSetters&) const = default;

 private:
  Self& self() { return static_cast<Self&>(*this); }
};
struct ConvFpropAttrs : ConvSetters<ConvFpropAttrs> {
  bool operator==(const ConvFpropAttrs&) const = default;
};  // X, W -> Y
struct ConvDgradAttrs : ConvSetters<ConvDgradAttrs> {
  bool operator==(const ConvDgradAttrs&) const = default;
};  // DY, W -> DX
struct ConvWgradAttrs : ConvSetters<ConvWgradAttrs> {
  bool operator==(const ConvWgradAttrs&) const = default;
};  // DY, X -> DW

// C[..., M, N] = A[..., M, K] x B[..., K, N]; batch dims broadcast (1 against n).
// Optional M/N/K override tensors are not modelled (dynamic shapes go through the graph).
struct MatmulAttrs {
  std::optional<double> padding_value;  // reserved; must be unset
  bool operator==(const MatmulAttrs&) const = default;
  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("padding_value", s.padding_value);
  }
};

// OUT_0 = f(IN_0[, IN_1[, IN_2]]). Inputs broadcast to the output's dims.
struct PointwiseAttrs {
  PointwiseMode mode = PointwiseMode::Identity;
  std::optional<double> relu_lower_clip;        // RELU / RELU_BWD: max(x, lower)
  std::optional<double> relu_upper_clip;        // RELU: min(x, upper)
  std::optional<double> relu_lower_clip_slope;  // RELU: leaky slope below the lower clip
  std::optional<double> elu_alpha;              // ELU, ELU_BWD (default 1)
  std::optional<double> softplus_beta;          // SOFTPLUS, SOFTPLUS_BWD (default 1)
  std::optional<double> swish_beta;             // SILU, SILU_BWD (default 1)
  std::optional<int64_t> axis;                  // reserved for GEN_INDEX-like modes
  bool operator==(const PointwiseAttrs&) const = default;
  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("mode", s.mode, FieldUse::Required);
    v("relu_lower_clip", s.relu_lower_clip);
    v("relu_upper_clip", s.relu_upper_clip);
    v("relu_lower_clip_slope", s.relu_lower_clip_slope);
    v("elu_alpha", s.elu_alpha);
    v("softplus_beta", s.softplus_beta);
    v("swish_beta", s.swish_beta);
    v("axis", s.axis);
  }
};

// Y = reduce(X) over every dim where Y's dim is 1 and X's is not.
struct ReductionAttrs {
  ReductionMode mode = ReductionMode::Add;
  bool operator==(const ReductionAttrs&) const = default;
  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("mode", s.mode, FieldUse::Required);
  }
};

enum class NormKind : int { LayerNorm, RmsNorm, BatchNorm, InstanceNorm, AdaLayerNorm };
// "LAYER_NORM", "RMS_NORM", "BATCH_NORM", "INSTANCE_NORM", "ADA_LAYER_NORM"
std::string_view norm_kind_name(NormKind k);
std::optional<NormKind> norm_kind_from_name(std::string_view name);

// Forward norms. Ports: X, SCALE, BIAS, EPSILON, [MOMENTUM, PREV_RUNNING_MEAN, PREV_RUNNING_VAR
// (batchnorm training), MEAN, INV_VARIANCE (batchnorm inference)] -> Y, [MEAN, INV_VARIANCE,
// NEXT_RUNNING_MEAN, NEXT_RUNNING_VAR]. Layer/RMS norm normalize over every dim but the first
// (the batch dim); batchnorm normalizes over every dim but the channel dim (dim 1); instance
// norm over the spatial dims (statistics per sample and channel); adaptive layer norm over the
// dims 1.. where SCALE is not 1 (SCALE / BIAS per sample: [N|1, 1.., D..]).
struct NormFwdAttrs {
  NormKind kind = NormKind::LayerNorm;
  NormForwardPhase phase = NormForwardPhase::Training;
  bool operator==(const NormFwdAttrs&) const = default;
  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("norm", s.kind);
    v("phase", s.phase);
  }
};
// Backward norms. Ports: DY, X, SCALE, MEAN (not for rmsnorm), INV_VARIANCE -> DX, DSCALE, [DBIAS].
struct NormBwdAttrs {
  NormKind kind = NormKind::LayerNorm;
  bool operator==(const NormBwdAttrs&) const = default;
  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("norm", s.kind);
  }
};

// Y = softmax(X) along the last dim; optional STATS = logsumexp (dims with last dim 1).
struct SoftmaxAttrs {
  bool operator==(const SoftmaxAttrs&) const = default;
  template <class S, class V>
  static void fields(S&, V&&) {}
};

// Scaled dot-product attention. Layout: Q [b, h_q, s_q, d], K [b, h_k, s_kv, d],
// V [b, h_v, s_kv, d_v] (any strides; h_q a multiple of h_k and h_v for GQA/MQA).
// Optional ports: ATTN_SCALE (pass-by-value), BIAS [b|1, h|1, s_q, s_kv], SEQ_LEN_Q / SEQ_LEN_KV
// [b,1,1,1] int32 (padding mask), SEED / OFFSET (dropout by probability, int64 pass-by-value
// or device), DROPOUT_MASK [b|1, h_q|1, s_q, s_kv] floating + DROPOUT_SCALE (one floating
// element) (dropout with a given mask: P * MASK * SCALE, values used as given; both together,
// never with dropout_probability / SEED / OFFSET).
// Outputs: O [b, h_q, s_q, d_v], STATS [b, h_q, s_q, 1] fp32 (log-sum-exp; packed by default,
// whatever Q's layout) when not inference,
// RNG_DUMP [b, h_q, s_q, s_kv] floating (only with dropout_probability > 0): the keep mask the
// engine drew, 1 kept / 0 dropped, e.g. to replay it through DROPOUT_MASK elsewhere.
// SINK_TOKEN [1, h_q, 1, 1] FLOAT (optional, the frontend's sink_token): one extra logit per
// query head that joins every row's softmax without a value row (attention sinks):
// m' = max(rowmax, sink[h]), P = exp(s - m') / (sum exp(s - m') + exp(sink[h] - m')),
// STATS = m' + log(that sum). The backward takes the same SINK_TOKEN and may output
// DSINK_TOKEN [1, h_q, 1, 1] FLOAT = -sum over (b, s_q) of exp(sink[h] - STATS) * rowsum(dO * O).
// SCORE_MAX / SCORE_SUM_EXP [b, h_q, s_q, 1] (optional outputs, the frontend's score_max /
// score_sum_exp; FLOAT and packed unless set): the row max m' of the masked scores (with the
// sink) and sum exp(s - m') (with the sink's term), so STATS = m' + log(SCORE_SUM_EXP). Both
// or neither, and never with STATS (cuDNN's composite softmax before 9.21 outputs stats only,
// max and sum_exp only, or none), so in inference. A row that attends no key gives -inf in
// both (cuDNN 9.19's value for padded rows) and STATS -inf.
// Ragged (THD) tensors: <X>_RAGGED_OFFSET [b+1,1,1,1] INT32/INT64 for X in Q, K, V, O, STATS
// (and DO, DQ, DK, DV in the backward): sequence i of X starts at element offset[i] *
// X's ragged_offset_multiplier, replacing i * X's batch stride (the other strides hold). Only
// with padding_mask; rows past a sequence's length are neither read nor written. Set them as
// the frontend does, with X->ragged_offset (TensorAttrs); validate() binds the ports.
// Paged K/V (forward): PAGE_TABLE_K / PAGE_TABLE_V [b, 1, pages, 1] INT32; K / V are then page
// containers [num_pages, h, page_size, d] and key j of sequence i is row j % page_size of page
// table[i][j / page_size]; s_kv is paged_attention_max_seq_len_kv or pages x page_size. Only
// with padding_mask.
// The options forward and backward share (the backward must be given the forward's).
struct SdpaOptions {
  std::optional<double> attn_scale;  // used when no ATTN_SCALE tensor; default 1/sqrt(d)
  bool causal = false;               // shorthand for diagonal_alignment + right_bound = 0
  DiagonalAlignment diagonal_alignment = DiagonalAlignment::TopLeft;
  // The cuDNN frontend's diagonal_band_left_bound / sliding_window_length: a window of
  // left_bound keys ending on the diagonal (>= 1); keys with col <= row' - left_bound are masked.
  std::optional<int64_t> left_bound;
  std::optional<int64_t> right_bound;  // keys with col > row' + right_bound are masked
  bool padding_mask = false;           // SEQ_LEN_Q / SEQ_LEN_KV present
  std::optional<double> dropout_probability;
  // The cuDNN frontend's use_alibi_mask: adds slope[h] * (col - row) to the scores after the
  // bias, with the frontend's per-query-head slopes (sdpa_alibi_slopes). Needs causal masking
  // (right bound 0) with top-left alignment, as the frontend requires.
  bool alibi_mask = false;
  // The frontend's max_total_seq_len_q / _kv: the largest total of the sequence lengths of the
  // ragged (THD) Q / K-V over the batch (a workspace hint; only with ragged offsets). The
  // reference engine checks the lengths it is given against them.
  std::optional<int64_t> max_total_seq_len_q;
  std::optional<int64_t> max_total_seq_len_kv;
  bool operator==(const SdpaOptions&) const = default;
  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("attn_scale", s.attn_scale);
    v("causal", s.causal);
    v("diagonal_alignment", s.diagonal_alignment);
    v("left_bound", s.left_bound);
    v("right_bound", s.right_bound);
    v("padding_mask", s.padding_mask);
    v("dropout_probability", s.dropout_probability);
    v("alibi_mask", s.alibi_mask);
    v("max_total_seq_len_q", s.max_total_seq_len_q);
    v("max_total_seq_len_kv", s.max_total_seq_len_kv);
  }
};
// ALiBi slopes of `heads` query heads as the cuDNN frontend defines them: with n the largest
// power of two <= heads, 2^(-8 (i+1) / n) for i < n, then 2^(-4 (2i+1) / n) for the remaining
// heads; computed in float like the frontend (the value cuDNN reads), widened to double.
std::vector<double> sdpa_alibi_slopes(int64_t heads);
struct Node;
// The logical s_kv of a validated sdpa / sdpa_backward node: K's dim 2, or with page tables
// paged_max_seq_len_kv, else a dense K / V's dim 2, else the fewest rows a page table addresses.
int64_t sdpa_kv_length(const Node& n);
struct SdpaAttrs : SdpaOptions {
  bool is_inference = true;  // false: also write STATS (needed by the backward)
  // The frontend's paged_attention_max_seq_len_kv: the logical s_kv when K and V are page
  // containers (PAGE_TABLE_K / PAGE_TABLE_V); default: pages per sequence x page size.
  std::optional<int64_t> paged_max_seq_len_kv;
  bool operator==(const SdpaAttrs&) const = default;
  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("is_inference", s.is_inference);
    SdpaOptions::fields(s, v);
    v("paged_attention_max_seq_len_kv", s.paged_max_seq_len_kv);
  }
};
// Ports: Q, K, V, O, DO, STATS, [ATTN_SCALE, BIAS, SEQ_LEN_Q, SEQ_LEN_KV, SEED, OFFSET,
// DROPOUT_MASK, DROPOUT_SCALE, SINK_TOKEN] -> DQ, DK, DV, [DBIAS, DSINK_TOKEN]. No RNG_DUMP: the
// backward redraws the forward's mask from SEED / OFFSET, or is given it through DROPOUT_MASK.
struct SdpaBwdAttrs : SdpaOptions {
  bool operator==(const SdpaBwdAttrs&) const = default;
  // Fields older files may hold that no longer mean anything: read and ignored.
  static constexpr std::array<std::string_view, 1> kRetiredFields = {"is_inference"};
};

// FP8 attention with per-tensor scaling (the cuDNN frontend's sdpa_fp8 / sdpa_fp8_backward).
// Q, K, V (and in the backward O's gradient DO) are FP8_E4M3 or FP8_E5M2; every DESCALE_* /
// SCALE_* is one FLOAT element ([1,1,1,1]); every AMAX_* output is FLOAT [1,1,1,1] (always
// made by the builder; virtual unless marked as an output).
// Forward: S = attn_scale * (Q.K^T) * DESCALE_Q * DESCALE_K, masked as sdpa; P = softmax(S)
// (STATS as sdpa); AMAX_S = max |P|; in flash order, E = exp(S - rowmax),
// P8 = fp8(E * SCALE_S) in Q's type, X = (P8.V) / rowsum(E) * DESCALE_S * DESCALE_V;
// AMAX_O = max |X|; O = X * SCALE_O in O's type.
// Backward (Q, K, V, O, DO, STATS): D = rowsum(DO * O) * DESCALE_DO * DESCALE_O;
// E = exp(S - STATS); P8 = fp8(E * SCALE_S);
// dV = (P8^T.DO) * DESCALE_S * DESCALE_DO (AMAX_DV before) * SCALE_DV;
// dS = ((DO.V^T) * DESCALE_DO * DESCALE_V - D) * E * attn_scale; AMAX_DP = max |dS|;
// dS8 = fp8(dS * SCALE_DP) in DO's type; dQ = (dS8.K) * DESCALE_DP * DESCALE_K (AMAX_DQ)
// * SCALE_DQ; dK = (dS8^T.Q) * DESCALE_DP * DESCALE_Q (AMAX_DK) * SCALE_DK.
// No bias and no dropout (refused); masks, padding and GQA/MQA as sdpa.
struct SdpaFp8Attrs : SdpaOptions {
  bool is_inference = true;  // false: also write STATS (needed by the backward)
  bool operator==(const SdpaFp8Attrs&) const = default;
  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("is_inference", s.is_inference);
    SdpaOptions::fields(s, v);
  }
};
struct SdpaFp8BwdAttrs : SdpaOptions {
  bool operator==(const SdpaFp8BwdAttrs&) const = default;
};

// Y = X[start_0:end_0:stride_0, start_1:end_1:stride_1, ...]: one entry per dim of X (the
// cuDNN frontend's slice). 0 <= start <= end <= X's dim, stride >= 1 (default 1). Y's dim d is
// ceil((end_d - start_d) / stride_d); Y is packed in X's dim order and has X's data type.
struct SliceAttrs {
  std::vector<int64_t> start;
  std::vector<int64_t> end;
  std::vector<int64_t> stride;  // empty: all 1
  // Y's window of an X of strides x_stride; nullopt unless start/stride have one entry per dim.
  std::optional<StridedWindow> window(std::span<const int64_t> x_stride) const;
  bool operator==(const SliceAttrs&) const = default;
  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("start", s.start);
    v("end", s.end);
    v("stride", s.stride);
  }
};

// SUM, SQ_SUM = the sum and the sum of squares of X over every dim but dim 1 (the cuDNN
// frontend's genstats: per-channel statistics, dims [1,C,1,...,1]).
struct GenstatsAttrs {
  bool operator==(const GenstatsAttrs&) const = default;
  template <class S, class V>
  static void fields(S&, V&&) {}
};

// Y's dim i is X's dim permutation[i] (the cuDNN frontend's transpose); Y keeps X's data type
// and, unless its strides are set, X's memory order.
struct TransposeAttrs {
  std::vector<int64_t> permutation;
  bool operator==(const TransposeAttrs&) const = default;
  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("permutation", s.permutation, FieldUse::Required);
  }
};

// Y = X with other dims (the cuDNN frontend's reshape; Y's dims are set by the caller and hold
// as many elements as X's). VIEW_ONLY (logical = false, the default): Y describes X's memory
// with other dims and strides: the element at memory offset o of Y is the one at offset o of
// X, so X and Y must both be packed (dense, no gaps, no overlap). LOGICAL: Y lists X's
// elements in row-major (lexicographic) order, whatever either layout. Y's strides default to
// the frontend's: packed channels-last (dim 1 innermost) from rank 2 up, row-major below.
struct ReshapeAttrs {
  bool logical = false;
  bool operator==(const ReshapeAttrs&) const = default;
  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("logical", s.logical);
  }
};

// Y = the inputs IN_0, IN_1, ... (no gaps, at most kConcatMaxInputs) joined along `axis` (the
// cuDNN frontend's concatenate): every input has the same rank, data type and dims but along
// the axis, where Y's dim is their sum. in_place_index names an input whose memory already is
// its part of Y's (the backend then skips its copy; the result is the same). Y keeps the
// inputs' data type; its strides default to packed in IN_0's dim order.
struct ConcatAttrs {
  int64_t axis = 0;
  std::optional<int64_t> in_place_index;
  bool operator==(const ConcatAttrs&) const = default;
  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("axis", s.axis, FieldUse::Required);
    v("in_place_index", s.in_place_index);
  }
};
inline constexpr size_t kConcatMaxInputs = 8;

// Block-scaled quantization (the cuDNN frontend's block_scale_quantize; the OCP MX scheme and
// NVFP4): X is cut into blocks of block_size consecutive elements along `axis` (default: the
// last dim). MX (SCALE FP8_E8M0, the default): each block gets one power-of-two scale
// 2^(floor(log2(amax)) - emax), emax being the largest exponent of Y's type (E4M3: 8, E5M2:
// 15, E2M1: 2; 2^-127 for a block of zeros). NVFP4 (SCALE set to FP8_E4M3, Y FP4_E2M1): amax
// / 6 rounded up to an E4M3 value. Y = X / scale, saturated to Y's largest finite value. Y has
// X's dims and the data type you set (FP8_E4M3, FP8_E5M2 or FP4_E2M1); SCALE has X's dims with
// the axis divided by block_size. `transpose` only changes the default strides: Y and SCALE become
// packed with the axis innermost.
struct BlockScaleQuantizeAttrs {
  int64_t block_size = 0;
  std::optional<int64_t> axis;
  bool transpose = false;
  bool operator==(const BlockScaleQuantizeAttrs&) const = default;
  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("block_size", s.block_size, FieldUse::Required);
    v("axis", s.axis);
    v("transpose", s.transpose);
  }
};
// Y = X * SCALE, each scale shared by a block of X (the cuDNN frontend's
// block_scale_dequantize): block_size holds one entry per trailing dim of X (leading dims not
// listed have blocks of 1), and SCALE's dim d is X's dim d / block_size d. Y has X's dims.
// negative_scale: the scale type may hold negative values (passed to cuDNN; the reference
// multiplies either way).
struct BlockScaleDequantizeAttrs {
  std::vector<int64_t> block_size;
  bool negative_scale = false;
  bool operator==(const BlockScaleDequantizeAttrs&) const = default;
  template <class S, class V>
  static void fields(S& s, V&& v) {
    v("block_size", s.block_size, FieldUse::Required);
    v("negative_scale", s.negative_scale);
  }
};

// The inputs of an SDPA node's score modifiers (Node::subgraphs) that come from outside them:
// graph tensors (pass-by-value scalars such as a soft cap, or buffers such as a bias-like
// table), bound in order of first use; the modifiers' nodes read the same tensors.
inline constexpr size_t kScoreModMaxInputs = 8;
#define DNNGRAPH_SCORE_MOD_ROLES                                                                  \
  SCORE_MOD_IN_0, SCORE_MOD_IN_1, SCORE_MOD_IN_2, SCORE_MOD_IN_3, SCORE_MOD_IN_4, SCORE_MOD_IN_5, \
      SCORE_MOD_IN_6, SCORE_MOD_IN_7
inline constexpr Role kScoreModRoles[kScoreModMaxInputs] = {
    Role::SCORE_MOD_IN_0, Role::SCORE_MOD_IN_1, Role::SCORE_MOD_IN_2, Role::SCORE_MOD_IN_3,
    Role::SCORE_MOD_IN_4, Role::SCORE_MOD_IN_5, Role::SCORE_MOD_IN_6, Role::SCORE_MOD_IN_7};

// Mixture-of-experts grouped matmul (the cuDNN frontend's moe_grouped_matmul in its NONE mode:
// tokens already grouped by expert). TOKEN [1,S,K], WEIGHT [E,K,N], FIRST_TOKEN_OFFSET [G,1,1]
// (INT32/INT64, G = B*E) -> OUTPUT [1,S,N]: group g owns rows [offset[g], offset[g+1]) (the last
// runs to S), OUTPUT[0,r,:] = TOKEN[0,r,:] x WEIGHT[g % E,:,:]. The offsets are data: they
// must start at 0, never decrease and stay within S, which engines check at execute time
// where they can (the reference does). Modes GATHER / SCATTER are not in the IR yet.
struct MoeGroupedMatmulAttrs {
  bool operator==(const MoeGroupedMatmulAttrs&) const = default;
  template <class S, class V>
  static void fields(S&, V&&) {}
};

// ---- the op table: one line per op family ----
// OP(OpKind enumerator, name (JSON, Python, messages), attribute struct, (input roles),
//    (output roles)). Ports not listed are refused by validate(); which are required, and their
// shapes, is the family's rule in src/ir/ops/<family>.cpp.
#define DNNGRAPH_OPS(OP)                                                                           \
  OP(ConvFprop, conv_fprop, ConvFpropAttrs, (X, W), (Y))                                           \
  OP(ConvDgrad, conv_dgrad, ConvDgradAttrs, (DY, W), (DX))                                         \
  OP(ConvWgrad, conv_wgrad, ConvWgradAttrs, (DY, X), (DW))                                         \
  OP(Matmul, matmul, MatmulAttrs, (A, B), (C))                                                     \
  OP(Pointwise, pointwise, PointwiseAttrs, (IN_0, IN_1, IN_2), (OUT_0))                            \
  OP(Reduction, reduction, ReductionAttrs, (X), (Y))                                               \
  OP(NormFwd, norm_forward, NormFwdAttrs,                                                          \
     (X, SCALE, BIAS, EPSILON, MOMENTUM, PREV_RUNNING_MEAN, PREV_RUNNING_VAR, MEAN, INV_VARIANCE), \
     (Y, MEAN, INV_VARIANCE, NEXT_RUNNING_MEAN, NEXT_RUNNING_VAR))                                 \
  OP(NormBwd, norm_backward, NormBwdAttrs, (DY, X, SCALE, MEAN, INV_VARIANCE),                     \
     (DX, DSCALE, DBIAS))                                                                          \
  OP(Softmax, softmax, SoftmaxAttrs, (X), (Y, STATS))                                              \
  OP(SdpaFwd, sdpa, SdpaAttrs,                                                                     \
     (Q, K, V, ATTN_SCALE, BIAS, SEQ_LEN_Q, SEQ_LEN_KV, SEED, OFFSET, DROPOUT_MASK, DROPOUT_SCALE, \
      Q_RAGGED_OFFSET, K_RAGGED_OFFSET, V_RAGGED_OFFSET, O_RAGGED_OFFSET, STATS_RAGGED_OFFSET,     \
      PAGE_TABLE_K, PAGE_TABLE_V, SINK_TOKEN, DNNGRAPH_SCORE_MOD_ROLES),                           \
     (O, STATS, RNG_DUMP, SCORE_MAX, SCORE_SUM_EXP))                                               \
  OP(SdpaBwd, sdpa_backward, SdpaBwdAttrs,                                                         \
     (Q, K, V, O, DO, STATS, ATTN_SCALE, BIAS, SEQ_LEN_Q, SEQ_LEN_KV, SEED, OFFSET, DROPOUT_MASK,  \
      DROPOUT_SCALE, Q_RAGGED_OFFSET, K_RAGGED_OFFSET, V_RAGGED_OFFSET, O_RAGGED_OFFSET,           \
      STATS_RAGGED_OFFSET, DO_RAGGED_OFFSET, DQ_RAGGED_OFFSET, DK_RAGGED_OFFSET, DV_RAGGED_OFFSET, \
      SINK_TOKEN, DNNGRAPH_SCORE_MOD_ROLES),                                                       \
     (DQ, DK, DV, DBIAS, DSINK_TOKEN))                                                             \
  OP(SdpaFp8Fwd, sdpa_fp8, SdpaFp8Attrs,                                                           \
     (Q, K, V, DESCALE_Q, DESCALE_K, DESCALE_V, DESCALE_S, SCALE_S, SCALE_O, ATTN_SCALE,           \
      SEQ_LEN_Q, SEQ_LEN_KV),                                                                      \
     (O, STATS, AMAX_S, AMAX_O))                                                                   \
  OP(SdpaFp8Bwd, sdpa_fp8_backward, SdpaFp8BwdAttrs,                                               \
     (Q, K, V, O, DO, STATS, DESCALE_Q, DESCALE_K, DESCALE_V, DESCALE_O, DESCALE_DO, DESCALE_S,    \
      DESCALE_DP, SCALE_S, SCALE_DQ, SCALE_DK, SCALE_DV, SCALE_DP, ATTN_SCALE, SEQ_LEN_Q,          \
      SEQ_LEN_KV),                                                                                 \
     (DQ, DK, DV, AMAX_DQ, AMAX_DK, AMAX_DV, AMAX_DP))                                             \
  OP(Slice, slice, SliceAttrs, (X), (Y))                                                           \
  OP(Genstats, genstats, GenstatsAttrs, (X), (SUM, SQ_SUM))                                        \
  OP(Transpose, transpose, TransposeAttrs, (X), (Y))                                               \
  OP(Reshape, reshape, ReshapeAttrs, (X), (Y))                                                     \
  OP(Concat, concatenate, ConcatAttrs, (IN_0, IN_1, IN_2, IN_3, IN_4, IN_5, IN_6, IN_7), (Y))      \
  OP(BlockScaleQuantize, block_scale_quantize, BlockScaleQuantizeAttrs, (X), (Y, SCALE))           \
  OP(BlockScaleDequantize, block_scale_dequantize, BlockScaleDequantizeAttrs, (X, SCALE), (Y))     \
  OP(MoeGroupedMatmul, moe_grouped_matmul, MoeGroupedMatmulAttrs,                                  \
     (TOKEN, WEIGHT, FIRST_TOKEN_OFFSET), (OUTPUT))

enum class OpKind : int {
#define DNNGRAPH_OP_KIND(kind, name, Attrs, in, out) kind,
  DNNGRAPH_OPS(DNNGRAPH_OP_KIND)
#undef DNNGRAPH_OP_KIND
};

namespace op_table_impl {
template <class First, class... Rest>
struct VariantOfRest {
  using type = std::variant<Rest...>;
};
}  // namespace op_table_impl
// The attributes of a node; its index is the node's OpKind.
#define DNNGRAPH_OP_ATTRS(kind, name, Attrs, in, out) , Attrs
using OpAttrs = op_table_impl::VariantOfRest<void DNNGRAPH_OPS(DNNGRAPH_OP_ATTRS)>::type;
#undef DNNGRAPH_OP_ATTRS

// What the table says about one family.
struct OpInfo {
  OpKind kind;
  std::string_view name;  // "conv_fprop", "matmul", ...
  std::span<const Role> inputs;
  std::span<const Role> outputs;
};
const OpInfo& op_info(OpKind k);
std::span<const OpInfo> op_table();  // every family, in OpKind order
std::string_view op_kind_name(OpKind k);
std::optional<OpKind> op_kind_from_name(std::string_view name);

// The OpKind of an attribute struct: op_kind_of<MatmulAttrs> == OpKind::Matmul.
template <class A, size_t I = 0>
constexpr OpKind op_kind_of() {
  static_assert(I < std::variant_size_v<OpAttrs>, "not an attribute struct of the op table");
  if constexpr (std::is_same_v<std::variant_alternative_t<I, OpAttrs>, A>)
    return static_cast<OpKind>(I);
  else
    return op_kind_of<A, I + 1>();
}

// A tensor slot of a node (Role::X, Role::W, Role::Y, Role::IN_0, ...).
struct Port {
  Role role;
  Tensor tensor;
};

struct Node;

// A subgraph of pointwise nodes an op runs on one of its own intermediates (the cuDNN
// frontend's attention score modifiers: the callback's ops on the score tensor). `input` is
// that intermediate (virtual; its dims are set by the op's inference), `output` the tensor the
// op goes on with. The nodes read `input`, each other's outputs, the outputs of an earlier
// subgraph of the same node (score_mod_bprop reads what score_mod saved), and graph tensors
// that the node also binds to its SCORE_MOD_IN_* ports. Its tensors other than those graph
// tensors belong to the subgraph (they are not in the graph's tensor list).
struct Subgraph {
  std::string name;
  Tensor input;
  Tensor output;
  std::vector<Node> nodes;
};

struct Node {
  std::string name;
  DataType compute_data_type = DataType::NotSet;
  OpAttrs attrs;
  std::vector<Port> inputs;
  std::vector<Port> outputs;
  // Pointwise subgraphs the op applies inside itself (sdpa: "score_mod"; sdpa_backward:
  // "score_mod" and "score_mod_bprop"). Empty for every other op.
  std::vector<Subgraph> subgraphs = {};

  OpKind kind() const { return static_cast<OpKind>(attrs.index()); }
  // The tensor bound to `role`, or nullptr.
  Tensor input(Role role) const;
  Tensor output(Role role) const;
  template <class A>
  const A& as() const {
    return std::get<A>(attrs);
  }
  template <class A>
  A& as() {
    return std::get<A>(attrs);
  }
  const Subgraph* subgraph(std::string_view name) const;  // nullptr when absent
};

}  // namespace dnngraph::ir
