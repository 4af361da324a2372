// The graph IR: tensors, nodes, context types, builder methods, inference and validation.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "dnngraph/ir/ops.hpp"
#include "dnngraph/ir/tensor.hpp"
#include "dnngraph/ir/validated_graph.hpp"
#include "dnngraph/status.hpp"

namespace dnngraph::ir {

// Per-op options every builder method takes.
struct OpOptions {
  std::string name;                               // default: "<op><index>"
  DataType compute_data_type = DataType::NotSet;  // default: the graph's compute type
};

class Graph;
// An attention score modifier (the cuDNN frontend's score_mod / score_mod_bprop callbacks):
// given the graph and the score tensor, adds pointwise ops on it (graph.pointwise, add, mul,
// ...) and returns the modified score. Its ops become the SDPA node's subgraph (Subgraph in
// ir/ops.hpp), not nodes of the graph; graph tensors they read become the node's inputs.
using ScoreModifier = std::function<Tensor(Graph& graph, Tensor score)>;

// Optional tensors of an SDPA node (forward and backward).
struct SdpaInputs {
  Tensor attn_scale;  // pass-by-value scalar; else SdpaAttrs::attn_scale; else 1/sqrt(d)
  Tensor bias;        // additive bias [b|1, h|1, s_q, s_kv]
  Tensor seq_len_q;   // [b,1,1,1] int32, with SdpaAttrs::padding_mask
  Tensor seq_len_kv;  // [b,1,1,1] int32, with SdpaAttrs::padding_mask
  Tensor seed;        // dropout seed (int64 scalar), with SdpaAttrs::dropout_probability
  Tensor offset;      // dropout offset (int64 scalar), with SdpaAttrs::dropout_probability
  // Dropout with a given mask instead of a probability: P is multiplied by DROPOUT_MASK
  // [b|1, h|1, s_q, s_kv] (values used as given, normally 0/1) and by DROPOUT_SCALE (scalar).
  Tensor dropout_mask;
  Tensor dropout_scale;
  // Forward only, with dropout_probability: an output [b, h_q, s_q, s_kv] that receives the
  // keep mask (1 kept, 0 dropped) the engine's RNG drew, e.g. to check dropout against a
  // reference run with dropout_mask.
  Tensor rng_dump;
  // Backward only: the DBIAS output to bind (the frontend's dBias=), like rng_dump. Without it,
  // a DBIAS output is made when bias is given, unless dbias_output is false.
  Tensor dbias;
  bool dbias_output = true;
  // Attention sink logits [1, h_q, 1, 1] FLOAT (the frontend's sink_token), forward and
  // backward; dsink_token (backward only) is the DSINK_TOKEN output to bind (the frontend's
  // dSink_token=), made only when given.
  Tensor sink_token;
  Tensor dsink_token;
  // Forward only, paged K / V: [b, 1, pages, 1] INT32 page numbers into K / V, which are then
  // page containers [num_pages, h, page_size, d] (SdpaAttrs::paged_max_seq_len_kv sets s_kv).
  Tensor page_table_k;
  Tensor page_table_v;
  // Forward only: SCORE_MAX / SCORE_SUM_EXP outputs to bind (the frontend's score_max= /
  // score_sum_exp=; ir/ops.hpp, SdpaAttrs): both or neither, and only with is_inference.
  Tensor score_max;
  Tensor score_sum_exp;
  // Score modifiers (docs/sdpa-score-mod.md). score_mod is applied to the scaled score
  // attn_scale * Q.K^T before the bias and the softmax (forward, and the backward's
  // recompute); score_mod_bprop (backward only) maps the gradient of the modified score to the
  // gradient of the scaled score and may read tensors score_mod made. Not with ALiBi, padding,
  // causal or band masks (the frontend refuses those together with a modifier).
  ScoreModifier score_mod;
  ScoreModifier score_mod_bprop;
};

// Gives `n` these subgraphs and binds the graph tensors their nodes read (every tensor that is
// not a subgraph's input or made by a node of one) to n's SCORE_MOD_IN_* ports, in order of
// first use. validate() names a modifier that reads more than kScoreModMaxInputs of them.
void attach_subgraphs(Node& n, std::vector<Subgraph> subgraphs);

// The per-tensor scaling inputs of sdpa_fp8 (forward: descale_q/k/v/s, scale_s/o) and
// sdpa_fp8_backward (all but scale_o), each one FLOAT element ([1,1,1,1]).
struct SdpaFp8Scales {
  Tensor descale_q, descale_k, descale_v, descale_s, scale_s, scale_o;
  Tensor descale_o, descale_do, descale_dp, scale_dq, scale_dk, scale_dv, scale_dp;
};

class Graph {
 public:
  Graph() = default;
  virtual ~Graph() = default;
  Graph(const Graph&) = delete;  // tensors are shared by pointer: copying would alias them
  Graph& operator=(const Graph&) = delete;
  Graph(Graph&&) = default;
  Graph& operator=(Graph&&) = default;

  // ---- context ----
  Graph& set_name(std::string v) {
    name_ = std::move(v);
    return *this;
  }
  Graph& set_io_data_type(DataType v) {
    io_ = v;
    return *this;
  }
  Graph& set_intermediate_data_type(DataType v) {
    intermediate_ = v;
    return *this;
  }
  Graph& set_compute_data_type(DataType v) {
    compute_ = v;
    return *this;
  }
  Graph& set_dynamic_shape_enabled(bool v) {
    dynamic_shape_ = v;
    return *this;
  }
  // The most SMs a GPU plan of this graph may use (the cuDNN frontend's set_sm_count), to leave
  // the others free for work on other streams (communication, another kernel). The cuDNN engine
  // asks its heuristics, and every engine it sets up itself, for plans that target this many
  // SMs; on a GPU with fewer SMs the build is refused (docs/cudnn-engine.md, "SM count
  // target"). kAllSms (-1, the default) leaves it unset: plans use the whole GPU. validate()
  // refuses 0 and other negative values. A scheduling hint only: it is part of the fingerprint
  // (so of the plan cache key) and of the JSON form, and the reference engine ignores it.
  static constexpr int32_t kAllSms = -1;
  Graph& set_sm_count(int32_t v) {
    sm_count_ = v;
    return *this;
  }
  const std::string& name() const { return name_; }
  DataType io_data_type() const { return io_; }
  DataType intermediate_data_type() const { return intermediate_; }
  DataType compute_data_type() const { return compute_; }
  bool dynamic_shape_enabled() const { return dynamic_shape_; }
  int32_t sm_count() const { return sm_count_; }  // kAllSms when unset
  // A non-virtual tensor that no op reads or writes is an error in validate() unless this is
  // set; then validate() sets it aside (the cuDNN frontend ignores such tensors) and execute
  // ignores buffers bound to it.
  Graph& set_allow_unused_tensors(bool v) {
    allow_unused_ = v;
    return *this;
  }
  bool allow_unused_tensors() const { return allow_unused_; }
  // Whether the last validate() set this tensor (or a tensor with this uid) aside as unused.
  bool is_unused_tensor(const TensorAttrs* t) const;
  bool is_unused_uid(int64_t uid) const;

  // ---- tensors ----
  Tensor tensor(const TensorAttrs& attrs);
  // A pass-by-value constant (e.g. epsilon, alpha): dims [1], value carried in the graph.
  Tensor scalar(Scalar value, std::string name = {});

  // ---- ops (each returns its outputs; outputs are virtual until set_output(true)) ----
  Tensor conv_fprop(Tensor x, Tensor w, ConvFpropAttrs a, OpOptions o = {});
  Tensor conv_dgrad(Tensor dy, Tensor w, ConvDgradAttrs a, OpOptions o = {});  // set DX dims
  Tensor conv_wgrad(Tensor dy, Tensor x, ConvWgradAttrs a, OpOptions o = {});  // set DW dims
  Tensor matmul(Tensor a, Tensor b, MatmulAttrs attrs = {}, OpOptions o = {});
  Tensor pointwise(Tensor in0, PointwiseAttrs a, OpOptions o = {});
  Tensor pointwise(Tensor in0, Tensor in1, PointwiseAttrs a, OpOptions o = {});
  Tensor pointwise(Tensor in0, Tensor in1, Tensor in2, PointwiseAttrs a, OpOptions o = {});
  Tensor unary(PointwiseMode m, Tensor x, OpOptions o = {}) {
    return pointwise(std::move(x), pointwise_attrs(m), std::move(o));
  }
  Tensor binary(PointwiseMode m, Tensor a, Tensor b, OpOptions o = {}) {
    return pointwise(std::move(a), std::move(b), pointwise_attrs(m), std::move(o));
  }
  static PointwiseAttrs pointwise_attrs(PointwiseMode m) {
    PointwiseAttrs a;
    a.mode = m;
    return a;
  }
  Tensor add(Tensor a, Tensor b, OpOptions o = {}) { return binary(PointwiseMode::Add, a, b, o); }
  Tensor mul(Tensor a, Tensor b, OpOptions o = {}) { return binary(PointwiseMode::Mul, a, b, o); }
  Tensor bias(Tensor x, Tensor b, OpOptions o = {}) { return binary(PointwiseMode::Add, x, b, o); }
  Tensor scale(Tensor x, Tensor s, OpOptions o = {}) { return binary(PointwiseMode::Mul, x, s, o); }
  Tensor relu(Tensor x, OpOptions o = {}) { return unary(PointwiseMode::Relu, x, o); }
  Tensor gelu(Tensor x, OpOptions o = {}) { return unary(PointwiseMode::Gelu, x, o); }
  // Output dims default to all ones (reduce everything); set them to keep dims.
  Tensor reduction(Tensor x, ReductionAttrs a, OpOptions o = {});

  // Y = X[start:end:stride] per dim (SliceAttrs).
  Tensor slice(Tensor x, SliceAttrs a, OpOptions o = {});
  // Y's dim i is X's dim a.permutation[i].
  Tensor transpose(Tensor x, TransposeAttrs a, OpOptions o = {});
  // X with other dims: set the returned tensor's dims (ReshapeAttrs).
  Tensor reshape(Tensor x, ReshapeAttrs a = {}, OpOptions o = {});
  // The inputs joined along a.axis (at most kConcatMaxInputs of them; ConcatAttrs).
  Tensor concatenate(const std::vector<Tensor>& inputs, ConcatAttrs a, OpOptions o = {});
  // Block-scaled quantization: returns {Y, SCALE}; set Y's data type (BlockScaleQuantizeAttrs).
  std::array<Tensor, 2> block_scale_quantize(Tensor x, BlockScaleQuantizeAttrs a, OpOptions o = {});
  // Y = X * SCALE per block (BlockScaleDequantizeAttrs).
  Tensor block_scale_dequantize(Tensor x, Tensor scale, BlockScaleDequantizeAttrs a,
                                OpOptions o = {});
  // Mixture-of-experts grouped matmul: OUTPUT [1,S,N] where rows [offset[e], offset[e+1]) of
  // TOKEN [1,S,K] are multiplied by WEIGHT[e] ([E,K,N]); returns OUTPUT (MoeGroupedMatmulAttrs).
  Tensor moe_grouped_matmul(Tensor token, Tensor weight, Tensor first_token_offset,
                            MoeGroupedMatmulAttrs a = {}, OpOptions o = {});
  // Per-channel statistics of X: returns {SUM, SQ_SUM}, dims [1,C,1,..].
  std::array<Tensor, 2> genstats(Tensor x, OpOptions o = {});

  // Returns {Y, MEAN, INV_VARIANCE}; MEAN/INV_VARIANCE are null in inference.
  std::array<Tensor, 3> layernorm(Tensor x, Tensor scale, Tensor bias, Tensor epsilon,
                                  NormForwardPhase phase, OpOptions o = {});
  // Instance norm (statistics per sample and channel, MEAN / INV_VARIANCE [N,C,1,..], SCALE /
  // BIAS [1,C,1,..]) and adaptive layer norm (SCALE / BIAS [N|1, 1.., D..]: the dims 1.. where
  // SCALE is not 1 are normalized). Returns {Y, MEAN, INV_VARIANCE}; the last two are null in
  // inference.
  std::array<Tensor, 3> instancenorm(Tensor x, Tensor scale, Tensor bias, Tensor epsilon,
                                     NormForwardPhase phase, OpOptions o = {});
  std::array<Tensor, 3> adalayernorm(Tensor x, Tensor scale, Tensor bias, Tensor epsilon,
                                     NormForwardPhase phase, OpOptions o = {});
  // Returns {Y, INV_VARIANCE}; bias may be null.
  std::array<Tensor, 2> rmsnorm(Tensor x, Tensor scale, Tensor bias, Tensor epsilon,
                                NormForwardPhase phase, OpOptions o = {});
  // Training. Returns {Y, MEAN, INV_VARIANCE, NEXT_RUNNING_MEAN, NEXT_RUNNING_VAR}; running
  // stats (and momentum) may be null, then the last two are null.
  std::array<Tensor, 5> batchnorm(Tensor x, Tensor scale, Tensor bias, Tensor prev_running_mean,
                                  Tensor prev_running_var, Tensor epsilon, Tensor momentum,
                                  OpOptions o = {});
  Tensor batchnorm_inference(Tensor x, Tensor mean, Tensor inv_variance, Tensor scale, Tensor bias,
                             OpOptions o = {});
  // Returns {DX, DSCALE, DBIAS}.
  std::array<Tensor, 3> layernorm_backward(Tensor dy, Tensor x, Tensor scale, Tensor mean,
                                           Tensor inv_variance, OpOptions o = {});
  std::array<Tensor, 3> rmsnorm_backward(Tensor dy, Tensor x, Tensor scale, Tensor inv_variance,
                                         bool has_dbias, OpOptions o = {});
  std::array<Tensor, 3> batchnorm_backward(Tensor dy, Tensor x, Tensor scale, Tensor mean,
                                           Tensor inv_variance, OpOptions o = {});
  std::array<Tensor, 3> instancenorm_backward(Tensor dy, Tensor x, Tensor scale, Tensor mean,
                                              Tensor inv_variance, OpOptions o = {});
  std::array<Tensor, 3> adalayernorm_backward(Tensor dy, Tensor x, Tensor scale, Tensor mean,
                                              Tensor inv_variance, OpOptions o = {});
  // Returns {Y, STATS}; STATS is null unless generate_stats.
  std::array<Tensor, 2> softmax(Tensor x, bool generate_stats, OpOptions o = {});
  // Returns {O, STATS}; STATS is null when attrs.is_inference.
  std::array<Tensor, 2> sdpa(Tensor q, Tensor k, Tensor v, SdpaAttrs attrs, SdpaInputs extra = {},
                             OpOptions o = {});
  // Returns {DQ, DK, DV, DBIAS}; DBIAS is null unless extra.bias is set.
  std::array<Tensor, 4> sdpa_backward(Tensor q, Tensor k, Tensor v, Tensor o, Tensor d_o,
                                      Tensor stats, SdpaBwdAttrs attrs, SdpaInputs extra = {},
                                      OpOptions opts = {});
  // FP8 attention (ir/ops.hpp, SdpaFp8Attrs). extra: attn_scale and sequence lengths only.
  // Returns {O, STATS, AMAX_S, AMAX_O}; STATS is null when attrs.is_inference.
  std::array<Tensor, 4> sdpa_fp8(Tensor q, Tensor k, Tensor v, const SdpaFp8Scales& scales,
                                 SdpaFp8Attrs attrs, SdpaInputs extra = {}, OpOptions o = {});
  // Returns {DQ, DK, DV, AMAX_DQ, AMAX_DK, AMAX_DV, AMAX_DP}.
  std::array<Tensor, 7> sdpa_fp8_backward(Tensor q, Tensor k, Tensor v, Tensor o, Tensor d_o,
                                          Tensor stats, const SdpaFp8Scales& scales,
                                          SdpaFp8BwdAttrs attrs, SdpaInputs extra = {},
                                          OpOptions opts = {});

  // Adds a fully formed node (used by the JSON loader and tests).
  void add_node(Node node);

  // ---- inference and validation ----
  // Infers missing dims/strides/data types, assigns missing uids, sorts nodes
  // topologically, and checks the whole graph: every shape, data type, attribute and extent
  // rule lives here (src/ir/), none in the engines. Idempotent. On failure the message names
  // the op and tensor, what was expected and what was found, and the graph is left as it was.
  // On success it also takes the immutable snapshot that engines accept (validated()).
  Status validate();
  bool is_validated() const { return validated_; }
  // The snapshot of the last successful validate(); null before it or after a builder call
  // changed the graph. Later edits of tensors do not reach it.
  ValidatedGraphPtr validated() const { return validated_ ? snapshot_ : nullptr; }
  // Marks the graph as changed (e.g. after a tensor was edited) so validate() runs again.
  void invalidate() { validated_ = false; }

  const std::vector<Node>& nodes() const { return nodes_; }
  std::vector<Node>& mutable_nodes() { return nodes_; }
  // Every tensor the graph knows: created with tensor()/scalar() or produced by an op.
  const std::vector<Tensor>& tensors() const { return tensors_; }
  // Non-virtual tensors: graph inputs and outputs, ordered by uid (after validate).
  std::vector<Tensor> io_tensors() const;
  Tensor find_tensor_by_uid(int64_t uid) const;
  Tensor find_tensor_by_name(std::string_view name) const;

  // Readable table of nodes and tensors (for CLIs and __repr__).
  std::string to_table() const;

 protected:
  Tensor make_output(const std::string& node_name, Role role);
  // Runs a score modifier on a fresh virtual input tensor and moves the ops it added (and
  // their output tensors) out of the graph into the returned subgraph (src/ir/score_mod.cpp).
  Subgraph build_subgraph(const std::string& node_name, std::string name, const ScoreModifier& fn);
  // The SDPA builders' part: the subgraphs of extra's modifiers, in order.
  std::vector<Subgraph> build_score_mods(const std::string& node_name, const SdpaInputs& extra);
  std::string next_name(std::string_view op);
  ValidatedGraphPtr take_snapshot() const;
  // validate(): moves the tensors no op uses from tensors_ to unused_ (allow_unused_ only).
  void set_aside_unused();
  // Adds a node wired to `inputs` (null tensors stay unbound; validate() names missing ones).
  Node& push(OpAttrs attrs, OpOptions& o, std::string_view op, std::initializer_list<Port> inputs);
  // Makes the virtual tensor of `n`'s output `role` and binds it.
  Tensor add_output(Node& n, Role role);
  std::array<Tensor, 3> norm_with_mean(NormKind kind, Tensor x, Tensor scale, Tensor bias,
                                       Tensor epsilon, NormForwardPhase phase, OpOptions o,
                                       const char* prefix);
  std::array<Tensor, 3> norm_backward_with_mean(NormKind kind, Tensor dy, Tensor x, Tensor scale,
                                                Tensor mean, Tensor inv_variance, OpOptions o,
                                                const char* prefix);

  std::string name_;
  DataType io_ = DataType::NotSet;
  DataType intermediate_ = DataType::Float;
  DataType compute_ = DataType::Float;
  bool dynamic_shape_ = false;
  int32_t sm_count_ = kAllSms;
  bool allow_unused_ = false;
  std::vector<Tensor> tensors_;
  std::vector<Tensor> unused_;  // set aside by validate() when allow_unused_
  std::vector<Node> nodes_;
  bool validated_ = false;
  ValidatedGraphPtr snapshot_;
  int64_t op_counter_ = 0;
};

}  // namespace dnngraph::ir
