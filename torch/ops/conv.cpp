// dnngraph::conv2d_bias_act and its backward.
//   forward : Y = act(conv_fprop(X, W) + bias)  (one graph; NCHW or channels_last: the graph
//             takes the tensors' strides, W follows X's memory format, Y keeps it). For
//             training (conv2d_bias_act_train) the same graph also writes the pre-activation
//             Z where the backward needs it (relu: Y suffices). Where that graph has no plan,
//             the convolution is a graph of its own and the rest ATen's elementwise kernels.
//   backward: two graphs, each with dZ = act'(Z) * dY fused in front:
//             dX = conv_dgrad(dZ, W);  dW = conv_wgrad(dZ, X) and dbias = sum(dZ).
//             Every gradient keeps the memory format of its tensor (channels_last end to end).
#include "core/op_support.hpp"
#include "core/shape_rules.hpp"
#include "ops/gemm.hpp"  // gemm::activation_graph

namespace dnngraph::torch_ops {
namespace {

enum Uid : int64_t {
  X = 1,
  W = 2,
  BIAS = 3,
  DY = 4,
  SAVED = 5,
  Y = 100,
  DX = 101,
  DW = 102,
  Z = 103,
  DBIAS = 104
};

struct ConvParams {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups = 1;
  at::MemoryFormat format = at::MemoryFormat::Contiguous;
};

// The convolution's parameters, after rules::conv2d has checked them.
ConvParams conv_params(const Tensor& x, at::IntArrayRef stride, at::IntArrayRef padding,
                       at::IntArrayRef dilation, int64_t groups) {
  return {stride.vec(), padding.vec(), dilation.vec(), groups, conv_format(x)};
}

std::vector<int64_t> out_shape(const Tensor& x, const Tensor& w, const ConvParams& p) {
  std::vector<int64_t> s{x.size(0), w.size(0), 0, 0};
  for (int i = 0; i < 2; ++i)
    s[2 + i] =
        (x.size(2 + i) + 2 * p.padding[i] - p.dilation[i] * (w.size(2 + i) - 1) - 1) / p.stride[i] +
        1;
  return s;
}

template <class Attrs>
Attrs attrs_of(const ConvParams& p) {
  Attrs a;
  a.set_padding(p.padding).set_stride(p.stride).set_dilation(p.dilation);
  return a;
}

void check_inputs(const char* op, const Tensor& x, const Tensor& w, const OptTensor& bias) {
  check_device(op, x, "x", {{&w, "weight"}, {has(bias) ? &*bias : nullptr, "bias"}});
  data_type_of(x, op, "x");
  check_same_dtype(op, x, "x", w, "weight");
  if (has(bias)) {
    check_same_dtype(op, x, "x", *bias, "bias");
    TORCH_CHECK_VALUE(bias->dim() == 1 && bias->size(0) == w.size(0), "dnngraph::", op,
                      ": 'bias' must be [", w.size(0), "], got ", bias->sizes());
  }
}

// The forward graph act(conv(x, w) + b) writing y, and z (the pre-activation) when want_z;
// b may be undefined. Cached; ->graph is null when the engine has no plan for it.
std::shared_ptr<const BuiltGraph> forward_graph(const char* op, const Tensor& x, const Tensor& w,
                                                const Tensor& b, const ConvParams& p, Act act,
                                                const Tensor& y, const Tensor& z) {
  const bool want_z = z.defined();
  Key key(op);
  key.add(x).add(w).add(b).add(at::IntArrayRef(p.stride)).add(at::IntArrayRef(p.padding));
  key.add(at::IntArrayRef(p.dilation)).add(static_cast<int64_t>(act)).add(want_z);
  key.add_device(x.device());
  return cached_graph(key, x.device(), op, [&](Graph& gr) {
    set_numerics(gr, x);
    ir::Tensor pre = gr.conv_fprop(tensor_like(gr, X, "x", x), tensor_like(gr, W, "weight", w),
                                   attrs_of<ir::ConvFpropAttrs>(p));
    if (b.defined()) pre = gr.bias(pre, tensor_like(gr, BIAS, "bias", b));
    output_like(apply_act(gr, act, pre), Y, "y", y);
    if (want_z) output_like(kept_preactivation(gr, act, pre), Z, "preactivation", z);
  });
}

bool run_forward_graph(const char* op, const Tensor& x, const Tensor& w, const Tensor& b,
                       const ConvParams& p, Act act, const Tensor& y, const Tensor& z) {
  auto g = forward_graph(op, x, w, b, p, act, y, z);
  if (!g->graph) return false;
  execute(*g, x.device(), op, {{X, &x}, {W, &w}, {BIAS, &b}, {Y, &y}, {Z, &z}});
  return true;
}

// When the fused graph has no plan (e.g. an activation cuDNN's fusion engines do not take in
// that layout or type, where its plain convolution engines run): the convolution as a smaller graph
// (with the bias, else alone), the rest by ATen's elementwise kernels, the ones eager runs for
// it (note_aten_part; not an ATen fallback: the convolution is still dnngraph's). Writes y and,
// when defined, z. False when the convolution alone has no plan either.
bool conv_forward_unfused(const char* op, const Tensor& x, const Tensor& w, const Tensor& b,
                          const ConvParams& p, Act act, const Status& why, const Tensor& y,
                          const Tensor& z) {
  // The pre-activation: y itself without an activation, else z when kept, else a temporary.
  const Tensor pre = act == Act::None ? y : z.defined() ? z : at::empty_like(y);
  bool done = false;
  if (act != Act::None && b.defined()) done = run_forward_graph(op, x, w, b, p, Act::None, pre, {});
  if (!done) {
    // Without an activation and with no bias, this is the fused graph again: no plan.
    if (act == Act::None && !b.defined()) return false;
    if (!run_forward_graph(op, x, w, Tensor(), p, Act::None, pre, {})) return false;
    if (b.defined()) {
      note_aten_part(op, "the bias", why);
      pre.add_(b);
    }
  }
  if (act != Act::None) gemm::activation_graph(op, pre, act, y, Tensor());
  return true;
}

// (y, z): z, the pre-activation, only when want_z (an extra output of the same graph).
std::pair<Tensor, Tensor> conv_forward(const char* op, const Tensor& x_in, const Tensor& w_in,
                                       const OptTensor& bias, const ConvParams& p, Act act,
                                       bool want_z = false) {
  const Tensor x = rules::engine_operand(x_in.contiguous(p.format)),
               w = rules::engine_operand(w_in.contiguous(p.format));
  const std::vector<int64_t> shape = out_shape(x, w, p);
  TORCH_CHECK_VALUE(shape[2] > 0 && shape[3] > 0, "dnngraph::", op, ": output of size ",
                    at::IntArrayRef(shape), " is empty; 'x' ", x.sizes(), " is too small for ",
                    "'weight' ", w.sizes(), " with this padding, stride and dilation");
  Tensor y = at::empty(shape, x.options().memory_format(p.format));
  Tensor z = want_z ? at::empty_like(y) : Tensor();
  const Tensor b = has(bias) ? rules::engine_operand(bias->reshape({1, -1, 1, 1})) : Tensor();
  auto aten = [&] {
    Tensor pre =
        at::conv2d(x, w, value_or_undefined(bias), p.stride, p.padding, p.dilation, p.groups);
    y.copy_(aten_act(act, pre));
    if (want_z) z.copy_(pre);
    return std::pair{y, z};
  };
  if (y.numel() == 0) return aten();
  auto g = forward_graph(op, x, w, b, p, act, y, z);
  if (g->graph) {
    execute(*g, x.device(), op, {{X, &x}, {W, &w}, {BIAS, &b}, {Y, &y}, {Z, &z}});
    return {y, z};
  }
  if (conv_forward_unfused(op, x, w, b, p, act, g->unsupported, y, z)) return {y, z};
  warn_fallback(op, g->unsupported);
  return aten();
}

Tensor conv2d_bias_act(const Tensor& x, const Tensor& w, const OptTensor& bias,
                       at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                       int64_t groups, c10::string_view act) {
  const char* op = "conv2d_bias_act";
  rules::conv2d(op, x, w, bias, stride, padding, dilation, groups);
  check_inputs(op, x, w, bias);
  const ConvParams p = conv_params(x, stride, padding, dilation, groups);
  return conv_forward(op, x, w, bias, p, parse_act(op, act)).first;
}

// The forward for training: (y, z), z the pre-activation where the backward needs it, else an
// empty tensor.
std::tuple<Tensor, Tensor> conv2d_bias_act_train(const Tensor& x, const Tensor& w,
                                                 const OptTensor& bias, at::IntArrayRef stride,
                                                 at::IntArrayRef padding, at::IntArrayRef dilation,
                                                 int64_t groups, c10::string_view act_name) {
  const char* op = "conv2d_bias_act";
  rules::conv2d(op, x, w, bias, stride, padding, dilation, groups);
  check_inputs(op, x, w, bias);
  const ConvParams p = conv_params(x, stride, padding, dilation, groups);
  const Act act = parse_act(op, act_name);
  const bool want_z = saves_preactivation(act);
  auto [y, z] = conv_forward(op, x, w, bias, p, act, want_z);
  return {y, want_z ? z : at::empty({0}, x.options())};
}

// One of the two gradient graphs: dX = dgrad(dZ, W) or dW = wgrad(dZ, X), written into `out`
// (allocated by the caller in the memory format p.format).
Tensor conv_grad(const char* op, bool data, const Tensor& dz, const Tensor& other,
                 const Tensor& out, const ConvParams& p) {
  auto aten = [&] {
    // Only the shape of the tensor being differentiated matters to ATen.
    const Tensor input = data ? at::empty_like(out) : other;
    const Tensor weight = data ? other : at::empty_like(out);
    auto r = at::convolution_backward(dz, input, weight, std::nullopt, p.stride, p.padding,
                                      p.dilation, false, {0, 0}, p.groups, {data, !data, false});
    out.copy_(data ? std::get<0>(r) : std::get<1>(r));
    return out;
  };
  Key key(data ? "conv2d_dgrad" : "conv2d_wgrad");
  key.add(dz).add(other).add(out).add(at::IntArrayRef(p.stride)).add(at::IntArrayRef(p.padding));
  key.add(at::IntArrayRef(p.dilation)).add_device(dz.device());
  auto g = cached_graph(key, dz.device(), op, [&](Graph& gr) {
    set_numerics(gr, dz);
    ir::Tensor DZ = tensor_like(gr, DY, "dz", dz);
    ir::Tensor r =
        data ? gr.conv_dgrad(DZ, tensor_like(gr, W, "weight", other),
                             attrs_of<ir::ConvDgradAttrs>(p))
             : gr.conv_wgrad(DZ, tensor_like(gr, X, "x", other), attrs_of<ir::ConvWgradAttrs>(p));
    output_like(r, data ? DX : DW, data ? "dx" : "dweight", out);
  });
  if (!g->graph) {
    warn_fallback(op, g->unsupported);
    return aten();
  }
  execute(*g, dz.device(), op, {{DY, &dz}, {data ? W : X, &other}, {data ? DX : DW, &out}});
  return out;
}

// One fused gradient graph: dZ = act'(saved) * dY in front of dgrad (data) or of wgrad and the
// bias reduction. False when the engine has no plan for it.
struct ConvBackward {
  Tensor dy, saved, x, w;  // saved: Z (relu: Y); undefined for no activation
  Act act = Act::None;
};
ir::Tensor conv_dz(Graph& gr, const ConvBackward& b) {
  ir::Tensor dy = tensor_like(gr, DY, "dy", b.dy);
  if (b.act == Act::None) return dy;
  return act_backward(gr, b.act, dy, tensor_like(gr, SAVED, "saved", b.saved));
}
bool conv_grad_fused(const char* op, const ConvBackward& b, const ConvParams& p, bool data,
                     const Tensor& out, const Tensor& dbias) {
  Key key(data ? "conv2d_dgrad_fused" : "conv2d_wgrad_fused");
  key.add(b.dy).add(b.saved).add(data ? b.w : b.x).add(out).add(dbias);
  key.add(static_cast<int64_t>(b.act)).add(at::IntArrayRef(p.stride));
  key.add(at::IntArrayRef(p.padding)).add(at::IntArrayRef(p.dilation)).add_device(b.dy.device());
  auto g = cached_graph(key, b.dy.device(), op, [&](Graph& gr) {
    set_numerics(gr, b.dy);
    ir::Tensor dz = conv_dz(gr, b);
    if (data) {
      ir::Tensor dx =
          gr.conv_dgrad(dz, tensor_like(gr, W, "weight", b.w), attrs_of<ir::ConvDgradAttrs>(p));
      output_like(dx, DX, "dx", out);
      return;
    }
    if (out.defined())
      output_like(gr.conv_wgrad(dz, tensor_like(gr, X, "x", b.x), attrs_of<ir::ConvWgradAttrs>(p)),
                  DW, "dweight", out);
    if (dbias.defined()) output_like(gr.reduction(dz, {ReductionMode::Add}), DBIAS, "dbias", dbias);
  });
  if (!g->graph) {
    note_unfused(op, g->unsupported);
    return false;
  }
  execute(*g, b.dy.device(), op,
          {{DY, &b.dy},
           {SAVED, &b.saved},
           {W, &b.w},
           {X, &b.x},
           {DX, data ? &out : nullptr},
           {DW, data ? nullptr : &out},
           {DBIAS, &dbias}});
  return true;
}

std::tuple<Tensor, Tensor, Tensor> conv2d_bias_act_train_backward(
    const Tensor& dy, const Tensor& x_in, const Tensor& w_in, const OptTensor& bias,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
    c10::string_view act_name, const OptTensor& saved, std::array<bool, 3> mask) {
  const char* op = "conv2d_bias_act_backward";
  rules::check_grad(op, dy, "dy",
                    rules::conv2d(op, x_in, w_in, bias, stride, padding, dilation, groups));
  check_inputs(op, x_in, w_in, bias);
  check_device(op, x_in, "x", {{&dy, "dy"}, {has(saved) ? &*saved : nullptr, "saved"}});
  check_same_dtype(op, x_in, "x", dy, "dy");
  rules::check_saved(op, saved, x_in, "x",
                     rules::SymShape(dy.sym_sizes().begin(), dy.sym_sizes().end()));
  const ConvParams p = conv_params(x_in, stride, padding, dilation, groups);
  if (x_in.numel() == 0 || dy.numel() == 0) {  // an empty batch (or no channels): zero grads
    auto zeros = [&](const Tensor& t, at::MemoryFormat f) {
      return at::zeros(t.sizes(), t.options().memory_format(f));
    };
    return {mask[0] ? zeros(x_in, p.format) : Tensor(), mask[1] ? zeros(w_in, p.format) : Tensor(),
            mask[2] && has(bias) ? zeros(*bias, at::MemoryFormat::Contiguous) : Tensor()};
  }
  ConvBackward b;
  b.act = parse_act(op, act_name);
  b.x = rules::engine_operand(x_in.contiguous(p.format));
  b.w = rules::engine_operand(w_in.contiguous(p.format));
  TORCH_CHECK_VALUE(dy.sizes() == at::IntArrayRef(out_shape(b.x, b.w, p)), "dnngraph::", op,
                    ": 'dy' has shape ", dy.sizes(), "; the forward's output is ",
                    at::IntArrayRef(out_shape(b.x, b.w, p)));
  b.dy = rules::engine_operand(dy.contiguous(p.format));
  if (b.act != Act::None) {
    if (has(saved) && saved->numel() > 0) {
      TORCH_CHECK_VALUE(saved->sizes() == dy.sizes(), "dnngraph::", op, ": 'saved' has shape ",
                        saved->sizes(), "; expected the output's ", dy.sizes());
      b.saved = rules::engine_operand(saved->contiguous(p.format));
    } else {  // a direct call without it: the forward graph recomputes the pre-activation
      b.saved = conv_forward(op, b.x, b.w, bias, p, Act::None).first;
    }
  }
  Tensor dx = mask[0] ? at::empty(b.x.sizes(), b.x.options().memory_format(p.format)) : Tensor();
  Tensor dw = mask[1] ? at::empty(b.w.sizes(), b.w.options().memory_format(p.format)) : Tensor();
  Tensor db = mask[2] && has(bias) ? at::empty({b.w.size(0)}, bias->options()) : Tensor();
  const Tensor db4 = db.defined() ? db.view({1, -1, 1, 1}) : Tensor();
  bool data_ok = !dx.defined(), weight_ok = !dw.defined() && !db.defined();
  if (!unfused_backward()) {
    if (!data_ok) data_ok = conv_grad_fused(op, b, p, true, dx, Tensor());
    if (!weight_ok) weight_ok = conv_grad_fused(op, b, p, false, dw, db4);
  }
  if (data_ok && weight_ok) return {dx, dw, db};
  const Tensor dz = unfused_dz(op, b.act, b.dy, b.saved, weight_ok ? Tensor() : db4, p.format);
  if (!data_ok) conv_grad(op, true, dz, b.w, dx, p);
  if (!weight_ok && dw.defined()) conv_grad(op, false, dz, b.x, dw, p);
  return {dx, dw, db};
}

std::tuple<Tensor, Tensor, Tensor> conv2d_bias_act_backward(
    const Tensor& dy, const Tensor& x, const Tensor& w, const OptTensor& bias,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
    c10::string_view act, std::array<bool, 3> mask) {
  return conv2d_bias_act_train_backward(dy, x, w, bias, stride, padding, dilation, groups, act,
                                        std::nullopt, mask);
}

// ---------------------------------------------------------------- Meta

Tensor conv2d_bias_act_meta(const Tensor& x, const Tensor& w, const OptTensor& bias,
                            at::IntArrayRef stride, at::IntArrayRef padding,
                            at::IntArrayRef dilation, int64_t groups, c10::string_view act) {
  const rules::SymShape s =
      rules::conv2d("conv2d_bias_act", x, w, bias, stride, padding, dilation, groups);
  parse_act("conv2d_bias_act", act);
  const at::MemoryFormat format = conv_format(x);
  return at::empty_symint(s, x.options().memory_format(format));
}

std::tuple<Tensor, Tensor> conv2d_bias_act_train_meta(const Tensor& x, const Tensor& w,
                                                      const OptTensor& bias, at::IntArrayRef stride,
                                                      at::IntArrayRef padding,
                                                      at::IntArrayRef dilation, int64_t groups,
                                                      c10::string_view act) {
  Tensor y = conv2d_bias_act_meta(x, w, bias, stride, padding, dilation, groups, act);
  const bool want_z = saves_preactivation(parse_act("conv2d_bias_act", act));
  return {y, want_z ? at::empty_like(y) : at::empty({0}, x.options())};
}

std::tuple<Tensor, Tensor, Tensor> conv2d_bias_act_backward_meta(
    const Tensor& dy, const Tensor& x, const Tensor& w, const OptTensor& bias,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
    c10::string_view act, std::array<bool, 3> mask) {
  parse_act("conv2d_bias_act_backward", act);
  rules::check_grad(
      "conv2d_bias_act_backward", dy, "dy",
      rules::conv2d("conv2d_bias_act_backward", x, w, bias, stride, padding, dilation, groups));
  rules::check_same_device("conv2d_bias_act_backward", x, "x", {{&dy, "dy"}});
  const at::MemoryFormat format = conv_format(x);
  return {mask[0] ? at::empty_symint(x.sym_sizes(), x.options().memory_format(format)) : Tensor(),
          mask[1] ? at::empty_symint(w.sym_sizes(), w.options().memory_format(format)) : Tensor(),
          mask[2] && has(bias) ? at::empty_symint(bias->sym_sizes(), bias->options()) : Tensor()};
}

std::tuple<Tensor, Tensor, Tensor> conv2d_bias_act_train_backward_meta(
    const Tensor& dy, const Tensor& x, const Tensor& w, const OptTensor& bias,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
    c10::string_view act, const OptTensor& saved, std::array<bool, 3> mask) {
  auto r =
      conv2d_bias_act_backward_meta(dy, x, w, bias, stride, padding, dilation, groups, act, mask);
  rules::check_saved("conv2d_bias_act_backward", saved, x, "x",
                     rules::SymShape(dy.sym_sizes().begin(), dy.sym_sizes().end()));
  return r;
}

// ---------------------------------------------------------------- autograd

using ConvTrainSig = std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const OptTensor&,
                                                at::IntArrayRef, at::IntArrayRef, at::IntArrayRef,
                                                int64_t, c10::string_view);

class ConvFn : public torch::autograd::Function<ConvFn> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& x, const Tensor& w,
                               const OptTensor& bias, at::IntArrayRef stride,
                               at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                               c10::string_view act) {
    static auto op = op_handle<ConvTrainSig>("dnngraph::conv2d_bias_act_train");
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [y, z] = op.call(x, w, bias, stride, padding, dilation, groups, act);
    const Tensor saved = saved_activation_input(parse_act("conv2d_bias_act", act), y, z);
    save_conv_for_backward(ctx, x, w, bias, saved, stride, padding, dilation, groups, act);
    return {y};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static auto op = op_handle<ConvBwdSig>("dnngraph::conv2d_bias_act_train_backward");
    const variable_list none(8);
    if (!grads[0].defined()) return none;
    auto s = ctx->get_saved_variables();
    std::array<bool, 3> mask{ctx->needs_input_grad(0), ctx->needs_input_grad(1),
                             s[2].defined() && ctx->needs_input_grad(2)};
    auto& d = ctx->saved_data;
    const auto stride = d["stride"].toIntVector(), padding = d["padding"].toIntVector(),
               dilation = d["dilation"].toIntVector();
    auto [dx, dw, db] = op.call(grads[0], s[0], s[1], opt(s[2]), stride, padding, dilation,
                                d["groups"].toInt(), d["act"].toStringRef(), opt(s[3]), mask);
    variable_list r = none;
    r[0] = dx, r[1] = dw, r[2] = db;
    return r;
  }
};

Tensor conv2d_bias_act_autograd(const Tensor& x, const Tensor& w, const OptTensor& bias,
                                at::IntArrayRef stride, at::IntArrayRef padding,
                                at::IntArrayRef dilation, int64_t groups, c10::string_view act) {
  rules::refuse_forward_ad("conv2d_bias_act",
                           {{&x, "x"}, {&w, "weight"}, {has(bias) ? &*bias : nullptr, "bias"}});
  if (!wants_grad(x, w, bias)) {
    static auto op = op_handle<ConvSig>("dnngraph::conv2d_bias_act");
    at::AutoDispatchBelowADInplaceOrView guard;
    return op.call(x, w, bias, stride, padding, dilation, groups, act);
  }
  return ConvFn::apply(x, w, bias, stride, padding, dilation, groups, act)[0];
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(dnngraph, m) {
  m.def(
      "conv2d_bias_act(Tensor x, Tensor w, Tensor? bias=None, int[2] stride=1, int[2] padding=0, "
      "int[2] dilation=1, int groups=1, str act=\"none\") -> Tensor");
  m.def(
      "conv2d_bias_act_backward(Tensor dy, Tensor x, Tensor w, Tensor? bias, int[2] stride, "
      "int[2] padding, int[2] dilation, int groups, str act, bool[3] output_mask) -> (Tensor, "
      "Tensor, Tensor)");
  // The training pair the autograd kernel calls: the forward also returns the pre-activation
  // where the backward needs it (else an empty tensor); the backward takes it as `saved` (Z, or
  // Y for relu) instead of recomputing it.
  m.def(
      "conv2d_bias_act_train(Tensor x, Tensor w, Tensor? bias, int[2] stride, int[2] padding, "
      "int[2] dilation, int groups, str act) -> (Tensor, Tensor)");
  m.def(
      "conv2d_bias_act_train_backward(Tensor dy, Tensor x, Tensor w, Tensor? bias, int[2] "
      "stride, int[2] padding, int[2] dilation, int groups, str act, Tensor? saved, bool[3] "
      "output_mask) -> (Tensor, Tensor, Tensor)");
}

// The same kernels serve CPU (reference engine) and CUDA (cuDNN): the handle follows the
// tensors' device.
namespace {
void impl_devices(torch::Library& m) {
  m.impl("conv2d_bias_act", &conv2d_bias_act);
  m.impl("conv2d_bias_act_backward", &conv2d_bias_act_backward);
  m.impl("conv2d_bias_act_train", &conv2d_bias_act_train);
  m.impl("conv2d_bias_act_train_backward", &conv2d_bias_act_train_backward);
}
}  // namespace
TORCH_LIBRARY_IMPL(dnngraph, CPU, m) { impl_devices(m); }
TORCH_LIBRARY_IMPL(dnngraph, CUDA, m) { impl_devices(m); }
TORCH_LIBRARY_IMPL(dnngraph, Meta, m) {
  m.impl("conv2d_bias_act", rules::meta_kernel(&conv2d_bias_act_meta));
  m.impl("conv2d_bias_act_backward", rules::meta_kernel(&conv2d_bias_act_backward_meta));
  m.impl("conv2d_bias_act_train", rules::meta_kernel(&conv2d_bias_act_train_meta));
  m.impl("conv2d_bias_act_train_backward",
         rules::meta_kernel(&conv2d_bias_act_train_backward_meta));
}
TORCH_LIBRARY_IMPL(dnngraph, Autograd, m) { m.impl("conv2d_bias_act", &conv2d_bias_act_autograd); }

}  // namespace dnngraph::torch_ops
