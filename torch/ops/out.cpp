// out= variants of the ops whose ATen counterparts have one: layer_norm.out
// (native_layer_norm.out), linear_act.out (linear.out), matmul_epilogue.out (bmm/baddbmm.out),
// conv2d_bias_act.out (convolution.out), and the backward ops layer_norm_backward.out
// (native_layer_norm_backward.out), linear_act_backward.out (linear_backward.out),
// conv2d_bias_act_backward.out (convolution_backward.out). rms_norm, sdpa, matmul_epilogue's
// backward have none (ATen's counterparts have none). A gradient output_mask leaves out is not
// computed and its out tensor is left as it was given.
//
// Semantics as ATen's out= ops: each out tensor is resized with at::native::resize_output (an
// empty one silently, one of another shape with ATen's deprecation warning, a storage that
// cannot grow is an error), must be on the result's device and have the result's dtype, must
// not overlap itself; the op returns the out tensors. No autograd (an input or out tensor that
// requires grad is an error, as for ATen's out= functions); the out tensors' versions are bumped.
//
// The result is computed by the functional op and copied into out (one copy on the device):
// the graphs write into their own outputs, whose layout and alignment the cached plan knows.
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <torch/csrc/autograd/variable.h>

#include "core/op_support.hpp"
#include "core/shape_rules.hpp"

namespace dnngraph::torch_ops {
namespace {

// Checks `out` against the result, resizes it as ATen does, then copies the result into it.
void write_out(const char* op, const char* name, const Tensor& result, const Tensor& out) {
  TORCH_CHECK_VALUE(out.device() == result.device(), "dnngraph::", op, ".out: '", name, "' is on ",
                    out.device(), " but the result is on ", result.device(),
                    "; give an out tensor on ", result.device());
  TORCH_CHECK_TYPE(out.scalar_type() == result.scalar_type(), "dnngraph::", op, ".out: '", name,
                   "' has dtype ", out.scalar_type(), " but the result has dtype ",
                   result.scalar_type(), "; give an out tensor of dtype ", result.scalar_type());
  at::assert_no_internal_overlap(out);
  at::native::resize_output(out, result.sizes());
  out.copy_(result);
}

// The autograd kernel of an out= op: refuses inputs and out tensors that require grad (as
// ATen), runs the op below autograd and bumps the versions of the tensors it wrote.
template <class... T>
void refuse_grad(const char* op, const T&... tensors) {
  TORCH_CHECK(!wants_grad(tensors...), "dnngraph::", op,
              ".out: out= variants do not support automatic differentiation (as torch's out= "
              "functions), but an input or an out tensor requires grad; call the functional "
              "form, or this one under torch.no_grad()");
  TORCH_CHECK_NOT_IMPLEMENTED(!(rules::has_tangent(tensors) || ...), "dnngraph::", op,
                              ".out: an input or out tensor has a forward-mode tangent, but the "
                              "op has no forward-mode derivative; call the functional form "
                              "outside forward AD");
}
// write_out for each of a backward's three gradients that the output mask asked for.
void write_grads(const char* op, const std::tuple<Tensor, Tensor, Tensor>& r,
                 std::array<bool, 3> mask, Tensor& o0, Tensor& o1, Tensor& o2) {
  const Tensor* got[3] = {&std::get<0>(r), &std::get<1>(r), &std::get<2>(r)};
  Tensor* outs[3] = {&o0, &o1, &o2};
  const char* names[3] = {"out0", "out1", "out2"};
  for (int i = 0; i < 3; ++i)
    if (mask[i] && got[i]->defined()) write_out(op, names[i], *got[i], *outs[i]);
}
void bump(std::initializer_list<const Tensor*> outs) {
  for (const Tensor* t : outs) torch::autograd::impl::bump_version(*t);
}

// ---------------------------------------------------------------- layer_norm.out

using LnSig = std::tuple<Tensor, Tensor, Tensor>(const Tensor&, c10::SymIntArrayRef,
                                                 const OptTensor&, const OptTensor&, double);
using LnOutSig = std::tuple<Tensor&, Tensor&, Tensor&>(const Tensor&, c10::SymIntArrayRef,
                                                       const OptTensor&, const OptTensor&, double,
                                                       Tensor&, Tensor&, Tensor&);

std::tuple<Tensor&, Tensor&, Tensor&> layer_norm_out(const Tensor& x, c10::SymIntArrayRef shape,
                                                     const OptTensor& w, const OptTensor& b,
                                                     double eps, Tensor& y, Tensor& mean,
                                                     Tensor& rstd) {
  static auto op = op_handle<LnSig>("dnngraph::layer_norm");
  auto [ry, rm, rr] = op.call(x, shape, w, b, eps);
  write_out("layer_norm", "out0", ry, y);
  write_out("layer_norm", "out1", rm, mean);
  write_out("layer_norm", "out2", rr, rstd);
  return {y, mean, rstd};
}

std::tuple<Tensor&, Tensor&, Tensor&> layer_norm_out_autograd(
    const Tensor& x, c10::SymIntArrayRef shape, const OptTensor& w, const OptTensor& b, double eps,
    Tensor& y, Tensor& mean, Tensor& rstd) {
  refuse_grad("layer_norm", x, w, b, y, mean, rstd);
  static auto op = op_handle<LnOutSig>("dnngraph::layer_norm", "out");
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    op.call(x, shape, w, b, eps, y, mean, rstd);
  }
  bump({&y, &mean, &rstd});
  return {y, mean, rstd};
}

// ---------------------------------------------------------------- linear_act.out

using LinSig = Tensor(const Tensor&, const Tensor&, const OptTensor&, c10::string_view);
using LinOutSig = Tensor&(const Tensor&, const Tensor&, const OptTensor&, c10::string_view,
                          Tensor&);

Tensor& linear_act_out(const Tensor& x, const Tensor& w, const OptTensor& bias,
                       c10::string_view act, Tensor& out) {
  static auto op = op_handle<LinSig>("dnngraph::linear_act");
  write_out("linear_act", "out", op.call(x, w, bias, act), out);
  return out;
}

Tensor& linear_act_out_autograd(const Tensor& x, const Tensor& w, const OptTensor& bias,
                                c10::string_view act, Tensor& out) {
  refuse_grad("linear_act", x, w, bias, out);
  static auto op = op_handle<LinOutSig>("dnngraph::linear_act", "out");
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    op.call(x, w, bias, act, out);
  }
  bump({&out});
  return out;
}

// ---------------------------------------------------------------- matmul_epilogue.out

using EpiSig = std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const OptTensor&, double,
                                          c10::string_view, bool);
using EpiOutSig = std::tuple<Tensor&, Tensor&>(const Tensor&, const Tensor&, const OptTensor&,
                                               double, c10::string_view, bool, Tensor&, Tensor&);

std::tuple<Tensor&, Tensor&> matmul_epilogue_out(const Tensor& a, const Tensor& b,
                                                 const OptTensor& bias, double alpha,
                                                 c10::string_view act, bool want_amax, Tensor& out,
                                                 Tensor& amax) {
  static auto op = op_handle<EpiSig>("dnngraph::matmul_epilogue");
  auto [y, m] = op.call(a, b, bias, alpha, act, want_amax);
  write_out("matmul_epilogue", "out", y, out);
  write_out("matmul_epilogue", "amax", m, amax);
  return {out, amax};
}

std::tuple<Tensor&, Tensor&> matmul_epilogue_out_autograd(const Tensor& a, const Tensor& b,
                                                          const OptTensor& bias, double alpha,
                                                          c10::string_view act, bool want_amax,
                                                          Tensor& out, Tensor& amax) {
  refuse_grad("matmul_epilogue", a, b, bias, out, amax);
  static auto op = op_handle<EpiOutSig>("dnngraph::matmul_epilogue", "out");
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    op.call(a, b, bias, alpha, act, want_amax, out, amax);
  }
  bump({&out, &amax});
  return {out, amax};
}

// ---------------------------------------------------------------- conv2d_bias_act.out

using ConvOutSig = Tensor&(const Tensor&, const Tensor&, const OptTensor&, at::IntArrayRef,
                           at::IntArrayRef, at::IntArrayRef, int64_t, c10::string_view, Tensor&);

Tensor& conv2d_bias_act_out(const Tensor& x, const Tensor& w, const OptTensor& bias,
                            at::IntArrayRef stride, at::IntArrayRef padding,
                            at::IntArrayRef dilation, int64_t groups, c10::string_view act,
                            Tensor& out) {
  static auto op = op_handle<ConvSig>("dnngraph::conv2d_bias_act");
  write_out("conv2d_bias_act", "out", op.call(x, w, bias, stride, padding, dilation, groups, act),
            out);
  return out;
}

Tensor& conv2d_bias_act_out_autograd(const Tensor& x, const Tensor& w, const OptTensor& bias,
                                     at::IntArrayRef stride, at::IntArrayRef padding,
                                     at::IntArrayRef dilation, int64_t groups, c10::string_view act,
                                     Tensor& out) {
  refuse_grad("conv2d_bias_act", x, w, bias, out);
  static auto op = op_handle<ConvOutSig>("dnngraph::conv2d_bias_act", "out");
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    op.call(x, w, bias, stride, padding, dilation, groups, act, out);
  }
  bump({&out});
  return out;
}

// ---------------------------------------------------------------- backward ops

using Grads = std::tuple<Tensor, Tensor, Tensor>;
using GradsOut = std::tuple<Tensor&, Tensor&, Tensor&>;
using LnBwdSig = Grads(const Tensor&, const Tensor&, c10::SymIntArrayRef, const Tensor&,
                       const Tensor&, const OptTensor&, const OptTensor&, std::array<bool, 3>);
using LnBwdOutSig = GradsOut(const Tensor&, const Tensor&, c10::SymIntArrayRef, const Tensor&,
                             const Tensor&, const OptTensor&, const OptTensor&, std::array<bool, 3>,
                             Tensor&, Tensor&, Tensor&);

GradsOut layer_norm_backward_out(const Tensor& dy, const Tensor& x, c10::SymIntArrayRef shape,
                                 const Tensor& mean, const Tensor& rstd, const OptTensor& w,
                                 const OptTensor& b, std::array<bool, 3> mask, Tensor& o0,
                                 Tensor& o1, Tensor& o2) {
  static auto op = op_handle<LnBwdSig>("dnngraph::layer_norm_backward");
  write_grads("layer_norm_backward", op.call(dy, x, shape, mean, rstd, w, b, mask), mask, o0, o1,
              o2);
  return {o0, o1, o2};
}
GradsOut layer_norm_backward_out_autograd(const Tensor& dy, const Tensor& x,
                                          c10::SymIntArrayRef shape, const Tensor& mean,
                                          const Tensor& rstd, const OptTensor& w,
                                          const OptTensor& b, std::array<bool, 3> mask, Tensor& o0,
                                          Tensor& o1, Tensor& o2) {
  refuse_grad("layer_norm_backward", dy, x, mean, rstd, w, b, o0, o1, o2);
  static auto op = op_handle<LnBwdOutSig>("dnngraph::layer_norm_backward", "out");
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    op.call(dy, x, shape, mean, rstd, w, b, mask, o0, o1, o2);
  }
  bump({&o0, &o1, &o2});
  return {o0, o1, o2};
}

using LinBwdSig = Grads(const Tensor&, const Tensor&, const Tensor&, const OptTensor&,
                        c10::string_view, std::array<bool, 3>);
using LinBwdOutSig = GradsOut(const Tensor&, const Tensor&, const Tensor&, const OptTensor&,
                              c10::string_view, std::array<bool, 3>, Tensor&, Tensor&, Tensor&);

GradsOut linear_act_backward_out(const Tensor& dy, const Tensor& x, const Tensor& w,
                                 const OptTensor& bias, c10::string_view act,
                                 std::array<bool, 3> mask, Tensor& o0, Tensor& o1, Tensor& o2) {
  static auto op = op_handle<LinBwdSig>("dnngraph::linear_act_backward");
  write_grads("linear_act_backward", op.call(dy, x, w, bias, act, mask), mask, o0, o1, o2);
  return {o0, o1, o2};
}
GradsOut linear_act_backward_out_autograd(const Tensor& dy, const Tensor& x, const Tensor& w,
                                          const OptTensor& bias, c10::string_view act,
                                          std::array<bool, 3> mask, Tensor& o0, Tensor& o1,
                                          Tensor& o2) {
  refuse_grad("linear_act_backward", dy, x, w, bias, o0, o1, o2);
  static auto op = op_handle<LinBwdOutSig>("dnngraph::linear_act_backward", "out");
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    op.call(dy, x, w, bias, act, mask, o0, o1, o2);
  }
  bump({&o0, &o1, &o2});
  return {o0, o1, o2};
}

using ConvPlainBwdSig = Grads(const Tensor&, const Tensor&, const Tensor&, const OptTensor&,
                              at::IntArrayRef, at::IntArrayRef, at::IntArrayRef, int64_t,
                              c10::string_view, std::array<bool, 3>);
using ConvBwdOutSig = GradsOut(const Tensor&, const Tensor&, const Tensor&, const OptTensor&,
                               at::IntArrayRef, at::IntArrayRef, at::IntArrayRef, int64_t,
                               c10::string_view, std::array<bool, 3>, Tensor&, Tensor&, Tensor&);

GradsOut conv2d_bias_act_backward_out(const Tensor& dy, const Tensor& x, const Tensor& w,
                                      const OptTensor& bias, at::IntArrayRef stride,
                                      at::IntArrayRef padding, at::IntArrayRef dilation,
                                      int64_t groups, c10::string_view act,
                                      std::array<bool, 3> mask, Tensor& o0, Tensor& o1,
                                      Tensor& o2) {
  static auto op = op_handle<ConvPlainBwdSig>("dnngraph::conv2d_bias_act_backward");
  write_grads("conv2d_bias_act_backward",
              op.call(dy, x, w, bias, stride, padding, dilation, groups, act, mask), mask, o0, o1,
              o2);
  return {o0, o1, o2};
}
GradsOut conv2d_bias_act_backward_out_autograd(const Tensor& dy, const Tensor& x, const Tensor& w,
                                               const OptTensor& bias, at::IntArrayRef stride,
                                               at::IntArrayRef padding, at::IntArrayRef dilation,
                                               int64_t groups, c10::string_view act,
                                               std::array<bool, 3> mask, Tensor& o0, Tensor& o1,
                                               Tensor& o2) {
  refuse_grad("conv2d_bias_act_backward", dy, x, w, bias, o0, o1, o2);
  static auto op = op_handle<ConvBwdOutSig>("dnngraph::conv2d_bias_act_backward", "out");
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    op.call(dy, x, w, bias, stride, padding, dilation, groups, act, mask, o0, o1, o2);
  }
  bump({&o0, &o1, &o2});
  return {o0, o1, o2};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(dnngraph, m) {
  m.def(
      "layer_norm_backward.out(Tensor dy, Tensor x, SymInt[] normalized_shape, Tensor mean, "
      "Tensor rstd, Tensor? weight, Tensor? bias, bool[3] output_mask, *, Tensor(a!) out0, "
      "Tensor(b!) out1, Tensor(c!) out2) -> (Tensor(a!), Tensor(b!), Tensor(c!))");
  m.def(
      "linear_act_backward.out(Tensor dy, Tensor x, Tensor w, Tensor? bias, str act, bool[3] "
      "output_mask, *, Tensor(a!) out0, Tensor(b!) out1, Tensor(c!) out2) -> (Tensor(a!), "
      "Tensor(b!), Tensor(c!))");
  m.def(
      "conv2d_bias_act_backward.out(Tensor dy, Tensor x, Tensor w, Tensor? bias, int[2] stride, "
      "int[2] padding, int[2] dilation, int groups, str act, bool[3] output_mask, *, Tensor(a!) "
      "out0, Tensor(b!) out1, Tensor(c!) out2) -> (Tensor(a!), Tensor(b!), Tensor(c!))");
  m.def(
      "layer_norm.out(Tensor x, SymInt[] normalized_shape, Tensor? weight=None, Tensor? "
      "bias=None, float eps=1e-05, *, Tensor(a!) out0, Tensor(b!) out1, Tensor(c!) out2) -> "
      "(Tensor(a!), Tensor(b!), Tensor(c!))");
  m.def(
      "linear_act.out(Tensor x, Tensor w, Tensor? bias=None, str act=\"none\", *, Tensor(a!) "
      "out) -> Tensor(a!)");
  m.def(
      "matmul_epilogue.out(Tensor a, Tensor b, Tensor? bias=None, float alpha=1.0, "
      "str act=\"none\", bool want_amax=False, *, Tensor(a!) out, Tensor(b!) amax) -> "
      "(Tensor(a!), Tensor(b!))");
  m.def(
      "conv2d_bias_act.out(Tensor x, Tensor w, Tensor? bias=None, int[2] stride=1, int[2] "
      "padding=0, int[2] dilation=1, int groups=1, str act=\"none\", *, Tensor(a!) out) -> "
      "Tensor(a!)");
}

// One kernel for CPU, CUDA and Meta: it calls the functional op (which dispatches on the
// inputs' device) and writes the result out.
TORCH_LIBRARY_IMPL(dnngraph, CompositeExplicitAutograd, m) {
  m.impl("layer_norm.out", &layer_norm_out);
  m.impl("linear_act.out", &linear_act_out);
  m.impl("matmul_epilogue.out", &matmul_epilogue_out);
  m.impl("conv2d_bias_act.out", &conv2d_bias_act_out);
  m.impl("layer_norm_backward.out", &layer_norm_backward_out);
  m.impl("linear_act_backward.out", &linear_act_backward_out);
  m.impl("conv2d_bias_act_backward.out", &conv2d_bias_act_backward_out);
}
TORCH_LIBRARY_IMPL(dnngraph, Autograd, m) {
  m.impl("layer_norm.out", &layer_norm_out_autograd);
  m.impl("linear_act.out", &linear_act_out_autograd);
  m.impl("matmul_epilogue.out", &matmul_epilogue_out_autograd);
  m.impl("conv2d_bias_act.out", &conv2d_bias_act_out_autograd);
  m.impl("layer_norm_backward.out", &layer_norm_backward_out_autograd);
  m.impl("linear_act_backward.out", &linear_act_backward_out_autograd);
  m.impl("conv2d_bias_act_backward.out", &conv2d_bias_act_backward_out_autograd);
}

}  // namespace dnngraph::torch_ops
