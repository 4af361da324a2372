// Shared state while one ir::ValidatedGraph is turned into cuDNN backend descriptors. Each op
// family has one lowering function (conv.cpp, matmul.cpp, ...) that adds operation descriptors
// here.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "dnngraph/ir/graph.hpp"
#include "engines/cudnn/canonicalize.hpp"
#include "engines/cudnn/descriptor.hpp"
#include "engines/cudnn/view.hpp"

namespace dnngraph::cudnn {

using ir::Role;

// A pass-by-value tensor whose value the plan supplies itself (graph constants and the
// constants composite lowerings add, e.g. -inf for masks).
struct ByValueConstant {
  int64_t uid;
  ir::Scalar value;
};

// A non-virtual tensor the lowering adds that no caller binds: it lives in the plan's workspace,
// `offset` bytes past what cuDNN itself asks for (scratch_base), e.g. SDPA backward's float dQ
// accumulator and softmax sums, where the frontend keeps them too.
struct ScratchTensor {
  int64_t uid;  // fresh, not a graph uid
  std::string name;
  int64_t offset;  // from scratch_base(cuDNN's workspace size), a multiple of kScratchAlignment
};
inline constexpr int64_t kScratchAlignment = 256;
// Where the scratch tensors start in a plan's workspace, after cuDNN's `cudnn_workspace` bytes.
inline int64_t scratch_base(int64_t cudnn_workspace) {
  return (cudnn_workspace + kScratchAlignment - 1) / kScratchAlignment * kScratchAlignment;
}

// A non-virtual tensor the lowering adds whose pointer the plan derives at execute from a graph
// input's: the input's pointer plus `byte_offset` (a window op lowered as a view, view.cpp).
struct DerivedBinding {
  int64_t uid;         // fresh, not a graph uid
  std::string name;    // the window op's output
  int64_t source_uid;  // the graph input it is a view of
  std::string source_name;
  int64_t byte_offset;
  int64_t alignment;  // CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT it was described with
};

// A float tensor in device memory whose values the plan uploads once and owns (e.g. the ALiBi
// slopes cuDNN's attention graph multiplies by).
struct DeviceConstant {
  int64_t uid;
  std::string name;
  std::vector<float> values;
};

// The entry of enum value e in a table in the enum's order; `outside` for a value outside it (a
// cast integer, which validation reports).
template <class T, size_t N, class E>
constexpr T entry_of(const std::array<T, N>& table, E e, T outside) {
  const auto i = static_cast<size_t>(e);
  return i < N ? table[i] : outside;
}

cudnnDataType_t to_cudnn(DataType t);
// Host bytes of a pass-by-value scalar in `type` (tensor.cpp); NotSupported naming tensor `name`
// for a type that cannot carry a constant.
Result<std::array<unsigned char, 16>> scalar_bytes(const ir::Scalar& s, DataType type,
                                                   const std::string& name);

// One of the equivalent ways to lower a graph. Some graphs have several: cuDNN's engines take
// one form and refuse another, and which one depends on the cuDNN version, so the engine tries
// them in order and keeps the first that cuDNN proposes an engine for (engine.cpp).
struct LoweringVariant {
  std::string_view name;
  // SDPA forward: softmax statistics into a virtual float tensor even when the graph has no
  // STATS output.
  bool sdpa_virtual_stats = false;
  // SDPA forward: the probabilities P kept in float instead of V's type.
  bool sdpa_float_probabilities = false;
  // SDPA backward: dQ accumulated in a float scratch tensor then converted, and the softmax sums
  // in scratch too (the frontend's form on cuDNN 9), instead of dQ written by its matmul (the
  // "dP workspace" form, which materialises dS: b*h*s_q*s_kv elements of workspace).
  bool sdpa_dq_accumulator = false;
};

// The variants to try for `g`, in order (one, the default, for graphs without alternatives).
std::span<const LoweringVariant> lowering_variants(const ir::ValidatedGraph& g);

class LowerContext {
 public:
  LowerContext(ir::ValidatedGraphPtr graph, ViewMap views);

  const ir::ValidatedGraph& graph() const { return *graph_; }
  // The descriptor of a graph tensor, created on first use from its canonical view.
  Result<cudnnBackendDescriptor_t> tensor(const ir::Tensor& t);
  // A graph tensor described with another view of the same memory (e.g. K as K^T). Each graph
  // tensor gets one descriptor: use either this or tensor(), not both.
  Result<cudnnBackendDescriptor_t> tensor_as(const ir::Tensor& t, const TensorView& v);
  // Describe graph tensor `t` as ragged (CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC = the descriptor
  // of graph tensor `offset`) when its descriptor is created; call before tensor()/tensor_as().
  void set_ragged(const ir::Tensor& t, const ir::Tensor& offset) { ragged_[t.get()] = offset; }
  // Describe graph tensor `t` (a window op's virtual output) as a view of graph input `source` at
  // `byte_offset`: when tensor()/tensor_as() first describe it, it becomes a non-virtual tensor
  // with a fresh uid and that alignment, recorded in derived() for the plan to bind.
  void set_view_of(const ir::Tensor& t, const ir::Tensor& source, int64_t byte_offset,
                   int64_t alignment) {
    views_of_[t.get()] = {source, byte_offset, alignment};
  }
  // The canonical view of a graph tensor (dims/strides given to cuDNN).
  const TensorView& view(const ir::Tensor& t) const { return views_.at(t.get()); }
  // A new virtual tensor for a composite lowering's intermediate (packed strides).
  Result<cudnnBackendDescriptor_t> virtual_tensor(const std::string& name,
                                                  const std::vector<int64_t>& dim, DataType type);
  // A new virtual tensor with explicit strides (a transposed view another op reads).
  Result<cudnnBackendDescriptor_t> virtual_tensor(const std::string& name, const TensorView& v,
                                                  DataType type);
  // A new pass-by-value constant of rank `rank` whose value the plan supplies.
  Result<cudnnBackendDescriptor_t> constant(const std::string& name, ir::Scalar value, size_t rank);
  // A new float tensor of dims `dim` (packed) in device memory the plan owns, holding `values`.
  Result<cudnnBackendDescriptor_t> device_constant(const std::string& name,
                                                   const std::vector<int64_t>& dim,
                                                   std::vector<float> values);
  // A new non-virtual tensor with view `v` in the plan's workspace (ScratchTensor).
  Result<cudnnBackendDescriptor_t> scratch_tensor(const std::string& name, const TensorView& v,
                                                  DataType type);
  // The variant being lowered (lowering_variants).
  LoweringVariant variant;
  // Descriptors of the tensors of nodes' subgraphs (SDPA score modifiers), kept so that
  // score_mod_bprop reads what the backward's score_mod recompute made.
  std::unordered_map<const ir::TensorAttrs*, cudnnBackendDescriptor_t> subgraph_descs;
  // Keeps a helper descriptor (conv/matmul/pointwise/reduction descriptor) alive.
  cudnnBackendDescriptor_t keep(Descriptor d);
  // Finalizes an operation and appends it to the graph's list.
  Status add_op(Descriptor op);

  // The node's compute type, else the graph's, else FLOAT.
  DataType compute_type(const ir::Node& n) const;

  std::vector<Descriptor>& ops() { return ops_; }
  const std::vector<ByValueConstant>& constants() const { return constants_; }
  const std::vector<DeviceConstant>& device_constants() const { return device_constants_; }
  const std::vector<DerivedBinding>& derived() const { return derived_; }
  const std::vector<ScratchTensor>& scratch() const { return scratch_; }
  int64_t scratch_bytes() const { return scratch_bytes_; }

 private:
  Result<cudnnBackendDescriptor_t> make_tensor(const std::string& name, const TensorView& v,
                                               DataType type, int64_t uid, bool is_virtual,
                                               bool by_value,
                                               cudnnBackendDescriptor_t ragged = nullptr,
                                               int64_t alignment = kTensorAlignment);
  // The descriptor of graph tensor `t` described with view `v` (tensor() and tensor_as()).
  Result<cudnnBackendDescriptor_t> graph_tensor(const ir::Tensor& t, const TensorView& v);
  // The descriptor of `t`'s ragged offset tensor (null when it has none).
  Result<cudnnBackendDescriptor_t> ragged_of(const ir::Tensor& t);

  ir::ValidatedGraphPtr graph_;  // kept alive: plans lowered from it outlive lower()
  ViewMap views_;
  std::unordered_map<const ir::TensorAttrs*, cudnnBackendDescriptor_t> by_tensor_;
  std::unordered_map<const ir::TensorAttrs*, ir::Tensor> ragged_;  // tensor -> its offsets
  std::vector<Descriptor> owned_;                                  // tensors and helper descriptors
  std::vector<Descriptor> ops_;
  std::vector<ByValueConstant> constants_;
  std::vector<DeviceConstant> device_constants_;
  struct ViewOf {
    ir::Tensor source;
    int64_t byte_offset;
    int64_t alignment;
  };
  std::unordered_map<const ir::TensorAttrs*, ViewOf> views_of_;  // window outputs lowered as views
  std::vector<DerivedBinding> derived_;
  std::vector<ScratchTensor> scratch_;
  int64_t scratch_bytes_ = 0;
  int64_t next_uid_ = 1;
};

// One lowering per op of the table, named lower_<name> after the op's table name
// (lower_conv_fprop, lower_matmul, ...) and defined in <family>.cpp; each names the node
// in its errors. The engine dispatches on the table (engine.cpp), so a new op adds its
// lowering there and nothing here.
#define DNNGRAPH_OP_LOWER_DECL(kind, name, Attrs, in, out) \
  Status lower_##name(LowerContext& cx, const ir::Node& n);
DNNGRAPH_OPS(DNNGRAPH_OP_LOWER_DECL)
#undef DNNGRAPH_OP_LOWER_DECL
// A window op (is_window_op) lowered as a view (view.cpp): no operation; its output is
// recorded as a view of its input (set_view_of). The window ops' lowerings call it.
Status lower_view(LowerContext& cx, const ir::Node& n);
// The frontend's SDPA mask rules checked on an SDPA-family node without cuDNN (the engine's
// precheck, sdpa.cpp); ok for other nodes.
Status sdpa_precheck(const ir::Node& n);
// NotSupported, naming the op, for attention in a dynamic-shape graph given a kernel cache on
// cuDNN before 9.21 (its kernels gave wrong outputs for the shapes after the first); Ok else.
Status sdpa_kernel_cache_rule(const ir::ValidatedGraph& g);

// Helpers shared by composite lowerings (sdpa, softmax): one pointwise / reduction operation
// on already-created tensor descriptors.
Status add_pointwise(LowerContext& cx, const std::string& what, cudnnPointwiseMode_t mode,
                     DataType compute, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                     cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y, int64_t axis = -1);
// Pointwise node `n` (its mode, parameters, axis and compute type) on given descriptors, e.g. a
// node of an SDPA score modifier spliced into the composite graph.
Status add_pointwise_node(LowerContext& cx, const std::string& what, const ir::Node& n,
                          cudnnBackendDescriptor_t in0, cudnnBackendDescriptor_t in1,
                          cudnnBackendDescriptor_t in2, cudnnBackendDescriptor_t y);
Status add_reduction(LowerContext& cx, const std::string& what, cudnnReduceTensorOp_t mode,
                     DataType compute, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y);
// C = A . B (matmul.cpp) in compute type `comp`, with the optional GEMM M/N/K override tensors.
Status add_matmul(LowerContext& cx, const std::string& what, cudnnDataType_t comp,
                  cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
                  cudnnBackendDescriptor_t c, cudnnBackendDescriptor_t m_override = nullptr,
                  cudnnBackendDescriptor_t n_override = nullptr,
                  cudnnBackendDescriptor_t k_override = nullptr);
// Softmax along the last dim of `x` (dims `dim`), as max / sub / exp / sum / div with float
// intermediates; writes `y` and, when `stats` is set, log-sum-exp into it. `max_out` /
// `sum_out`, when set, are the row max and the row sum of exp(x - max) (else virtual).
Status add_softmax(LowerContext& cx, const std::string& what, const std::vector<int64_t>& dim,
                   cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y,
                   cudnnBackendDescriptor_t stats, cudnnBackendDescriptor_t max_out = nullptr,
                   cudnnBackendDescriptor_t sum_out = nullptr);

}  // namespace dnngraph::cudnn
