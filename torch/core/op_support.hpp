// Helpers the op families share: numerics of the graph per input dtype, output dtypes of
// statistics, calling a registered op below autograd, symbolic shapes for Meta kernels.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include "core/runtime.hpp"

namespace dnngraph::torch_ops {

using at::Tensor;
using OptTensor = std::optional<at::Tensor>;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// fp64 inputs compute and keep intermediates in fp64 (gradcheck); others in fp32.
inline void set_numerics(Graph& g, const at::Tensor& x) {
  const DataType t = x.scalar_type() == at::kDouble ? DataType::Double : DataType::Float;
  g.set_compute_data_type(t).set_intermediate_data_type(t);
}
// Statistics (mean, rstd, logsumexp) are fp32, or fp64 for fp64 inputs.
inline at::ScalarType stat_dtype(at::ScalarType x) {
  return x == at::kDouble ? at::kDouble : at::kFloat;
}

// The op `dnngraph::<name>` as a typed handle, looked up once.
template <class Sig>
c10::TypedOperatorHandle<Sig> op_handle(const char* name, const char* overload = "") {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, overload).template typed<Sig>();
}
// The signatures of rms_norm and its backward (norm.cpp), which add_rms_norm also calls.
using RmsSig = std::tuple<Tensor, Tensor>(const Tensor&, c10::SymIntArrayRef, const OptTensor&,
                                          std::optional<double>);
using RmsBwdSig = std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, c10::SymIntArrayRef,
                                             const Tensor&, const OptTensor&, std::array<bool, 2>);

// The signatures of the convolution ops (conv.cpp, conv_residual.cpp) that other ops call:
// conv2d_bias_act, conv2d_bias_add_act, activation_backward and conv2d_bias_act_train_backward.
using ConvSig = Tensor(const Tensor&, const Tensor&, const OptTensor&, at::IntArrayRef,
                       at::IntArrayRef, at::IntArrayRef, int64_t, c10::string_view);
using ConvAddSig = Tensor(const Tensor&, const Tensor&, const OptTensor&, const Tensor&,
                          at::IntArrayRef, at::IntArrayRef, at::IntArrayRef, int64_t,
                          c10::string_view);
using ActBwdSig = Tensor(const Tensor&, const Tensor&, c10::string_view);
using ConvBwdSig = std::tuple<Tensor, Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&,
                                                      const OptTensor&, at::IntArrayRef,
                                                      at::IntArrayRef, at::IntArrayRef, int64_t,
                                                      c10::string_view, const OptTensor&,
                                                      std::array<bool, 3>);

// The memory format a convolution op keeps from its input x: channels_last, else contiguous.
inline at::MemoryFormat conv_format(const at::Tensor& x) {
  return x.suggest_memory_format() == at::MemoryFormat::ChannelsLast
             ? at::MemoryFormat::ChannelsLast
             : at::MemoryFormat::Contiguous;
}

inline const at::Tensor& value_or_undefined(const OptTensor& t) {
  static const at::Tensor undefined;
  return t ? *t : undefined;
}
inline bool has(const OptTensor& t) { return t && t->defined(); }
inline OptTensor opt(const Tensor& t) { return t.defined() ? OptTensor(t) : std::nullopt; }

// Whether an autograd kernel must record a node: grad mode on and some input requires grad.
// Without that, it calls the op below autograd directly (no autograd::Function overhead).
inline bool needs_grad_of(const Tensor& t) { return t.defined() && t.requires_grad(); }
inline bool needs_grad_of(const OptTensor& t) { return t && needs_grad_of(*t); }
template <class... T>
bool wants_grad(const T&... t) {
  return at::GradMode::is_enabled() && (needs_grad_of(t) || ...);
}

// ---------------------------------------------------------------- attention layouts
// [B, H, S, D] tensors of attention: whether t's heads are interleaved with its positions (a
// head split of a [B, S, H*D] projection). Symbolic, so Meta kernels share the rule.
inline bool heads_inside(const at::Tensor& t) {
  return t.sym_stride(1) < t.sym_stride(2) && t.sym_size(1) > 1 && t.sym_size(2) > 1;
}
// A new [B, H, S, d] tensor in like's layout: stored [B, S, H, d] when like's heads are inside,
// so that merging the heads back (or a head split's gradient) stays a view.
inline at::Tensor empty_bhsd(const at::Tensor& like, const c10::SymInt& d,
                             const at::TensorOptions& o) {
  if (heads_inside(like))
    return at::empty_symint({like.sym_size(0), like.sym_size(2), like.sym_size(1), d}, o)
        .transpose(1, 2);
  return at::empty_symint({like.sym_size(0), like.sym_size(1), like.sym_size(2), d}, o);
}
// The gradient of an attention input: its strides when dense, else empty_bhsd's layout.
inline at::Tensor empty_grad_bhsd(const at::Tensor& t) {
  return t.is_non_overlapping_and_dense() ? at::empty_like(t)
                                          : empty_bhsd(t, t.sym_size(3), t.options());
}

// ---------------------------------------------------------------- training: saved tensors
// What the backward of act(z) needs from the forward: nothing (none), the output itself (relu:
// relu'(z) = [y > 0]), or the pre-activation z, which the forward graph then emits as a
// second output of the same graph.
inline bool saves_preactivation(Act act) { return act != Act::None && act != Act::Relu; }
// The tensor the backward reads act' from, given the training forward's (y, z): y for relu, z
// for the others, undefined for none.
inline Tensor saved_activation_input(Act act, const Tensor& y, const Tensor& z) {
  return act == Act::Relu ? y : (saves_preactivation(act) ? z : Tensor());
}

// The pre-activation a convolution's forward graph keeps for the backward (z), as the graph's
// output: itself, or for tanh and sigmoid a copy made by an identity op. cuDNN 9.19's
// conv-bias-activation engine takes conv, bias add and a tanh or sigmoid with the bias add's
// result kept as an output, and then fails at execute (CUDNN_STATUS_INTERNAL_ERROR); the copy
// keeps that engine from taking the graph (its other engines fuse the copy).
inline ir::Tensor kept_preactivation(Graph& g, Act act, ir::Tensor pre) {
  if (act != Act::Tanh && act != Act::Sigmoid) return pre;
  return g.unary(PointwiseMode::Identity, std::move(pre));
}

// Saves what a convolution's backward needs: x, w, bias, the activation input (above) as
// tensors, and the convolution's parameters and activation name.
inline void save_conv_for_backward(AutogradContext* ctx, const Tensor& x, const Tensor& w,
                                   const OptTensor& bias, const Tensor& saved,
                                   at::IntArrayRef stride, at::IntArrayRef padding,
                                   at::IntArrayRef dilation, int64_t groups, c10::string_view act) {
  ctx->save_for_backward({x, w, value_or_undefined(bias), saved});
  ctx->saved_data["stride"] = stride.vec();
  ctx->saved_data["padding"] = padding.vec();
  ctx->saved_data["dilation"] = dilation.vec();
  ctx->saved_data["groups"] = groups;
  ctx->saved_data["act"] = std::string(act);
}

// The pointwise mode of act's derivative: out = act'(in1) * in0 (in0 = dY, in1 = z; for relu
// the output y works as in1 too).
inline PointwiseMode act_backward_mode(Act act) {
  switch (act) {
    case Act::Relu:
      return PointwiseMode::ReluBwd;
    case Act::Gelu:
      return PointwiseMode::GeluBwd;
    case Act::GeluTanh:
      return PointwiseMode::GeluApproxTanhBwd;
    case Act::Silu:
      return PointwiseMode::SiluBwd;
    case Act::Tanh:
      return PointwiseMode::TanhBwd;
    case Act::Sigmoid:
      return PointwiseMode::SigmoidBwd;
    case Act::None:
      break;
  }
  return PointwiseMode::Identity;
}

// dZ = act'(saved) * dY as a (virtual) graph tensor; dY itself for no activation.
inline ir::Tensor act_backward(Graph& g, Act act, ir::Tensor dy, ir::Tensor saved) {
  if (act == Act::None) return dy;
  return g.binary(act_backward_mode(act), std::move(dy), std::move(saved));
}

// Backward graphs fuse the activation's derivative into the products that read dZ; when the
// engine has no plan for such a graph, the op runs the unfused dnngraph graphs instead (dZ
// materialized once). set_unfused_backward(true) takes that path always (tests, comparisons).
bool unfused_backward();
void set_unfused_backward(bool v);
// Logs once per op, at info level (DNNGRAPH_LOG=info), that the unfused path runs and why.
void note_unfused(const char* op, const Status& why);
// An elementwise part of an op that the engine has no plan for runs as ATen's kernels, the
// ones eager PyTorch runs for the same step: the unfused backward's dZ = act'(saved) * dY and
// bias gradient (cuDNN 9.19 fuses a reduction only into a matmul's or convolution's epilogue,
// so pointwise ops and a reduction alone have no engine), the residual add in front of a norm
// whose fused graph has no plan, a rotation made only of pointwise ops. Not a fallback of the
// op (its products and norms still run as dnngraph graphs; the fallback counter is untouched):
// logged once per op and part at info level (DNNGRAPH_LOG=info) with why, and listed in
// docs/performance.md.
void note_aten_part(const char* op, const char* part, const Status& why);
// Whether an op sends a graph of pointwise ops alone (an activation or its derivative) to the
// engine of `device`: on the CPU engine yes; on a GPU no, ATen's kernel computes it
// (note_aten_part): cuDNN 9.19 has no engine for most such graphs, and one of its engines
// failed at execute on a large channels-last tensor (docs/performance.md). When not, notes
// (note_aten_part) that `part` of `op` runs on ATen.
bool pointwise_graph_on(const at::Device& device, const char* op, const char* part);
// The unfused backward's elementwise part, shared by the GEMM and convolution ops: dZ =
// act'(saved) * dY (allocated in `format`; dY itself without an activation, nothing written)
// and, when dbias is given, dbias = dZ summed to dbias's shape, by one graph. Where the engine
// has no plan for it (or it would be pointwise alone on a GPU) ATen's kernels compute the same.
Tensor unfused_dz(const char* op, Act act, const Tensor& dy, const Tensor& saved,
                  const Tensor& dbias, at::MemoryFormat format);

}  // namespace dnngraph::torch_ops
