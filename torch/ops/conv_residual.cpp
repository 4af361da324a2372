// dnngraph::conv2d_bias_add_act: a convolution with the residual add in its epilogue,
//   Y = act(conv_fprop(X, W) + bias + residual)   (one graph; the ResNet block's second conv),
// and dnngraph::activation_backward, dZ = act'(saved) * dY as one pointwise graph.
// Backward (autograd): dZ = activation_backward(dY, Z or Y) is the residual's gradient (it must
// be written anyway), then conv2d_bias_act's backward graphs with no activation take dZ
// (dgrad; wgrad with the bias reduction). Layouts as conv2d_bias_act: channels_last end to end.
#include "core/op_support.hpp"
#include "core/shape_rules.hpp"

namespace dnngraph::torch_ops {
namespace {

enum Uid : int64_t { X = 1, W = 2, BIAS = 3, RES = 4, DY = 5, SAVED = 6 };
enum OutUid : int64_t { Y = 100, Z = 101, DZ = 102 };

std::pair<Tensor, Tensor> forward(const Tensor& x_in, const Tensor& w_in, const OptTensor& bias,
                                  const Tensor& res_in, at::IntArrayRef stride,
                                  at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                                  c10::string_view act_name, bool train) {
  const char* op = "conv2d_bias_add_act";
  const rules::SymShape sym_shape =
      rules::conv2d_add(op, x_in, w_in, bias, res_in, stride, padding, dilation, groups);
  const Act act = parse_act(op, act_name);
  check_device(op, x_in, "x",
               {{&w_in, "weight"}, {&res_in, "residual"}, {has(bias) ? &*bias : nullptr, "bias"}});
  data_type_of(x_in, op, "x");
  check_same_dtype(op, x_in, "x", w_in, "weight");
  check_same_dtype(op, x_in, "x", res_in, "residual");
  if (has(bias)) check_same_dtype(op, x_in, "x", *bias, "bias");
  std::vector<int64_t> shape;
  for (const c10::SymInt& d : sym_shape) shape.push_back(d.expect_int());
  const at::IntArrayRef out_shape(shape);
  const at::MemoryFormat fmt = conv_format(x_in);
  const Tensor x = rules::engine_operand(x_in.contiguous(fmt)),
               w = rules::engine_operand(w_in.contiguous(fmt)),
               res = rules::engine_operand(res_in.contiguous(fmt));
  Tensor y = at::empty(out_shape, x.options().memory_format(fmt));
  const bool want_z = train && saves_preactivation(act);
  Tensor z = want_z ? at::empty_like(y) : Tensor();
  if (y.numel() == 0) return {y, want_z ? z : at::empty({0}, x.options())};  // an empty batch
  const Tensor b = has(bias) ? rules::engine_operand(bias->reshape({1, -1, 1, 1})) : Tensor();
  ir::ConvFpropAttrs attrs;
  attrs.set_padding(padding.vec()).set_stride(stride.vec()).set_dilation(dilation.vec());
  Key key(op);
  key.add(x).add(w).add(b).add(res).add(stride).add(padding).add(dilation);
  key.add(static_cast<int64_t>(act)).add(want_z).add_device(x.device());
  auto g = cached_graph(key, x.device(), op, [&](Graph& gr) {
    set_numerics(gr, x);
    ir::Tensor pre =
        gr.conv_fprop(tensor_like(gr, X, "x", x), tensor_like(gr, W, "weight", w), attrs);
    if (b.defined()) pre = gr.bias(pre, tensor_like(gr, BIAS, "bias", b));
    pre = gr.add(pre, tensor_like(gr, RES, "residual", res));
    output_like(apply_act(gr, act, pre), Y, "y", y);
    if (want_z) output_like(kept_preactivation(gr, act, pre), Z, "preactivation", z);
  });
  if (!g->graph) {
    // No plan for the fused graph: conv2d_bias_act computes conv + bias (its own graphs, or its
    // ATen fallback under the fallback policy), then the residual add and the activation are
    // ATen's elementwise kernels, the ones eager runs for them.
    note_aten_part(op, "the residual add and the activation", g->unsupported);
    static auto conv = op_handle<ConvSig>("dnngraph::conv2d_bias_act");
    Tensor pre = conv.call(x, w, bias, stride, padding, dilation, groups, "none");
    pre.add_(res);
    y.copy_(aten_act(act, pre));
    if (want_z) z.copy_(pre);
  } else {
    execute(*g, x.device(), op, {{X, &x}, {W, &w}, {BIAS, &b}, {RES, &res}, {Y, &y}, {Z, &z}});
  }
  return {y, want_z ? z : at::empty({0}, x.options())};
}

Tensor conv2d_bias_add_act(const Tensor& x, const Tensor& w, const OptTensor& bias,
                           const Tensor& res, at::IntArrayRef stride, at::IntArrayRef padding,
                           at::IntArrayRef dilation, int64_t groups, c10::string_view act) {
  return forward(x, w, bias, res, stride, padding, dilation, groups, act, false).first;
}
std::tuple<Tensor, Tensor> conv2d_bias_add_act_train(const Tensor& x, const Tensor& w,
                                                     const OptTensor& bias, const Tensor& res,
                                                     at::IntArrayRef stride,
                                                     at::IntArrayRef padding,
                                                     at::IntArrayRef dilation, int64_t groups,
                                                     c10::string_view act) {
  auto [y, z] = forward(x, w, bias, res, stride, padding, dilation, groups, act, true);
  return {y, z};
}

// dZ's memory format: the forward output's (`saved`), the layout the convolution's backward
// takes, so that a gradient arriving in another one (NCHW from a loss over a channels_last
// model) is read in place by the derivative's kernel rather than copied twice; dY's without an
// activation. Contiguous for other ranks.
at::MemoryFormat dz_format(const Tensor& dy, const Tensor& saved, Act act) {
  if (dy.dim() != 4) return at::MemoryFormat::Contiguous;
  return conv_format(act == Act::None || !saved.defined() ? dy : saved);
}

// dZ = act'(saved) * dY (saved: Z, or Y for relu), in dz_format.
Tensor activation_backward(const Tensor& dy_in, const Tensor& saved_in, c10::string_view name) {
  const char* op = "activation_backward";
  rules::activation_backward(op, dy_in, saved_in, name);
  const Act act = parse_act(op, name);
  check_device(op, dy_in, "dy", {{&saved_in, "saved"}});
  data_type_of(dy_in, op, "dy");
  if (dy_in.dim() == 0)  // the graphs take tensors of at least one dim
    return activation_backward(dy_in.view({1}), act == Act::None ? saved_in : saved_in.view({1}),
                               name)
        .squeeze(0);
  const at::MemoryFormat fmt = dz_format(dy_in, saved_in, act);
  Tensor dz = at::empty(dy_in.sizes(), dy_in.options().memory_format(fmt));
  if (dz.numel() == 0) return dz;
  if (!pointwise_graph_on(dy_in.device(), op, "the activation derivative")) {
    aten_act_backward_out(act, dz, dy_in, saved_in);  // one kernel, whatever dy's layout
    return dz;
  }
  const Tensor dy = dy_in.contiguous(fmt);
  const Tensor saved = act == Act::None ? Tensor() : saved_in.contiguous(fmt);
  Key key(op);
  key.add(dy).add(saved).add(static_cast<int64_t>(act)).add_device(dy.device());
  auto g = cached_graph(key, dy.device(), op, [&](Graph& gr) {
    set_numerics(gr, dy);
    ir::Tensor d = tensor_like(gr, DY, "dy", dy);
    d = act == Act::None ? gr.unary(PointwiseMode::Identity, d)
                         : act_backward(gr, act, d, tensor_like(gr, SAVED, "saved", saved));
    output_like(d, DZ, "dz", dz);
  });
  if (!g->graph) {
    warn_fallback(op, g->unsupported);
    aten_act_backward_out(act, dz, dy, saved);
    return dz;
  }
  execute(*g, dy.device(), op, {{DY, &dy}, {SAVED, &saved}, {DZ, &dz}});
  return dz;
}

// ---------------------------------------------------------------- Meta

Tensor conv2d_bias_add_act_meta(const Tensor& x, const Tensor& w, const OptTensor& bias,
                                const Tensor& res, at::IntArrayRef stride, at::IntArrayRef padding,
                                at::IntArrayRef dilation, int64_t groups, c10::string_view act) {
  const char* op = "conv2d_bias_add_act";
  const rules::SymShape s =
      rules::conv2d_add(op, x, w, bias, res, stride, padding, dilation, groups);
  parse_act(op, act);
  return at::empty_symint(s, x.options().memory_format(conv_format(x)));
}
std::tuple<Tensor, Tensor> conv2d_bias_add_act_train_meta(const Tensor& x, const Tensor& w,
                                                          const OptTensor& bias, const Tensor& res,
                                                          at::IntArrayRef stride,
                                                          at::IntArrayRef padding,
                                                          at::IntArrayRef dilation, int64_t groups,
                                                          c10::string_view act) {
  Tensor y = conv2d_bias_add_act_meta(x, w, bias, res, stride, padding, dilation, groups, act);
  const bool want_z = saves_preactivation(parse_act("conv2d_bias_add_act", act));
  return {y, want_z ? at::empty_like(y) : at::empty({0}, x.options())};
}
Tensor activation_backward_meta(const Tensor& dy, const Tensor& saved, c10::string_view name) {
  rules::activation_backward("activation_backward", dy, saved, name);
  const at::MemoryFormat fmt = dz_format(dy, saved, parse_act("activation_backward", name));
  return at::empty_symint(dy.sym_sizes(), dy.options().memory_format(fmt));
}

// ---------------------------------------------------------------- autograd

using AddTrainSig = std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const OptTensor&,
                                               const Tensor&, at::IntArrayRef, at::IntArrayRef,
                                               at::IntArrayRef, int64_t, c10::string_view);

class ConvAddFn : public torch::autograd::Function<ConvAddFn> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& x, const Tensor& w,
                               const OptTensor& bias, const Tensor& res, at::IntArrayRef stride,
                               at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                               c10::string_view act) {
    static auto op = op_handle<AddTrainSig>("dnngraph::conv2d_bias_add_act_train");
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [y, z] = op.call(x, w, bias, res, stride, padding, dilation, groups, act);
    const Tensor saved = saved_activation_input(parse_act("conv2d_bias_add_act", act), y, z);
    save_conv_for_backward(ctx, x, w, bias, saved, stride, padding, dilation, groups, act);
    return {y};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static auto act_bwd = op_handle<ActBwdSig>("dnngraph::activation_backward");
    static auto conv_bwd = op_handle<ConvBwdSig>("dnngraph::conv2d_bias_act_train_backward");
    variable_list r(9);
    if (!grads[0].defined()) return r;
    auto s = ctx->get_saved_variables();
    auto& d = ctx->saved_data;
    const std::string act = d["act"].toStringRef();
    const Tensor dz = act_bwd.call(grads[0], s[3].defined() ? s[3] : grads[0], act);
    std::array<bool, 3> mask{ctx->needs_input_grad(0), ctx->needs_input_grad(1),
                             s[2].defined() && ctx->needs_input_grad(2)};
    if (mask[0] || mask[1] || mask[2]) {
      auto [dx, dw, db] = conv_bwd.call(dz, s[0], s[1], opt(s[2]), d["stride"].toIntVector(),
                                        d["padding"].toIntVector(), d["dilation"].toIntVector(),
                                        d["groups"].toInt(), "none", std::nullopt, mask);
      r[0] = dx, r[1] = dw, r[2] = db;
    }
    r[3] = dz;
    return r;
  }
};

Tensor conv2d_bias_add_act_autograd(const Tensor& x, const Tensor& w, const OptTensor& bias,
                                    const Tensor& res, at::IntArrayRef stride,
                                    at::IntArrayRef padding, at::IntArrayRef dilation,
                                    int64_t groups, c10::string_view act) {
  rules::refuse_forward_ad(
      "conv2d_bias_add_act",
      {{&x, "x"}, {&w, "weight"}, {has(bias) ? &*bias : nullptr, "bias"}, {&res, "residual"}});
  if (!wants_grad(x, w, bias, res)) {
    static auto op = op_handle<ConvAddSig>("dnngraph::conv2d_bias_add_act");
    at::AutoDispatchBelowADInplaceOrView guard;
    return op.call(x, w, bias, res, stride, padding, dilation, groups, act);
  }
  return ConvAddFn::apply(x, w, bias, res, stride, padding, dilation, groups, act)[0];
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(dnngraph, m) {
  m.def(
      "conv2d_bias_add_act(Tensor x, Tensor w, Tensor? bias, Tensor residual, int[2] stride=1, "
      "int[2] padding=0, int[2] dilation=1, int groups=1, str act=\"none\") -> Tensor");
  m.def(
      "conv2d_bias_add_act_train(Tensor x, Tensor w, Tensor? bias, Tensor residual, int[2] "
      "stride, int[2] padding, int[2] dilation, int groups, str act) -> (Tensor, Tensor)");
  m.def("activation_backward(Tensor dy, Tensor saved, str act) -> Tensor");
}

// The same kernels serve CPU (reference engine) and CUDA (cuDNN).
namespace {
void impl_devices(torch::Library& m) {
  m.impl("conv2d_bias_add_act", &conv2d_bias_add_act);
  m.impl("conv2d_bias_add_act_train", &conv2d_bias_add_act_train);
  m.impl("activation_backward", &activation_backward);
}
}  // namespace
TORCH_LIBRARY_IMPL(dnngraph, CPU, m) { impl_devices(m); }
TORCH_LIBRARY_IMPL(dnngraph, CUDA, m) { impl_devices(m); }
TORCH_LIBRARY_IMPL(dnngraph, Meta, m) {
  m.impl("conv2d_bias_add_act", rules::meta_kernel(&conv2d_bias_add_act_meta));
  m.impl("conv2d_bias_add_act_train", rules::meta_kernel(&conv2d_bias_add_act_train_meta));
  m.impl("activation_backward", rules::meta_kernel(&activation_backward_meta));
}
TORCH_LIBRARY_IMPL(dnngraph, Autograd, m) {
  m.impl("conv2d_bias_add_act", &conv2d_bias_add_act_autograd);
}

}  // namespace dnngraph::torch_ops
