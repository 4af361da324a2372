// dnngraph::linear_act and matmul_epilogue (+ backward): one graph
//   Y = act(alpha * (A @ B) + bias)  [and AMAX = max|Y|]
// over 3-D A [Ba, M, K], B [Bb, K, N] (batch dims 1 broadcast). linear_act is the same graph
// with A = x as [1, M, K] and B = W^T as a strided view [1, K, N].
// Training: when autograd will need it, the forward graph also emits the pre-activation Z (for
// relu the output Y is enough), which the backward takes back: it never runs the forward again.
// The graphs themselves: gemm_graphs.cpp.
#include "ops/gemm.hpp"
#include "core/shape_rules.hpp"

namespace dnngraph::torch_ops {
namespace {

using gemm::BackwardProblem;
using gemm::Epilogue;
using gemm::epilogue;
using gemm::epilogue_backward;

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
  return epilogue(op, v.a, v.b, v.bias, 1.0, parse_act(op, act), false).y.view(v.out_shape);
}

// The forward for training: (y, z) with z the pre-activation where the backward needs it (an
// output of the same graph), else an empty tensor.
std::tuple<Tensor, Tensor> linear_act_train(const Tensor& x, const Tensor& w, const OptTensor& bias,
                                            c10::string_view act_name) {
  const char* op = "linear_act";
  rules::linear(op, x, w, bias);
  const LinearView v = linear_view(op, x, w, bias);
  const Act act = parse_act(op, act_name);
  const bool want_z = saves_preactivation(act);
  Epilogue r = epilogue(op, v.a, v.b, v.bias, 1.0, act, false, want_z);
  return {r.y.view(v.out_shape), want_z ? r.z.view(v.out_shape) : at::empty({0}, x.options())};
}

// The tensor the backward reads act' from: Z, or Y for relu; undefined when none was given.
Tensor saved_for(Act act, const OptTensor& saved, at::IntArrayRef shape3) {
  if (act == Act::None || !has(saved) || saved->numel() == 0) return Tensor();
  return rules::engine_operand(saved->reshape(shape3));
}

std::tuple<Tensor, Tensor, Tensor> linear_act_train_backward(const Tensor& dy, const Tensor& x,
                                                             const Tensor& w, const OptTensor& bias,
                                                             c10::string_view act_name,
                                                             const OptTensor& saved,
                                                             std::array<bool, 3> mask) {
  const char* op = "linear_act_backward";
  rules::check_grad(op, dy, "dy", rules::linear(op, x, w, bias));
  const LinearView v = linear_view(op, x, w, bias);
  check_pair(op, x, "x", dy, "dy", std::nullopt);
  TORCH_CHECK_VALUE(dy.sizes() == at::IntArrayRef(v.out_shape), "dnngraph::", op,
                    ": 'dy' has shape ", dy.sizes(), "; expected ", at::IntArrayRef(v.out_shape));
  const Act act = parse_act(op, act_name);
  rules::check_saved(op, saved, x, "x",
                     rules::SymShape(dy.sym_sizes().begin(), dy.sym_sizes().end()));
  const int64_t n = w.size(0);
  BackwardProblem p;
  p.dy = rules::engine_operand(dy.reshape({1, -1, n}));
  p.saved = saved_for(act, saved, p.dy.sizes());
  p.a = v.a, p.b = v.b, p.bias = v.bias, p.act = act;
  Tensor dx = mask[0] ? at::empty(x.sizes(), x.options()) : Tensor();
  Tensor dw = mask[1] ? at::empty(w.sizes(), w.options()) : Tensor();
  Tensor db = mask[2] && has(bias) ? at::empty({n}, bias->options()) : Tensor();
  epilogue_backward(op, p, dx.defined() ? dx.view(v.a.sizes()) : Tensor(),
                    dw.defined() ? dw.t().unsqueeze(0) : Tensor(),
                    db.defined() ? db.view({1, 1, n}) : Tensor());
  return {dx, dw, db};
}
// Without the saved tensor: the pre-activation is recomputed by the forward graph first.
std::tuple<Tensor, Tensor, Tensor> linear_act_backward(const Tensor& dy, const Tensor& x,
                                                       const Tensor& w, const OptTensor& bias,
                                                       c10::string_view act,
                                                       std::array<bool, 3> mask) {
  return linear_act_train_backward(dy, x, w, bias, act, std::nullopt, mask);
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
  const int64_t batch = v.a.size(0) == 1 ? v.b.size(0) : v.a.size(0);  // 1 broadcasts, even to 0
  if (has(bias)) v.bias = bias3(op, *bias, batch, v.a.size(1), v.b.size(2));
  return v;
}

std::tuple<Tensor, Tensor> matmul_epilogue(const Tensor& a, const Tensor& b, const OptTensor& bias,
                                           double alpha, c10::string_view act, bool want_amax) {
  const char* op = "matmul_epilogue";
  rules::matmul_epilogue(op, a, b, bias);
  const EpilogueView v = epilogue_view(op, a, b, bias);
  Epilogue r = epilogue(op, v.a, v.b, v.bias, alpha, parse_act(op, act), want_amax);
  return {v.two_d ? r.y.squeeze(0) : r.y, r.amax};
}

// The forward for training: (y, amax, z), z as in linear_act_train.
std::tuple<Tensor, Tensor, Tensor> matmul_epilogue_train(const Tensor& a, const Tensor& b,
                                                         const OptTensor& bias, double alpha,
                                                         c10::string_view act_name,
                                                         bool want_amax) {
  const char* op = "matmul_epilogue";
  rules::matmul_epilogue(op, a, b, bias);
  const EpilogueView v = epilogue_view(op, a, b, bias);
  const Act act = parse_act(op, act_name);
  const bool want_z = saves_preactivation(act);
  Epilogue r = epilogue(op, v.a, v.b, v.bias, alpha, act, want_amax, want_z);
  Tensor z = want_z ? (v.two_d ? r.z.squeeze(0) : r.z) : at::empty({0}, a.options());
  return {v.two_d ? r.y.squeeze(0) : r.y, r.amax, z};
}

std::tuple<Tensor, Tensor, Tensor> matmul_epilogue_train_backward(
    const Tensor& dy, const Tensor& a, const Tensor& b, const OptTensor& bias, double alpha,
    c10::string_view act_name, const OptTensor& saved, std::array<bool, 3> mask) {
  const char* op = "matmul_epilogue_backward";
  rules::check_grad(op, dy, "dy", rules::matmul_epilogue(op, a, b, bias));
  const EpilogueView v = epilogue_view(op, a, b, bias);
  check_pair(op, a, "a", dy, "dy", std::nullopt);
  const Tensor dy3 = v.two_d ? dy.unsqueeze(0) : dy;  // its shape checked by rules::check_grad
  rules::check_saved(op, saved, a, "a",
                     rules::SymShape(dy.sym_sizes().begin(), dy.sym_sizes().end()));
  const Act act = parse_act(op, act_name);
  BackwardProblem p;
  p.dy = rules::engine_operand(dy3);
  p.saved = saved_for(act, saved, dy3.sizes());
  p.a = v.a, p.b = v.b, p.bias = v.bias, p.alpha = alpha, p.act = act;
  Tensor da = mask[0] ? at::empty(v.a.sizes(), a.options()) : Tensor();
  Tensor db = mask[1] ? at::empty(v.b.sizes(), b.options()) : Tensor();
  Tensor dbias = mask[2] && has(bias) ? at::empty(v.bias.sizes(), bias->options()) : Tensor();
  epilogue_backward(op, p, da, db, dbias);
  if (v.two_d) {
    if (da.defined()) da = da.squeeze(0);
    if (db.defined()) db = db.squeeze(0);
  }
  if (dbias.defined()) dbias = dbias.view(bias->sizes());
  return {da, db, dbias};
}
std::tuple<Tensor, Tensor, Tensor> matmul_epilogue_backward(const Tensor& dy, const Tensor& a,
                                                            const Tensor& b, const OptTensor& bias,
                                                            double alpha, c10::string_view act,
                                                            std::array<bool, 3> mask) {
  return matmul_epilogue_train_backward(dy, a, b, bias, alpha, act, std::nullopt, mask);
}

// ---------------------------------------------------------------- Meta

Tensor linear_act_meta(const Tensor& x, const Tensor& w, const OptTensor& bias,
                       c10::string_view act) {
  parse_act("linear_act", act);
  return at::empty_symint(rules::linear("linear_act", x, w, bias), x.options());
}
std::tuple<Tensor, Tensor> linear_act_train_meta(const Tensor& x, const Tensor& w,
                                                 const OptTensor& bias, c10::string_view act) {
  const rules::SymShape shape = rules::linear("linear_act", x, w, bias);
  Tensor z = saves_preactivation(parse_act("linear_act", act))
                 ? at::empty_symint(shape, x.options())
                 : at::empty({0}, x.options());
  return {at::empty_symint(shape, x.options()), z};
}
std::tuple<Tensor, Tensor, Tensor> linear_act_backward_meta(const Tensor& dy, const Tensor& x,
                                                            const Tensor& w, const OptTensor& bias,
                                                            c10::string_view act,
                                                            std::array<bool, 3> mask) {
  parse_act("linear_act_backward", act);
  rules::check_grad("linear_act_backward", dy, "dy",
                    rules::linear("linear_act_backward", x, w, bias));
  rules::check_same_device("linear_act_backward", x, "x", {{&dy, "dy"}});
  return {mask[0] ? at::empty_symint(x.sym_sizes(), x.options()) : Tensor(),
          mask[1] ? at::empty_symint(w.sym_sizes(), w.options()) : Tensor(),
          mask[2] && has(bias) ? at::empty_symint(bias->sym_sizes(), bias->options()) : Tensor()};
}
Tensor amax_meta(const Tensor& a, bool want_amax) {
  auto st = a.options().dtype(stat_dtype(a.scalar_type()));
  return want_amax ? at::empty({}, st) : at::empty({0}, st);
}
std::tuple<Tensor, Tensor> matmul_epilogue_meta(const Tensor& a, const Tensor& b,
                                                const OptTensor& bias, double, c10::string_view act,
                                                bool want_amax) {
  parse_act("matmul_epilogue", act);
  return {at::empty_symint(rules::matmul_epilogue("matmul_epilogue", a, b, bias), a.options()),
          amax_meta(a, want_amax)};
}
std::tuple<Tensor, Tensor, Tensor> matmul_epilogue_train_meta(const Tensor& a, const Tensor& b,
                                                              const OptTensor& bias, double,
                                                              c10::string_view act,
                                                              bool want_amax) {
  const rules::SymShape shape = rules::matmul_epilogue("matmul_epilogue", a, b, bias);
  Tensor z = saves_preactivation(parse_act("matmul_epilogue", act))
                 ? at::empty_symint(shape, a.options())
                 : at::empty({0}, a.options());
  return {at::empty_symint(shape, a.options()), amax_meta(a, want_amax), z};
}
std::tuple<Tensor, Tensor, Tensor> matmul_epilogue_backward_meta(const Tensor& dy, const Tensor& a,
                                                                 const Tensor& b,
                                                                 const OptTensor& bias, double,
                                                                 c10::string_view act,
                                                                 std::array<bool, 3> mask) {
  parse_act("matmul_epilogue_backward", act);
  rules::check_grad("matmul_epilogue_backward", dy, "dy",
                    rules::matmul_epilogue("matmul_epilogue_backward", a, b, bias));
  rules::check_same_device("matmul_epilogue_backward", a, "a", {{&dy, "dy"}});
  return {mask[0] ? at::empty_symint(a.sym_sizes(), a.options()) : Tensor(),
          mask[1] ? at::empty_symint(b.sym_sizes(), b.options()) : Tensor(),
          mask[2] && has(bias) ? at::empty_symint(bias->sym_sizes(), bias->options()) : Tensor()};
}
std::tuple<Tensor, Tensor, Tensor> linear_act_train_backward_meta(
    const Tensor& dy, const Tensor& x, const Tensor& w, const OptTensor& bias, c10::string_view act,
    const OptTensor& saved, std::array<bool, 3> mask) {
  auto r = linear_act_backward_meta(dy, x, w, bias, act, mask);
  rules::check_saved("linear_act_backward", saved, x, "x",
                     rules::SymShape(dy.sym_sizes().begin(), dy.sym_sizes().end()));
  return r;
}
std::tuple<Tensor, Tensor, Tensor> matmul_epilogue_train_backward_meta(
    const Tensor& dy, const Tensor& a, const Tensor& b, const OptTensor& bias, double alpha,
    c10::string_view act, const OptTensor& saved, std::array<bool, 3> mask) {
  auto r = matmul_epilogue_backward_meta(dy, a, b, bias, alpha, act, mask);
  rules::check_saved("matmul_epilogue_backward", saved, a, "a",
                     rules::SymShape(dy.sym_sizes().begin(), dy.sym_sizes().end()));
  return r;
}

// ---------------------------------------------------------------- autograd

using LinSig = Tensor(const Tensor&, const Tensor&, const OptTensor&, c10::string_view);
using LinTrainSig = std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const OptTensor&,
                                               c10::string_view);
using LinBwdSig = std::tuple<Tensor, Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&,
                                                     const OptTensor&, c10::string_view,
                                                     const OptTensor&, std::array<bool, 3>);
using EpiSig = std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const OptTensor&, double,
                                          c10::string_view, bool);
using EpiTrainSig = std::tuple<Tensor, Tensor, Tensor>(const Tensor&, const Tensor&,
                                                       const OptTensor&, double, c10::string_view,
                                                       bool);
using EpiBwdSig = std::tuple<Tensor, Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&,
                                                     const OptTensor&, double, c10::string_view,
                                                     const OptTensor&, std::array<bool, 3>);

// What the backward of act reads: the output y for relu, else z (undefined for none).
Tensor to_save(Act act, const Tensor& y, const Tensor& z) {
  if (act == Act::Relu) return y;
  return saves_preactivation(act) ? z : Tensor();
}

class LinearActFn : public torch::autograd::Function<LinearActFn> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& x, const Tensor& w,
                               const OptTensor& bias, c10::string_view act) {
    static auto op = op_handle<LinTrainSig>("dnngraph::linear_act_train");
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [y, z] = op.call(x, w, bias, act);
    ctx->save_for_backward(
        {x, w, value_or_undefined(bias), to_save(parse_act("linear_act", act), y, z)});
    ctx->saved_data["act"] = std::string(act);
    return {y};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static auto op = op_handle<LinBwdSig>("dnngraph::linear_act_train_backward");
    auto s = ctx->get_saved_variables();
    if (!grads[0].defined()) return {Tensor(), Tensor(), Tensor(), Tensor()};
    std::array<bool, 3> mask{ctx->needs_input_grad(0), ctx->needs_input_grad(1),
                             s[2].defined() && ctx->needs_input_grad(2)};
    const std::string act = ctx->saved_data["act"].toStringRef();
    auto [dx, dw, db] = op.call(grads[0], s[0], s[1], opt(s[2]), act, opt(s[3]), mask);
    return {dx, dw, db, Tensor()};
  }
};

class MatmulEpilogueFn : public torch::autograd::Function<MatmulEpilogueFn> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& a, const Tensor& b,
                               const OptTensor& bias, double alpha, c10::string_view act,
                               bool want_amax) {
    static auto op = op_handle<EpiTrainSig>("dnngraph::matmul_epilogue_train");
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [y, amax, z] = op.call(a, b, bias, alpha, act, want_amax);
    ctx->save_for_backward(
        {a, b, value_or_undefined(bias), to_save(parse_act("matmul_epilogue", act), y, z)});
    ctx->saved_data["act"] = std::string(act);
    ctx->saved_data["alpha"] = alpha;
    ctx->mark_non_differentiable({amax});
    // No zeros made for the gradients of unused outputs: backward takes undefined ones.
    ctx->set_materialize_grads(false);
    return {y, amax};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static auto op = op_handle<EpiBwdSig>("dnngraph::matmul_epilogue_train_backward");
    auto s = ctx->get_saved_variables();
    if (!grads[0].defined()) return {Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
    std::array<bool, 3> mask{ctx->needs_input_grad(0), ctx->needs_input_grad(1),
                             s[2].defined() && ctx->needs_input_grad(2)};
    const std::string act = ctx->saved_data["act"].toStringRef();
    auto [da, db, dbias] = op.call(grads[0], s[0], s[1], opt(s[2]),
                                   ctx->saved_data["alpha"].toDouble(), act, opt(s[3]), mask);
    return {da, db, dbias, Tensor(), Tensor(), Tensor()};
  }
};

Tensor linear_act_autograd(const Tensor& x, const Tensor& w, const OptTensor& bias,
                           c10::string_view act) {
  rules::refuse_forward_ad("linear_act",
                           {{&x, "x"}, {&w, "weight"}, {has(bias) ? &*bias : nullptr, "bias"}});
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
  rules::refuse_forward_ad("matmul_epilogue",
                           {{&a, "a"}, {&b, "b"}, {has(bias) ? &*bias : nullptr, "bias"}});
  if (!wants_grad(a, b, bias)) {
    static auto op = op_handle<EpiSig>("dnngraph::matmul_epilogue");
    at::AutoDispatchBelowADInplaceOrView guard;
    return op.call(a, b, bias, alpha, act, want_amax);
  }
  auto r = MatmulEpilogueFn::apply(a, b, bias, alpha, act, want_amax);
  return {r[0], r[1]};
}

void set_unfused_backward_op(bool v) { set_unfused_backward(v); }

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
  // The training pair the autograd kernels call: the forward also returns what the backward
  // reads (the pre-activation; an empty tensor when the output suffices), the backward takes
  // it as `saved` (Z, or Y for relu) instead of recomputing it.
  m.def("linear_act_train(Tensor x, Tensor w, Tensor? bias, str act) -> (Tensor, Tensor)");
  m.def(
      "linear_act_train_backward(Tensor dy, Tensor x, Tensor w, Tensor? bias, str act, "
      "Tensor? saved, bool[3] output_mask) -> (Tensor, Tensor, Tensor)");
  m.def(
      "matmul_epilogue_train(Tensor a, Tensor b, Tensor? bias, float alpha, str act, "
      "bool want_amax) -> (Tensor, Tensor, Tensor)");
  m.def(
      "matmul_epilogue_train_backward(Tensor dy, Tensor a, Tensor b, Tensor? bias, float alpha, "
      "str act, Tensor? saved, bool[3] output_mask) -> (Tensor, Tensor, Tensor)");
  // Backward graphs: fused (default) or unfused (dZ materialized); for tests and comparisons.
  m.def("_set_unfused_backward(bool unfused) -> ()", &set_unfused_backward_op);
}

// The same kernels serve CPU (reference engine) and CUDA (cuDNN): the handle follows the
// tensors' device.
namespace {
void impl_devices(torch::Library& m) {
  m.impl("linear_act", &linear_act);
  m.impl("linear_act_train", &linear_act_train);
  m.impl("linear_act_backward", &linear_act_backward);
  m.impl("linear_act_train_backward", &linear_act_train_backward);
  m.impl("matmul_epilogue", &matmul_epilogue);
  m.impl("matmul_epilogue_train", &matmul_epilogue_train);
  m.impl("matmul_epilogue_backward", &matmul_epilogue_backward);
  m.impl("matmul_epilogue_train_backward", &matmul_epilogue_train_backward);
}
}  // namespace
TORCH_LIBRARY_IMPL(dnngraph, CPU, m) { impl_devices(m); }
TORCH_LIBRARY_IMPL(dnngraph, CUDA, m) { impl_devices(m); }
TORCH_LIBRARY_IMPL(dnngraph, Meta, m) {
  m.impl("linear_act", rules::meta_kernel(&linear_act_meta));
  m.impl("linear_act_train", rules::meta_kernel(&linear_act_train_meta));
  m.impl("linear_act_backward", rules::meta_kernel(&linear_act_backward_meta));
  m.impl("linear_act_train_backward", rules::meta_kernel(&linear_act_train_backward_meta));
  m.impl("matmul_epilogue", rules::meta_kernel(&matmul_epilogue_meta));
  m.impl("matmul_epilogue_train", rules::meta_kernel(&matmul_epilogue_train_meta));
  m.impl("matmul_epilogue_backward", rules::meta_kernel(&matmul_epilogue_backward_meta));
  m.impl("matmul_epilogue_train_backward",
         rules::meta_kernel(&matmul_epilogue_train_backward_meta));
}
TORCH_LIBRARY_IMPL(dnngraph, Autograd, m) {
  m.impl("linear_act", &linear_act_autograd);
  m.impl("matmul_epilogue", &matmul_epilogue_autograd);
}

}  // namespace dnngraph::torch_ops
