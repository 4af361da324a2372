// dnngraph::conv2d_bias_act and its backward.
//   forward : Y = act(conv_fprop(X, W) + bias)  (one graph; NCHW or channels_last: the graph
//             takes the tensors' strides, W follows X's memory format, Y keeps it)
//   backward: dZ = act'(Z) * dY (ATen; Z recomputed by the forward graph with act none),
//             dX = conv_dgrad(dZ, W), dW = conv_wgrad(dZ, X) (one graph each), dbias = sum(dZ).
#include "core/op_support.hpp"
#include "core/shape_rules.hpp"

namespace dnngraph::torch_ops {
namespace {

enum Uid : int64_t { X = 1, W = 2, BIAS = 3, DY = 4, Y = 100, DX = 101, DW = 102 };

struct ConvParams {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups = 1;
  at::MemoryFormat format = at::MemoryFormat::Contiguous;
};

// The convolution's parameters, after rules::conv2d has checked them.
ConvParams conv_params(const Tensor& x, at::IntArrayRef stride, at::IntArrayRef padding,
                       at::IntArrayRef dilation, int64_t groups) {
  ConvParams p{stride.vec(), padding.vec(), dilation.vec(), groups, x.suggest_memory_format()};
  if (p.format != at::MemoryFormat::ChannelsLast) p.format = at::MemoryFormat::Contiguous;
  return p;
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

Tensor conv_forward(const char* op, const Tensor& x_in, const Tensor& w_in, const OptTensor& bias,
                    const ConvParams& p, Act act) {
  const Tensor x = rules::engine_operand(x_in.contiguous(p.format)),
               w = rules::engine_operand(w_in.contiguous(p.format));
  const std::vector<int64_t> shape = out_shape(x, w, p);
  TORCH_CHECK_VALUE(shape[2] > 0 && shape[3] > 0, "dnngraph::", op, ": output of size ",
                    at::IntArrayRef(shape), " is empty; 'x' ", x.sizes(), " is too small for ",
                    "'weight' ", w.sizes(), " with this padding, stride and dilation");
  Tensor y = at::empty(shape, x.options().memory_format(p.format));
  const Tensor b = has(bias) ? rules::engine_operand(bias->reshape({1, -1, 1, 1})) : Tensor();
  auto aten = [&] {
    y.copy_(aten_act(act, at::conv2d(x, w, value_or_undefined(bias), p.stride, p.padding,
                                     p.dilation, p.groups)));
    return y;
  };
  if (y.numel() == 0) return aten();
  Key key(op);
  key.add(x).add(w).add(b).add(at::IntArrayRef(p.stride)).add(at::IntArrayRef(p.padding));
  key.add(at::IntArrayRef(p.dilation)).add(static_cast<int64_t>(act)).add_device(x.device());
  auto g = cached_graph(key, x.device(), op, [&](Graph& gr) {
    set_numerics(gr, x);
    ir::Tensor z = gr.conv_fprop(tensor_like(gr, X, "x", x), tensor_like(gr, W, "weight", w),
                                 attrs_of<ir::ConvFpropAttrs>(p));
    if (b.defined()) z = gr.bias(z, tensor_like(gr, BIAS, "bias", b));
    output_like(apply_act(gr, act, z), Y, "y", y);
  });
  if (!g->graph) {
    warn_fallback(op, g->unsupported);
    return aten();
  }
  execute(*g, x.device(), op, {{X, &x}, {W, &w}, {BIAS, &b}, {Y, &y}});
  return y;
}

Tensor conv2d_bias_act(const Tensor& x, const Tensor& w, const OptTensor& bias,
                       at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                       int64_t groups, c10::string_view act) {
  const char* op = "conv2d_bias_act";
  rules::conv2d(op, x, w, bias, stride, padding, dilation, groups);
  check_inputs(op, x, w, bias);
  const ConvParams p = conv_params(x, stride, padding, dilation, groups);
  return conv_forward(op, x, w, bias, p, parse_act(op, act));
}

// One of the two gradient graphs: dX = dgrad(dZ, W) or dW = wgrad(dZ, X).
Tensor conv_grad(const char* op, bool data, const Tensor& dz, const Tensor& other,
                 std::vector<int64_t> out_dims, const ConvParams& p) {
  const Tensor& ref = data ? other : dz;  // the tensor whose options the result takes
  Tensor out = at::empty(out_dims, ref.options().memory_format(p.format));
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

std::tuple<Tensor, Tensor, Tensor> conv2d_bias_act_backward(
    const Tensor& dy, const Tensor& x_in, const Tensor& w_in, const OptTensor& bias,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
    c10::string_view act_name, std::array<bool, 3> mask) {
  const char* op = "conv2d_bias_act_backward";
  rules::check_grad(op, dy, "dy",
                    rules::conv2d(op, x_in, w_in, bias, stride, padding, dilation, groups));
  check_inputs(op, x_in, w_in, bias);
  check_device(op, x_in, "x", {{&dy, "dy"}});
  check_same_dtype(op, x_in, "x", dy, "dy");
  const ConvParams p = conv_params(x_in, stride, padding, dilation, groups);
  const Act act = parse_act(op, act_name);
  if (x_in.numel() == 0 || dy.numel() == 0) {  // an empty batch (or no channels): zero grads
    auto zeros = [&](const Tensor& t, at::MemoryFormat f) {
      return at::zeros(t.sizes(), t.options().memory_format(f));
    };
    return {mask[0] ? zeros(x_in, p.format) : Tensor(), mask[1] ? zeros(w_in, p.format) : Tensor(),
            mask[2] && has(bias) ? zeros(*bias, at::MemoryFormat::Contiguous) : Tensor()};
  }
  const Tensor x = rules::engine_operand(x_in.contiguous(p.format)),
               w = rules::engine_operand(w_in.contiguous(p.format));
  TORCH_CHECK_VALUE(dy.sizes() == at::IntArrayRef(out_shape(x, w, p)), "dnngraph::", op,
                    ": 'dy' has shape ", dy.sizes(), "; the forward's output is ",
                    at::IntArrayRef(out_shape(x, w, p)));
  Tensor dz = dy;
  if (act != Act::None) dz = aten_act_backward(act, dy, conv_forward(op, x, w, bias, p, Act::None));
  dz = rules::engine_operand(dz.contiguous(p.format));
  Tensor dx, dw, db;
  if (mask[0]) dx = conv_grad(op, true, dz, w, x.sizes().vec(), p);
  if (mask[1]) dw = conv_grad(op, false, dz, x, w.sizes().vec(), p);
  if (mask[2] && has(bias)) db = dz.sum({0, 2, 3});
  return {dx, dw, db};
}

// ---------------------------------------------------------------- Meta

Tensor conv2d_bias_act_meta(const Tensor& x, const Tensor& w, const OptTensor& bias,
                            at::IntArrayRef stride, at::IntArrayRef padding,
                            at::IntArrayRef dilation, int64_t groups, c10::string_view) {
  const rules::SymShape s =
      rules::conv2d("conv2d_bias_act", x, w, bias, stride, padding, dilation, groups);
  auto format = x.suggest_memory_format() == at::MemoryFormat::ChannelsLast
                    ? at::MemoryFormat::ChannelsLast
                    : at::MemoryFormat::Contiguous;
  return at::empty_symint(s, x.options().memory_format(format));
}

std::tuple<Tensor, Tensor, Tensor> conv2d_bias_act_backward_meta(
    const Tensor& dy, const Tensor& x, const Tensor& w, const OptTensor& bias,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
    c10::string_view, std::array<bool, 3> mask) {
  rules::check_grad(
      "conv2d_bias_act_backward", dy, "dy",
      rules::conv2d("conv2d_bias_act_backward", x, w, bias, stride, padding, dilation, groups));
  rules::check_same_device("conv2d_bias_act_backward", x, "x", {{&dy, "dy"}});
  auto format = x.suggest_memory_format() == at::MemoryFormat::ChannelsLast
                    ? at::MemoryFormat::ChannelsLast
                    : at::MemoryFormat::Contiguous;
  return {mask[0] ? at::empty_symint(x.sym_sizes(), x.options().memory_format(format)) : Tensor(),
          mask[1] ? at::empty_symint(w.sym_sizes(), w.options().memory_format(format)) : Tensor(),
          mask[2] && has(bias) ? at::empty_symint(bias->sym_sizes(), bias->options()) : Tensor()};
}

// ---------------------------------------------------------------- autograd

using ConvSig = Tensor(const Tensor&, const Tensor&, const OptTensor&, at::IntArrayRef,
                       at::IntArrayRef, at::IntArrayRef, int64_t, c10::string_view);
using ConvBwdSig = std::tuple<Tensor, Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&,
                                                      const OptTensor&, at::IntArrayRef,
                                                      at::IntArrayRef, at::IntArrayRef, int64_t,
                                                      c10::string_view, std::array<bool, 3>);

class ConvFn : public torch::autograd::Function<ConvFn> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& x, const Tensor& w,
                               const OptTensor& bias, at::IntArrayRef stride,
                               at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                               c10::string_view act) {
    static auto op = op_handle<ConvSig>("dnngraph::conv2d_bias_act");
    at::AutoDispatchBelowADInplaceOrView guard;
    Tensor y = op.call(x, w, bias, stride, padding, dilation, groups, act);
    ctx->save_for_backward({x, w, value_or_undefined(bias)});
    ctx->saved_data["stride"] = stride.vec();
    ctx->saved_data["padding"] = padding.vec();
    ctx->saved_data["dilation"] = dilation.vec();
    ctx->saved_data["groups"] = groups;
    ctx->saved_data["act"] = std::string(act);
    return {y};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static auto op = op_handle<ConvBwdSig>("dnngraph::conv2d_bias_act_backward");
    const variable_list none(8);
    if (!grads[0].defined()) return none;
    auto s = ctx->get_saved_variables();
    std::array<bool, 3> mask{ctx->needs_input_grad(0), ctx->needs_input_grad(1),
                             s[2].defined() && ctx->needs_input_grad(2)};
    auto& d = ctx->saved_data;
    const auto stride = d["stride"].toIntVector(), padding = d["padding"].toIntVector(),
               dilation = d["dilation"].toIntVector();
    auto [dx, dw, db] = op.call(grads[0], s[0], s[1], opt(s[2]), stride, padding, dilation,
                                d["groups"].toInt(), d["act"].toStringRef(), mask);
    variable_list r = none;
    r[0] = dx, r[1] = dw, r[2] = db;
    return r;
  }
};

Tensor conv2d_bias_act_autograd(const Tensor& x, const Tensor& w, const OptTensor& bias,
                                at::IntArrayRef stride, at::IntArrayRef padding,
                                at::IntArrayRef dilation, int64_t groups, c10::string_view act) {
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
}

// The same kernels serve CPU (reference engine) and CUDA (cuDNN): the handle follows the
// tensors' device.
namespace {
void impl_devices(torch::Library& m) {
  m.impl("conv2d_bias_act", &conv2d_bias_act);
  m.impl("conv2d_bias_act_backward", &conv2d_bias_act_backward);
}
}  // namespace
TORCH_LIBRARY_IMPL(dnngraph, CPU, m) { impl_devices(m); }
TORCH_LIBRARY_IMPL(dnngraph, CUDA, m) { impl_devices(m); }
TORCH_LIBRARY_IMPL(dnngraph, Meta, m) {
  m.impl("conv2d_bias_act", &conv2d_bias_act_meta);
  m.impl("conv2d_bias_act_backward", &conv2d_bias_act_backward_meta);
}
TORCH_LIBRARY_IMPL(dnngraph, Autograd, m) { m.impl("conv2d_bias_act", &conv2d_bias_act_autograd); }

}  // namespace dnngraph::torch_ops
