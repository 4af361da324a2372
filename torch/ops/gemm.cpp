// dnngraph::linear_act and matmul_epilogue (+ backward): one graph
//   Y = act(alpha * (A @ B) + bias)  [and AMAX = max|Y|]
// over 3-D A [Ba, M, K], B [Bb, K, N] (batch dims 1 broadcast). linear_act is the same graph
// with A = x as [1, M, K] and B = W^T as a strided view [1, K, N]. The backward recomputes the
// pre-activation with the same graph (act none), applies the activation's derivative with
// ATen, and runs both matmuls (dA = alpha dZ B^T, dB = alpha A^T dZ) as dnngraph graphs.
#include "core/op_support.hpp"
#include "core/shape_rules.hpp"

namespace dnngraph::torch_ops {
namespace {

enum Uid : int64_t { A = 1, B = 2, BIAS = 3, Y = 100, AMAX = 101 };

// A matmul operand the engines take: strides >= 1, one of the last two dims has stride 1.
Tensor matmul_operand(const Tensor& t_in) {
  const Tensor t = rules::engine_operand(t_in);
  if (t.stride(-1) == 1 || t.stride(-2) == 1) return t;
  return t.contiguous();
}

// bias as 3-D, broadcastable to [batch, M, N].
Tensor bias3(const char* op, const Tensor& bias, int64_t batch, int64_t m, int64_t n) {
  TORCH_CHECK_VALUE(bias.dim() <= 3, "dnngraph::", op, ": 'bias' has ", bias.dim(),
                    " dims; expected at most 3, broadcastable to [", batch, ", ", m, ", ", n, "]");
  std::vector<int64_t> shape(3 - bias.dim(), 1);
  shape.insert(shape.end(), bias.sizes().begin(), bias.sizes().end());
  const int64_t want[3] = {batch, m, n};
  for (int i = 0; i < 3; ++i)
    TORCH_CHECK_VALUE(shape[i] == 1 || shape[i] == want[i], "dnngraph::", op, ": 'bias' of shape ",
                      bias.sizes(), " does not broadcast to [", batch, ", ", m, ", ", n, "]");
  return rules::engine_operand(bias.reshape(shape));
}

// The fused graph on 3-D operands; y is [max(Ba, Bb), M, N] contiguous.
std::pair<Tensor, Tensor> epilogue(const char* op, const Tensor& a_in, const Tensor& b_in,
                                   const Tensor& bias, double alpha, Act act, bool want_amax) {
  const Tensor a = matmul_operand(a_in), b = matmul_operand(b_in);
  const int64_t batch = a.size(0) == 1 ? b.size(0) : a.size(0);  // 1 broadcasts, even to 0
  const at::ScalarType st = stat_dtype(a.scalar_type());
  Tensor y = at::empty({batch, a.size(1), b.size(2)}, a.options());
  Tensor amax =
      want_amax ? at::empty({}, a.options().dtype(st)) : at::empty({0}, a.options().dtype(st));
  auto aten = [&] {
    Tensor z = at::matmul(a, b);
    if (alpha != 1.0) z = z * alpha;
    if (bias.defined()) z = z + bias;
    y.copy_(aten_act(act, z));
    if (want_amax) amax.copy_(y.abs().max());
    return std::pair{y, amax};
  };
  if (y.numel() == 0 || a.size(2) == 0) return aten();
  Key key(op);
  key.add(a)
      .add(b)
      .add(bias)
      .add(alpha)
      .add(static_cast<int64_t>(act))
      .add(want_amax)
      .add_device(a.device());
  auto g = cached_graph(key, a.device(), op, [&](Graph& gr) {
    set_numerics(gr, a);
    ir::Tensor z = gr.matmul(tensor_like(gr, A, "a", a), tensor_like(gr, B, "b", b));
    if (alpha != 1.0) z = gr.scale(z, gr.scalar(ir::Scalar::of_float(alpha), "alpha"));
    if (bias.defined()) z = gr.bias(z, tensor_like(gr, BIAS, "bias", bias));
    ir::Tensor out = apply_act(gr, act, z);
    output_like(out, Y, "y", y);
    if (want_amax) {
      ir::Tensor m = gr.reduction(out, {ReductionMode::Amax});
      m->set_output(true).set_name("amax").set_uid(AMAX).set_dim({1, 1, 1}).set_stride({1, 1, 1});
      m->set_data_type(data_type_of(st, op, "amax"));
    }
  });
  if (!g->graph) {
    warn_fallback(op, g->unsupported);
    return aten();
  }
  execute(*g, a.device(), op, {{A, &a}, {B, &b}, {BIAS, &bias}, {Y, &y}, {AMAX, &amax}});
  return {y, amax};
}

// d/dA, d/dB, d/dbias of y = act(alpha * A @ B + bias) on 3-D operands.
std::tuple<Tensor, Tensor, Tensor> epilogue_backward(const char* op, const Tensor& dy,
                                                     const Tensor& a, const Tensor& b,
                                                     const Tensor& bias, double alpha, Act act,
                                                     std::array<bool, 3> mask) {
  Tensor dz = dy;
  if (act != Act::None)
    dz = aten_act_backward(act, dy, epilogue(op, a, b, bias, alpha, Act::None, false).first);
  Tensor da, db, dbias;
  if (mask[0]) {
    da = epilogue(op, dz, b.transpose(1, 2), Tensor(), alpha, Act::None, false).first;
    if (a.size(0) == 1 && da.size(0) != 1) da = da.sum(0, true);
  }
  if (mask[1]) {
    db = epilogue(op, a.transpose(1, 2), dz, Tensor(), alpha, Act::None, false).first;
    if (b.size(0) == 1 && db.size(0) != 1) db = db.sum(0, true);
  }
  if (mask[2] && bias.defined()) dbias = dz.sum_to_size(bias.sizes());
  return {da, db, dbias};
}

void check_pair(const char* op, const Tensor& a, const char* an, const Tensor& b, const char* bn,
                const OptTensor& bias) {
  check_device(op, a, an, {{&b, bn}, {has(bias) ? &*bias : nullptr, "bias"}});
  data_type_of(a, op, an);
  check_same_dtype(op, a, an, b, bn);
  if (has(bias)) check_same_dtype(op, a, an, *bias, "bias");
}

// ---------------------------------------------------------------- linear_act

struct LinearView {
  Tensor a, b, bias;
  std::vector<int64_t> out_shape;
};

LinearView linear_view(const char* op, const Tensor& x, const Tensor& w, const OptTensor& bias) {
  check_pair(op, x, "x", w, "weight", bias);
  TORCH_CHECK_VALUE(w.dim() == 2, "dnngraph::", op, ": 'weight' must be [out_features, ",
                    "in_features], got shape ", w.sizes());
  TORCH_CHECK_VALUE(x.dim() >= 1 && x.size(-1) == w.size(1), "dnngraph::", op, ": 'x' of shape ",
                    x.sizes(), " does not end with in_features ", w.size(1), " of 'weight' ",
                    w.sizes());
  const int64_t k = w.size(1), n = w.size(0);
  LinearView v;
  // Rows counted from the leading dims (not -1: ambiguous when in_features is 0).
  v.a = x.reshape({1, c10::multiply_integers(x.sizes().begin(), x.sizes().end() - 1), k});
  v.b = w.t().unsqueeze(0);
  if (has(bias)) {
    TORCH_CHECK_VALUE(bias->dim() == 1 && bias->size(0) == n, "dnngraph::", op,
                      ": 'bias' must be [out_features] = [", n, "], got ", bias->sizes());
    v.bias = rules::engine_operand(bias->reshape({1, 1, n}));
  }
  v.out_shape.assign(x.sizes().begin(), x.sizes().end() - 1);
  v.out_shape.push_back(n);
  return v;
}

Tensor linear_act(const Tensor& x, const Tensor& w, const OptTensor& bias, c10::string_view act) {
  const char* op = "linear_act";
  rules::linear(op, x, w, bias);
  const LinearView v = linear_view(op, x, w, bias);
  return epilogue(op, v.a, v.b, v.bias, 1.0, parse_act(op, act), false).first.view(v.out_shape);
}

std::tuple<Tensor, Tensor, Tensor> linear_act_backward(const Tensor& dy, const Tensor& x,
                                                       const Tensor& w, const OptTensor& bias,
                                                       c10::string_view act,
                                                       std::array<bool, 3> mask) {
  const char* op = "linear_act_backward";
  rules::check_grad(op, dy, "dy", rules::linear(op, x, w, bias));
  const LinearView v = linear_view(op, x, w, bias);
  check_pair(op, x, "x", dy, "dy", std::nullopt);
  TORCH_CHECK_VALUE(dy.sizes() == at::IntArrayRef(v.out_shape), "dnngraph::", op,
                    ": 'dy' has shape ", dy.sizes(), "; expected ", at::IntArrayRef(v.out_shape));
  auto [da, db, dbias] = epilogue_backward(op, dy.reshape({1, -1, w.size(0)}), v.a, v.b, v.bias,
                                           1.0, parse_act(op, act), mask);
  return {mask[0] ? da.view(x.sizes()) : Tensor(),
          mask[1] ? db.squeeze(0).t().contiguous() : Tensor(),
          mask[2] && dbias.defined() ? dbias.view({w.size(0)}) : Tensor()};
}

// ---------------------------------------------------------------- matmul_epilogue

struct EpilogueView {
  Tensor a, b, bias;
  bool two_d = false;
};

EpilogueView epilogue_view(const char* op, const Tensor& a, const Tensor& b,
                           const OptTensor& bias) {
  check_pair(op, a, "a", b, "b", bias);
  TORCH_CHECK_VALUE((a.dim() == 2 || a.dim() == 3) && a.dim() == b.dim(), "dnngraph::", op,
                    ": 'a' and 'b' must both be [M,K]/[K,N] or [B,M,K]/[B|1,K,N]; got ", a.sizes(),
                    " and ", b.sizes());
  EpilogueView v;
  v.two_d = a.dim() == 2;
  v.a = v.two_d ? a.unsqueeze(0) : a;
  v.b = v.two_d ? b.unsqueeze(0) : b;
  TORCH_CHECK_VALUE(v.a.size(2) == v.b.size(1), "dnngraph::", op, ": 'a' ", a.sizes(), " and 'b' ",
                    b.sizes(), " disagree on K");
  TORCH_CHECK_VALUE(v.a.size(0) == v.b.size(0) || v.a.size(0) == 1 || v.b.size(0) == 1,
                    "dnngraph::", op, ": batch dims of 'a' ", a.sizes(), " and 'b' ", b.sizes(),
                    " do not broadcast");
  const int64_t batch = std::max(v.a.size(0), v.b.size(0));
  if (has(bias)) v.bias = bias3(op, *bias, batch, v.a.size(1), v.b.size(2));
  return v;
}

std::tuple<Tensor, Tensor> matmul_epilogue(const Tensor& a, const Tensor& b, const OptTensor& bias,
                                           double alpha, c10::string_view act, bool want_amax) {
  const char* op = "matmul_epilogue";
  rules::matmul_epilogue(op, a, b, bias);
  const EpilogueView v = epilogue_view(op, a, b, bias);
  auto [y, amax] = epilogue(op, v.a, v.b, v.bias, alpha, parse_act(op, act), want_amax);
  return {v.two_d ? y.squeeze(0) : y, amax};
}

std::tuple<Tensor, Tensor, Tensor> matmul_epilogue_backward(const Tensor& dy, const Tensor& a,
                                                            const Tensor& b, const OptTensor& bias,
                                                            double alpha, c10::string_view act,
                                                            std::array<bool, 3> mask) {
  const char* op = "matmul_epilogue_backward";
  rules::check_grad(op, dy, "dy", rules::matmul_epilogue(op, a, b, bias));
  const EpilogueView v = epilogue_view(op, a, b, bias);
  check_pair(op, a, "a", dy, "dy", std::nullopt);
  const Tensor dy3 = v.two_d ? dy.unsqueeze(0) : dy;
  TORCH_CHECK_VALUE(dy3.dim() == 3 && dy3.size(1) == v.a.size(1) && dy3.size(2) == v.b.size(2),
                    "dnngraph::", op, ": 'dy' has shape ", dy.sizes(), ", not the output's");
  auto [da, db, dbias] =
      epilogue_backward(op, dy3, v.a, v.b, v.bias, alpha, parse_act(op, act), mask);
  if (v.two_d) {
    if (da.defined()) da = da.squeeze(0);
    if (db.defined()) db = db.squeeze(0);
  }
  if (dbias.defined()) dbias = dbias.view(bias->sizes());
  return {da, db, dbias};
}

// ---------------------------------------------------------------- Meta

Tensor linear_act_meta(const Tensor& x, const Tensor& w, const OptTensor& bias, c10::string_view) {
  return at::empty_symint(rules::linear("linear_act", x, w, bias), x.options());
}
std::tuple<Tensor, Tensor, Tensor> linear_act_backward_meta(const Tensor& dy, const Tensor& x,
                                                            const Tensor& w, const OptTensor& bias,
                                                            c10::string_view,
                                                            std::array<bool, 3> mask) {
  rules::check_grad("linear_act_backward", dy, "dy",
                    rules::linear("linear_act_backward", x, w, bias));
  rules::check_same_device("linear_act_backward", x, "x", {{&dy, "dy"}});
  return {mask[0] ? at::empty_symint(x.sym_sizes(), x.options()) : Tensor(),
          mask[1] ? at::empty_symint(w.sym_sizes(), w.options()) : Tensor(),
          mask[2] && has(bias) ? at::empty_symint(bias->sym_sizes(), bias->options()) : Tensor()};
}
std::tuple<Tensor, Tensor> matmul_epilogue_meta(const Tensor& a, const Tensor& b,
                                                const OptTensor& bias, double, c10::string_view,
                                                bool want_amax) {
  const rules::SymShape shape = rules::matmul_epilogue("matmul_epilogue", a, b, bias);
  auto st = a.options().dtype(stat_dtype(a.scalar_type()));
  Tensor amax = want_amax ? at::empty({}, st) : at::empty({0}, st);
  return {at::empty_symint(shape, a.options()), amax};
}
std::tuple<Tensor, Tensor, Tensor> matmul_epilogue_backward_meta(const Tensor& dy, const Tensor& a,
                                                                 const Tensor& b,
                                                                 const OptTensor& bias, double,
                                                                 c10::string_view,
                                                                 std::array<bool, 3> mask) {
  rules::check_grad("matmul_epilogue_backward", dy, "dy",
                    rules::matmul_epilogue("matmul_epilogue_backward", a, b, bias));
  rules::check_same_device("matmul_epilogue_backward", a, "a", {{&dy, "dy"}});
  return {mask[0] ? at::empty_symint(a.sym_sizes(), a.options()) : Tensor(),
          mask[1] ? at::empty_symint(b.sym_sizes(), b.options()) : Tensor(),
          mask[2] && has(bias) ? at::empty_symint(bias->sym_sizes(), bias->options()) : Tensor()};
}

// ---------------------------------------------------------------- autograd

using LinSig = Tensor(const Tensor&, const Tensor&, const OptTensor&, c10::string_view);
using LinBwdSig = std::tuple<Tensor, Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&,
                                                     const OptTensor&, c10::string_view,
                                                     std::array<bool, 3>);
using EpiSig = std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const OptTensor&, double,
                                          c10::string_view, bool);
using EpiBwdSig = std::tuple<Tensor, Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&,
                                                     const OptTensor&, double, c10::string_view,
                                                     std::array<bool, 3>);

class LinearActFn : public torch::autograd::Function<LinearActFn> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& x, const Tensor& w,
                               const OptTensor& bias, c10::string_view act) {
    static auto op = op_handle<LinSig>("dnngraph::linear_act");
    at::AutoDispatchBelowADInplaceOrView guard;
    Tensor y = op.call(x, w, bias, act);
    ctx->save_for_backward({x, w, value_or_undefined(bias)});
    ctx->saved_data["act"] = std::string(act);
    return {y};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static auto op = op_handle<LinBwdSig>("dnngraph::linear_act_backward");
    auto s = ctx->get_saved_variables();
    if (!grads[0].defined()) return {Tensor(), Tensor(), Tensor(), Tensor()};
    std::array<bool, 3> mask{ctx->needs_input_grad(0), ctx->needs_input_grad(1),
                             s[2].defined() && ctx->needs_input_grad(2)};
    const std::string act = ctx->saved_data["act"].toStringRef();
    auto [dx, dw, db] = op.call(grads[0], s[0], s[1], opt(s[2]), act, mask);
    return {dx, dw, db, Tensor()};
  }
};

class MatmulEpilogueFn : public torch::autograd::Function<MatmulEpilogueFn> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& a, const Tensor& b,
                               const OptTensor& bias, double alpha, c10::string_view act,
                               bool want_amax) {
    static auto op = op_handle<EpiSig>("dnngraph::matmul_epilogue");
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [y, amax] = op.call(a, b, bias, alpha, act, want_amax);
    ctx->save_for_backward({a, b, value_or_undefined(bias)});
    ctx->saved_data["act"] = std::string(act);
    ctx->saved_data["alpha"] = alpha;
    ctx->mark_non_differentiable({amax});
    return {y, amax};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static auto op = op_handle<EpiBwdSig>("dnngraph::matmul_epilogue_backward");
    auto s = ctx->get_saved_variables();
    if (!grads[0].defined()) return {Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
    std::array<bool, 3> mask{ctx->needs_input_grad(0), ctx->needs_input_grad(1),
                             s[2].defined() && ctx->needs_input_grad(2)};
    const std::string act = ctx->saved_data["act"].toStringRef();
    auto [da, db, dbias] =
        op.call(grads[0], s[0], s[1], opt(s[2]), ctx->saved_data["alpha"].toDouble(), act, mask);
    return {da, db, dbias, Tensor(), Tensor(), Tensor()};
  }
};

Tensor linear_act_autograd(const Tensor& x, const Tensor& w, const OptTensor& bias,
                           c10::string_view act) {
  if (!wants_grad(x, w, bias)) {
    static auto op = op_handle<LinSig>("dnngraph::linear_act");
    at::AutoDispatchBelowADInplaceOrView guard;
    return op.call(x, w, bias, act);
  }
  return LinearActFn::apply(x, w, bias, act)[0];
}
std::tuple<Tensor, Tensor> matmul_epilogue_autograd(const Tensor& a, const Tensor& b,
                                                    const OptTensor& bias, double alpha,
                                                    c10::string_view act, bool want_amax) {
  if (!wants_grad(a, b, bias)) {
    static auto op = op_handle<EpiSig>("dnngraph::matmul_epilogue");
    at::AutoDispatchBelowADInplaceOrView guard;
    return op.call(a, b, bias, alpha, act, want_amax);
  }
  auto r = MatmulEpilogueFn::apply(a, b, bias, alpha, act, want_amax);
  return {r[0], r[1]};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(dnngraph, m) {
  m.def("linear_act(Tensor x, Tensor w, Tensor? bias=None, str act=\"none\") -> Tensor");
  m.def(
      "linear_act_backward(Tensor dy, Tensor x, Tensor w, Tensor? bias, str act, "
      "bool[3] output_mask) -> (Tensor, Tensor, Tensor)");
  m.def(
      "matmul_epilogue(Tensor a, Tensor b, Tensor? bias=None, float alpha=1.0, "
      "str act=\"none\", bool want_amax=False) -> (Tensor, Tensor)");
  m.def(
      "matmul_epilogue_backward(Tensor dy, Tensor a, Tensor b, Tensor? bias, float alpha, "
      "str act, bool[3] output_mask) -> (Tensor, Tensor, Tensor)");
}

// The same kernels serve CPU (reference engine) and CUDA (cuDNN): the handle follows the
// tensors' device.
namespace {
void impl_devices(torch::Library& m) {
  m.impl("linear_act", &linear_act);
  m.impl("linear_act_backward", &linear_act_backward);
  m.impl("matmul_epilogue", &matmul_epilogue);
  m.impl("matmul_epilogue_backward", &matmul_epilogue_backward);
}
}  // namespace
TORCH_LIBRARY_IMPL(dnngraph, CPU, m) { impl_devices(m); }
TORCH_LIBRARY_IMPL(dnngraph, CUDA, m) { impl_devices(m); }
TORCH_LIBRARY_IMPL(dnngraph, Meta, m) {
  m.impl("linear_act", &linear_act_meta);
  m.impl("linear_act_backward", &linear_act_backward_meta);
  m.impl("matmul_epilogue", &matmul_epilogue_meta);
  m.impl("matmul_epilogue_backward", &matmul_epilogue_backward_meta);
}
TORCH_LIBRARY_IMPL(dnngraph, Autograd, m) {
  m.impl("linear_act", &linear_act_autograd);
  m.impl("matmul_epilogue", &matmul_epilogue_autograd);
}

}  // namespace dnngraph::torch_ops
