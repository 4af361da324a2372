// dnngraph::swiglu (the gated unit of SwiGLU MLPs) and swiglu_linear.
//   swiglu(z)                  = silu(z1) * z3 with z1 = z[..., :F], z3 = z[..., F:] (strided
//                                views of z, no copy); one pointwise graph.
//   swiglu_backward(dy, z)     = dz: dz1 = silu'(z1) * (dy * z3), dz3 = dy * silu(z1), written
//                                into the two halves of one tensor by one pointwise graph.
//   swiglu_linear(x, w, bias)  = swiglu(linear_act(x, w, bias)): silu(x W1^T + b1) * (x W3^T +
//                                b3) with the packed weight w = [W1; W3] ([2F, K]); composite,
//                                so autograd runs the two ops' backward graphs (the matmul's
//                                output z is what both backward graphs read, as eager saves).
#include "core/op_support.hpp"
#include "core/shape_rules.hpp"

namespace dnngraph::torch_ops {
namespace {

enum Uid : int64_t { Z1 = 1, Z3 = 2, DY = 3, Y = 100, DZ1 = 101, DZ3 = 102 };

int64_t half_of(const char* op, const Tensor& z) {
  rules::swiglu(op, z);
  check_device(op, z, "z", {});
  data_type_of(z, op, "z");
  return z.size(-1) / 2;
}

Tensor swiglu(const Tensor& z_in) {
  const char* op = "swiglu";
  const Tensor z = rules::engine_operand(z_in);
  const int64_t f = half_of(op, z);
  std::vector<int64_t> shape = z.sizes().vec();
  shape.back() = f;
  Tensor y = at::empty(shape, z.options());
  if (y.numel() == 0) return y;
  const Tensor z1 = z.narrow(-1, 0, f), z3 = z.narrow(-1, f, f);
  Key key(op);
  key.add(z1).add(z3).add_device(z.device());
  auto g = cached_graph(key, z.device(), op, [&](Graph& gr) {
    set_numerics(gr, z);
    ir::Tensor a = tensor_like(gr, Z1, "z1", z1), b = tensor_like(gr, Z3, "z3", z3);
    output_like(gr.mul(gr.unary(PointwiseMode::Silu, a), b), Y, "y", y);
  });
  if (!g->graph) {
    warn_fallback(op, g->unsupported);
    return y.copy_(at::silu(z1) * z3);
  }
  execute(*g, z.device(), op, {{Z1, &z1}, {Z3, &z3}, {Y, &y}});
  return y;
}

Tensor swiglu_backward(const Tensor& dy_in, const Tensor& z_in) {
  const char* op = "swiglu_backward";
  rules::swiglu_backward(op, dy_in, z_in);
  const Tensor dy = rules::engine_operand(dy_in), z = rules::engine_operand(z_in);
  const int64_t f = half_of(op, z);
  check_device(op, z, "z", {{&dy, "dy"}});
  check_same_dtype(op, z, "z", dy, "dy");
  Tensor dz = at::empty(z.sizes(), z.options());
  if (dz.numel() == 0) return dz;
  const Tensor z1 = z.narrow(-1, 0, f), z3 = z.narrow(-1, f, f);
  const Tensor d1 = dz.narrow(-1, 0, f), d3 = dz.narrow(-1, f, f);
  Key key(op);
  key.add(dy).add(z1).add(z3).add_device(z.device());
  auto g = cached_graph(key, z.device(), op, [&](Graph& gr) {
    set_numerics(gr, z);
    ir::Tensor tdy = tensor_like(gr, DY, "dy", dy);
    ir::Tensor a = tensor_like(gr, Z1, "z1", z1), b = tensor_like(gr, Z3, "z3", z3);
    output_like(gr.binary(PointwiseMode::SiluBwd, gr.mul(tdy, b), a), DZ1, "dz1", d1);
    output_like(gr.mul(tdy, gr.unary(PointwiseMode::Silu, a)), DZ3, "dz3", d3);
  });
  if (!g->graph) {
    warn_fallback(op, g->unsupported);
    d1.copy_(at::silu_backward(dy * z3, z1));
    d3.copy_(dy * at::silu(z1));
    return dz;
  }
  execute(*g, z.device(), op, {{DY, &dy}, {Z1, &z1}, {Z3, &z3}, {DZ1, &d1}, {DZ3, &d3}});
  return dz;
}

Tensor swiglu_meta(const Tensor& z) {
  return at::empty_symint(rules::swiglu("swiglu", z), z.options());
}
Tensor swiglu_backward_meta(const Tensor& dy, const Tensor& z) {
  rules::swiglu_backward("swiglu_backward", dy, z);
  return at::empty_symint(z.sym_sizes(), z.options());
}

using SwigluSig = Tensor(const Tensor&);
using SwigluBwdSig = Tensor(const Tensor&, const Tensor&);

class SwigluFn : public torch::autograd::Function<SwigluFn> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& z) {
    static auto op = op_handle<SwigluSig>("dnngraph::swiglu");
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({z});
    return {op.call(z)};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static auto op = op_handle<SwigluBwdSig>("dnngraph::swiglu_backward");
    if (!grads[0].defined()) return {Tensor()};
    return {op.call(grads[0], ctx->get_saved_variables()[0])};
  }
};

Tensor swiglu_autograd(const Tensor& z) {
  rules::refuse_forward_ad("swiglu", {{&z, "z"}});
  if (!wants_grad(z)) {
    static auto op = op_handle<SwigluSig>("dnngraph::swiglu");
    at::AutoDispatchBelowADInplaceOrView guard;
    return op.call(z);
  }
  return SwigluFn::apply(z)[0];
}

using LinSig = Tensor(const Tensor&, const Tensor&, const OptTensor&, c10::string_view);

// Composite: the linear graph then the gate graph (each op brings its autograd and Meta).
Tensor swiglu_linear(const Tensor& x, const Tensor& w, const OptTensor& bias) {
  TORCH_CHECK_VALUE(w.dim() == 2 && w.sym_size(0) % 2 == 0, "dnngraph::swiglu_linear: 'weight' ",
                    "must be the packed [2F, in_features] = [W1; W3]; got shape ", w.sym_sizes());
  static auto lin = op_handle<LinSig>("dnngraph::linear_act");
  static auto glu = op_handle<SwigluSig>("dnngraph::swiglu");
  return glu.call(lin.call(x, w, bias, "none"));
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(dnngraph, m) {
  m.def("swiglu(Tensor z) -> Tensor");
  m.def("swiglu_backward(Tensor dy, Tensor z) -> Tensor");
  m.def("swiglu_linear(Tensor x, Tensor w, Tensor? bias=None) -> Tensor");
}

// The same kernels serve CPU (reference engine) and CUDA (cuDNN).
namespace {
void impl_devices(torch::Library& m) {
  m.impl("swiglu", &swiglu);
  m.impl("swiglu_backward", &swiglu_backward);
}
}  // namespace
TORCH_LIBRARY_IMPL(dnngraph, CPU, m) { impl_devices(m); }
TORCH_LIBRARY_IMPL(dnngraph, CUDA, m) { impl_devices(m); }
TORCH_LIBRARY_IMPL(dnngraph, Meta, m) {
  m.impl("swiglu", rules::meta_kernel(&swiglu_meta));
  m.impl("swiglu_backward", rules::meta_kernel(&swiglu_backward_meta));
}
TORCH_LIBRARY_IMPL(dnngraph, Autograd, m) { m.impl("swiglu", &swiglu_autograd); }
TORCH_LIBRARY_IMPL(dnngraph, CompositeImplicitAutograd, m) {
  m.impl("swiglu_linear", &swiglu_linear);
}

}  // namespace dnngraph::torch_ops
