// The shape rules of the dnngraph torch ops, in one place: the real kernels (CPU, CUDA) and
// the Meta kernels (torch.compile, export, FakeTensor) call the same function, so a shape the
// eager op refuses is refused while tracing too, with the same message. Sizes are SymInts:
// concrete for real tensors, symbolic under tracing (a comparison then becomes a guard).
//
// Every check runs before any size is divided or any work is done, and names the op and the
// user's argument; bad values are ValueErrors (TORCH_CHECK_VALUE).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>
#include <torch/library.h>

#include <initializer_list>
#include <optional>
#include <utility>
#include <vector>

namespace dnngraph::torch_ops::rules {

using SymShape = std::vector<c10::SymInt>;
using OptTensor = std::optional<at::Tensor>;

// Every defined tensor of `others` on `x`'s device, whatever the device (a Meta kernel also
// gets mixed meta and cpu tensors: a parameter left on `meta` is refused there, before any
// output is made).
void check_same_device(const char* op, const at::Tensor& x, const char* x_name,
                       std::initializer_list<std::pair<const at::Tensor*, const char*>> others);

// linear_act: x [..., K], weight [N, K], bias [N] -> [..., N].
SymShape linear(const char* op, const at::Tensor& x, const at::Tensor& w, const OptTensor& bias);

// matmul_epilogue: a [M, K] / b [K, N], or a [Ba, M, K] / b [Bb, K, N] with batches equal or
// one of them 1 (broadcast as torch.matmul: 1 against 0 gives 0); bias broadcastable to the
// output. Returns the output's shape ([M, N] or [batch, M, N]).
SymShape matmul_epilogue(const char* op, const at::Tensor& a, const at::Tensor& b,
                         const OptTensor& bias);

// conv2d_bias_act: x [N, C, H, W], weight [K, C/groups, R, S], bias [K]; stride and dilation
// >= 1, padding >= 0, groups >= 1 dividing K; a non-empty output. Returns [N, K, P, Q].
SymShape conv2d(const char* op, const at::Tensor& x, const at::Tensor& w, const OptTensor& bias,
                at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                int64_t groups);

// sdpa: q [B, Hq, Sq, D], k [B, Hk, Skv, D], v [B, Hk, Skv, Dv], Hq == Hk or (enable_gqa and
// Hk >= 1 dividing Hq), attn_bias broadcastable [B|1, Hq|1, Sq, Skv], not with is_causal.
// Returns the output's shape [B, Hq, Sq, Dv] (logsumexp: its first three).
SymShape sdpa(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
              const OptTensor& bias, bool causal, bool gqa);

// conv2d_bias_add_act: conv2d's rules, and a residual of the convolution's output shape on x's
// device. Returns the output's shape.
SymShape conv2d_add(const char* op, const at::Tensor& x, const at::Tensor& w, const OptTensor& bias,
                    const at::Tensor& residual, at::IntArrayRef stride, at::IntArrayRef padding,
                    at::IntArrayRef dilation, int64_t groups);

// residual_block: x [N, C, H, W]; w1 and w2 [C, C, k, k] with an odd k (stride 1, padding
// k/2: each convolution keeps x's shape); b1 and b2 [C]. Returns x's shape.
SymShape residual_block(const char* op, const at::Tensor& x, const at::Tensor& w1,
                        const OptTensor& b1, const at::Tensor& w2, const OptTensor& b2);

// rope / rope_backward: x [B, H, S, D] with an even D, cos and sin [S, D/2], all on x's device.
void rope(const char* op, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

// swiglu: z [..., 2F] -> [..., F]. swiglu_backward: dy [..., F] on z's device as well.
SymShape swiglu(const char* op, const at::Tensor& z);
void swiglu_backward(const char* op, const at::Tensor& dy, const at::Tensor& z);

// add_rms_norm: x and residual of one shape ending with normalized_shape, weight of
// normalized_shape, all on x's device.
void add_rms_norm(const char* op, const at::Tensor& x, const at::Tensor& residual,
                  c10::SymIntArrayRef normalized_shape, const OptTensor& weight);

// activation_backward: dy, and (unless the activation is none) `saved` of dy's shape and dtype
// on its device; the activation's name is one parse_act knows.
void activation_backward(const char* op, const at::Tensor& dy, const at::Tensor& saved,
                         c10::string_view act);

// A training backward's `saved` tensor (the forward's Z, or Y for relu): when given (not empty),
// the forward output's shape `want` and x's dtype, on x's device.
void check_saved(const char* op, const OptTensor& saved, const at::Tensor& x, const char* x_name,
                 const SymShape& want);

// A statistics tensor of a backward op (rstd, mean, logsumexp) with exactly `want` elements
// (one per row), on x's device.
void check_stat(const char* op, const at::Tensor& stat, const char* name, const at::Tensor& x,
                const char* x_name, const c10::SymInt& want);

// A backward op's incoming gradient `t` (named `name`) has the forward output's shape `want`.
void check_grad(const char* op, const at::Tensor& t, const char* name, const SymShape& want);

// layer_norm / rms_norm: x [..., normalized_shape], weight and bias (when given) of
// normalized_shape, all on x's device.
void norm(const char* op, const at::Tensor& x, c10::SymIntArrayRef normalized_shape,
          const OptTensor& weight, const OptTensor& bias);

// Forward-mode AD (torch.autograd.forward_ad, torch.func.jvp and jacfwd) has no formula in these
// ops: an input with a tangent is refused (NotImplementedError naming it), as ATen refuses ops
// without one, instead of giving an output without a tangent, which forward AD reads as zero.
inline bool has_tangent(const at::Tensor& t) { return t.defined() && t._fw_grad(0).defined(); }
inline bool has_tangent(const OptTensor& t) { return t && has_tangent(*t); }
void refuse_forward_ad(const char* op,
                       std::initializer_list<std::pair<const at::Tensor*, const char*>> inputs);

// `t` as the engines take it: a tensor whose strides are all >= 1. A dim of extent > 1 with
// stride 0 (an expand()ed input) is materialised (a contiguous copy); a stride of 0 on a dim of
// extent 1 (never stepped over) becomes 1 on a view. Anything else is returned as is.
at::Tensor engine_operand(const at::Tensor& t);

// The Meta kernel `fn` of an op, registered so that every tensor argument (optional ones and
// tensor lists included) must be on one device once `fn` has run its own rules. The dispatcher
// sends a call to the Meta kernel when any argument is on `meta`: without this a parameter left
// on `meta` next to CPU or CUDA tensors would return an uninitialised tensor instead of an error.
// Usage: m.impl("op", rules::meta_kernel(&op_meta)). Not for run_graph, whose pass-by-value
// scalars may stay on the host next to CUDA inputs (its own Meta kernel checks the rest).
torch::CppFunction meta_kernel_boxed(c10::KernelFunction inner);
template <class F>
torch::CppFunction meta_kernel(F* fn) {
  return meta_kernel_boxed(c10::KernelFunction::makeFromUnboxedRuntimeFunction(fn));
}

}  // namespace dnngraph::torch_ops::rules
