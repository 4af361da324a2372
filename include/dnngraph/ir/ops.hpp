// One struct of attributes per op family, and the Node that carries it.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "dnngraph/ir/tensor.hpp"

namespace dnngraph::ir {

// Every port role any op knows, spelled as the cuDNN frontend spells them. Which roles an op
// family accepts is declared in its op table entry; strings exist only at the user boundary
// (JSON, Python keywords, messages, dot): role_name / role_from_name convert.
#define DNNGRAPH_ROLES(R) \
  R(X)                    \
  R(W)                    \
  R(Y)                    \
  R(DY)                   \
  R(DX)                   \
  R(DW)                   \
  R(A)                    \
  R(B)                    \
  R(C)                    \
  R(IN_0)                 \
  R(IN_1)                 \
  R(IN_2)                 \
  R(OUT_0)                \
  R(SCALE)                \
  R(BIAS)                 \
  R(EPSILON)              \
  R(MOMENTUM)             \
  R(PREV_RUNNING_MEAN)    \
  R(PREV_RUNNING_VAR)     \
  R(MEAN)                 \
  R(INV_VARIANCE)         \
  R(NEXT_RUNNING_MEAN)    \
  R(NEXT_RUNNING_VAR)     \
  R(DSCALE)               \
  R(DBIAS)                \
  R(STATS)                \
  R(Q)                    \
  R(K)                    \
  R(V)                    \
  R(O)                    \
  R(DO)                   \
  R(DQ)                   \
  R(DK)                   \
  R(DV)                   \
  R(ATTN_SCALE)           \
  R(SEQ_LEN_Q)            \
  R(SEQ_LEN_KV)           \
  R(SEED)                 \
  R(OFFSET)               \
  R(DROPOUT_MASK)         \
  R(DROPOUT_SCALE)        \
  R(RNG_DUMP)

enum class Role : uint8_t {
#define DNNGRAPH_ROLE_ENUM(r) r,
  DNNGRAPH_ROLES(DNNGRAPH_ROLE_ENUM)
#undef DNNGRAPH_ROLE_ENUM
};
std::string_view role_name(Role r);  // "INV_VARIANCE"
std::optional<Role> role_from_name(std::string_view name);
std::ostream& operator<<(std::ostream& os, Role r);  // writes role_name(r), for messages

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
};

// Y = reduce(X) over every dim where Y's dim is 1 and X's is not.
struct ReductionAttrs {
  ReductionMode mode = ReductionMode::Add;
  bool operator==(const ReductionAttrs&) const = default;
};

enum class NormKind : int { LayerNorm, RmsNorm, BatchNorm };
std::string_view norm_kind_name(NormKind k);

// Forward norms. Ports: X, SCALE, BIAS, EPSILON, [MOMENTUM, PREV_RUNNING_MEAN, PREV_RUNNING_VAR
// (batchnorm training), MEAN, INV_VARIANCE (batchnorm inference)] -> Y, [MEAN, INV_VARIANCE,
// NEXT_RUNNING_MEAN, NEXT_RUNNING_VAR]. Layer/RMS norm normalize over every dim but the first
// (the batch dim); batchnorm normalizes over every dim but the channel dim (dim 1).
struct NormFwdAttrs {
  NormKind kind = NormKind::LayerNorm;
  NormForwardPhase phase = NormForwardPhase::Training;
  bool operator==(const NormFwdAttrs&) const = default;
};
// Backward norms. Ports: DY, X, SCALE, MEAN (not for rmsnorm), INV_VARIANCE -> DX, DSCALE, [DBIAS].
struct NormBwdAttrs {
  NormKind kind = NormKind::LayerNorm;
  bool operator==(const NormBwdAttrs&) const = default;
};

// Y = softmax(X) along the last dim; optional STATS = logsumexp (dims with last dim 1).
struct SoftmaxAttrs {
  bool operator==(const SoftmaxAttrs&) const = default;
};

// Scaled dot-product attention. Layout: Q [b, h_q, s_q, d], K [b, h_k, s_kv, d],
// V [b, h_v, s_kv, d_v] (any strides; h_q a multiple of h_k and h_v for GQA/MQA).
// Optional ports: ATTN_SCALE (pass-by-value), BIAS [b|1, h|1, s_q, s_kv], SEQ_LEN_Q / SEQ_LEN_KV
// [b,1,1,1] int32 (padding mask), SEED / OFFSET (dropout by probability, int64 pass-by-value
// or device), DROPOUT_MASK [b|1, h_q|1, s_q, s_kv] floating + DROPOUT_SCALE (one floating
// element) (dropout with a given mask: P * MASK * SCALE, values used as given; both together,
// never with dropout_probability / SEED / OFFSET).
// Outputs: O [b, h_q, s_q, d_v], STATS [b, h_q, s_q, 1] fp32 (log-sum-exp) when not inference,
// RNG_DUMP [b, h_q, s_q, s_kv] floating (only with dropout_probability > 0): the keep mask the
// engine drew, 1 kept / 0 dropped, e.g. to replay it through DROPOUT_MASK elsewhere.
struct SdpaAttrs {
  bool is_inference = true;
  std::optional<double> attn_scale;  // used when no ATTN_SCALE tensor; default 1/sqrt(d)
  bool causal = false;               // shorthand for diagonal_alignment + right_bound = 0
  DiagonalAlignment diagonal_alignment = DiagonalAlignment::TopLeft;
  std::optional<int64_t> left_bound;   // keys with col < row' - left_bound are masked
  std::optional<int64_t> right_bound;  // keys with col > row' + right_bound are masked
  bool padding_mask = false;           // SEQ_LEN_Q / SEQ_LEN_KV present
  std::optional<double> dropout_probability;
  bool operator==(const SdpaAttrs&) const = default;
};
// Ports: Q, K, V, O, DO, STATS, [ATTN_SCALE, BIAS, SEQ_LEN_Q, SEQ_LEN_KV, SEED, OFFSET,
// DROPOUT_MASK, DROPOUT_SCALE] -> DQ, DK, DV, [DBIAS]. No RNG_DUMP: the backward redraws the
// forward's mask from SEED / OFFSET, or is given it through DROPOUT_MASK.
struct SdpaBwdAttrs : SdpaAttrs {
  bool operator==(const SdpaBwdAttrs&) const = default;
};

using OpAttrs =
    std::variant<ConvFpropAttrs, ConvDgradAttrs, ConvWgradAttrs, MatmulAttrs, PointwiseAttrs,
                 ReductionAttrs, NormFwdAttrs, NormBwdAttrs, SoftmaxAttrs, SdpaAttrs, SdpaBwdAttrs>;

enum class OpKind : int {
  ConvFprop,
  ConvDgrad,
  ConvWgrad,
  Matmul,
  Pointwise,
  Reduction,
  NormFwd,
  NormBwd,
  Softmax,
  SdpaFwd,
  SdpaBwd,
};
std::string_view op_kind_name(OpKind k);  // "conv_fprop", "matmul", ...
std::optional<OpKind> op_kind_from_name(std::string_view name);

// A tensor slot of a node (Role::X, Role::W, Role::Y, Role::IN_0, ...).
struct Port {
  Role role;
  Tensor tensor;
};

struct Node {
  std::string name;
  DataType compute_data_type = DataType::NotSet;
  OpAttrs attrs;
  std::vector<Port> inputs;
  std::vector<Port> outputs;

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
};

}  // namespace dnngraph::ir
