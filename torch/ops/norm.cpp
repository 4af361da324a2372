// dnngraph::layer_norm, rms_norm and their backward ops.
// The graph sees x as rows [M, D, 1, 1] (M = batch elements, D = normalized elements) with
// scale/bias [1, D, 1, 1] and statistics [M, 1, 1, 1]; torch sees the statistics as
// x.shape[:axis] + [1] * len(normalized_shape), in fp32 (fp64 for fp64 inputs).
#include <limits>

#include "core/op_support.hpp"
#include "core/shape_rules.hpp"

namespace dnngraph::torch_ops {
namespace {

enum Uid : int64_t {
  X = 1,
  SCALE = 2,
  BIAS = 3,
  DY = 4,
  MEAN = 5,
  RSTD = 6,
  Y = 100,
  DX,
  DSCALE,
  DBIAS,
  OUT_MEAN,
  OUT_RSTD
};

struct Rows {
  int64_t axis = 0, m = 1, d = 1;
  std::vector<int64_t> stat_shape;
};

// Checks x against normalized_shape (and weight/bias against it) and returns the row view.
Rows rows_of(const char* op, const Tensor& x, at::IntArrayRef shape, const OptTensor& w,
             const OptTensor& b) {
  const int64_t n = static_cast<int64_t>(shape.size());
  TORCH_CHECK_VALUE(n >= 1, "dnngraph::", op, ": normalized_shape is empty; give at least one dim");
  TORCH_CHECK_VALUE(x.dim() >= n && x.sizes().slice(x.dim() - n) == shape, "dnngraph::", op,
                    ": input 'x' of shape ", x.sizes(), " does not end with normalized_shape ",
                    shape);
  for (const auto& [t, name] : {std::pair{&w, "weight"}, std::pair{&b, "bias"}})
    TORCH_CHECK_VALUE(!has(*t) || (*t)->sizes() == shape, "dnngraph::", op, ": '", name,
                      "' has shape ", (*t)->sizes(), " but normalized_shape is ", shape);
  Rows r;
  r.axis = x.dim() - n;
  for (int64_t i = 0; i < x.dim(); ++i) (i < r.axis ? r.m : r.d) *= x.size(i);
  r.stat_shape.assign(x.sizes().begin(), x.sizes().begin() + r.axis);
  r.stat_shape.resize(x.dim(), 1);
  return r;
}

ir::Tensor rows_tensor(Graph& g, int64_t uid, const char* name, const Rows& r, at::ScalarType t) {
  return tensor_like(g, uid, name, {r.m, r.d, 1, 1}, {r.d, 1, r.d, r.d},
                     data_type_of(t, g.name().c_str(), name));
}
ir::Tensor params_tensor(Graph& g, int64_t uid, const char* name, const Rows& r, at::ScalarType t) {
  return tensor_like(g, uid, name, {1, r.d, 1, 1}, {r.d, 1, r.d, r.d},
                     data_type_of(t, g.name().c_str(), name));
}
void stats_output(const ir::Tensor& t, int64_t uid, const char* name, const Rows& r,
                  at::ScalarType type) {
  t->set_output(true).set_name(name).set_uid(uid).set_dim({r.m, 1, 1, 1}).set_stride({1, 1, 1, 1});
  t->set_data_type(type == at::kDouble ? DataType::Double : DataType::Float);
}
void rows_output(const ir::Tensor& t, int64_t uid, const char* name, const Rows& r,
                 at::ScalarType type) {
  t->set_output(true)
      .set_name(name)
      .set_uid(uid)
      .set_dim({r.m, r.d, 1, 1})
      .set_stride({r.d, 1, r.d, r.d});
  t->set_data_type(data_type_of(type, "output", name));
}
void params_output(const ir::Tensor& t, int64_t uid, const char* name, const Rows& r,
                   at::ScalarType type) {
  t->set_output(true)
      .set_name(name)
      .set_uid(uid)
      .set_dim({1, r.d, 1, 1})
      .set_stride({r.d, 1, r.d, r.d});
  t->set_data_type(data_type_of(type, "output", name));
}

Tensor param_or(const OptTensor& p, const Tensor& x, at::IntArrayRef shape, double fill) {
  if (has(p)) return p->contiguous();
  return at::full(shape, fill, x.options());
}

void check_inputs(const char* op, const Tensor& x, const OptTensor& w, const OptTensor& b) {
  check_device(op, x, "x", {{has(w) ? &*w : nullptr, "weight"}, {has(b) ? &*b : nullptr, "bias"}});
  data_type_of(x, op, "x");
  if (has(w)) check_same_dtype(op, x, "x", *w, "weight");
  if (has(b)) check_same_dtype(op, x, "x", *b, "bias");
}

double default_rms_eps(at::ScalarType t) {
  switch (t) {
    case at::kDouble:
      return std::numeric_limits<double>::epsilon();
    case at::kHalf:
      return 0.0009765625;  // torch.finfo(torch.float16).eps
    case at::kBFloat16:
      return 0.0078125;  // torch.finfo(torch.bfloat16).eps
    default:
      return std::numeric_limits<float>::epsilon();
  }
}

// ---------------------------------------------------------------- layer_norm

std::tuple<Tensor, Tensor, Tensor> layer_norm_aten(const Tensor& x, at::IntArrayRef shape,
                                                   const OptTensor& w, const OptTensor& b,
                                                   double eps, at::ScalarType st) {
  auto [y, mean, rstd] = at::native_layer_norm(x, shape, w, b, eps);
  return {y, mean.to(st), rstd.to(st)};
}

std::tuple<Tensor, Tensor, Tensor> layer_norm(const Tensor& x_in, at::IntArrayRef shape,
                                              const OptTensor& w, const OptTensor& b, double eps) {
  const char* op = "layer_norm";
  rules::norm(op, x_in, c10::fromIntArrayRefSlow(shape), w, b);
  check_inputs(op, x_in, w, b);
  const Rows r = rows_of(op, x_in, shape, w, b);
  const at::ScalarType st = stat_dtype(x_in.scalar_type());
  const Tensor x = x_in.contiguous();
  if (x.numel() == 0) return layer_norm_aten(x, shape, w, b, eps, st);
  const Tensor scale = param_or(w, x, shape, 1.0), bias = param_or(b, x, shape, 0.0);
  Key key(op);
  key.add(x).add(scale).add(bias).add(eps).add_device(x.device());
  auto g = cached_graph(key, x.device(), op, [&](Graph& gr) {
    set_numerics(gr, x);
    auto X_ = rows_tensor(gr, X, "x", r, x.scalar_type());
    auto S = params_tensor(gr, SCALE, "weight", r, scale.scalar_type());
    auto B = params_tensor(gr, BIAS, "bias", r, bias.scalar_type());
    auto out = gr.layernorm(X_, S, B, gr.scalar(ir::Scalar::of_float(eps), "eps"),
                            NormForwardPhase::Training);
    rows_output(out[0], Y, "y", r, x.scalar_type());
    stats_output(out[1], OUT_MEAN, "mean", r, st);
    stats_output(out[2], OUT_RSTD, "rstd", r, st);
  });
  if (!g->graph) {
    warn_fallback(op, g->unsupported);
    return layer_norm_aten(x, shape, w, b, eps, st);
  }
  Tensor y = at::empty_like(x);
  Tensor mean = at::empty(r.stat_shape, x.options().dtype(st));
  Tensor rstd = at::empty(r.stat_shape, x.options().dtype(st));
  execute(*g, x.device(), op,
          {{X, &x}, {SCALE, &scale}, {BIAS, &bias}, {Y, &y}, {OUT_MEAN, &mean}, {OUT_RSTD, &rstd}});
  return {y, mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> layer_norm_backward(const Tensor& dy_in, const Tensor& x_in,
                                                       at::IntArrayRef shape, const Tensor& mean,
                                                       const Tensor& rstd, const OptTensor& w,
                                                       const OptTensor& b,
                                                       std::array<bool, 3> mask) {
  const char* op = "layer_norm_backward";
  rules::norm(op, x_in, c10::fromIntArrayRefSlow(shape), w, b);
  check_inputs(op, x_in, w, b);
  check_device(op, x_in, "x", {{&dy_in, "dy"}, {&mean, "mean"}, {&rstd, "rstd"}});
  check_same_dtype(op, x_in, "x", dy_in, "dy");
  TORCH_CHECK_VALUE(dy_in.sizes() == x_in.sizes(), "dnngraph::", op, ": 'dy' has shape ",
                    dy_in.sizes(), " but 'x' has ", x_in.sizes());
  const Rows r = rows_of(op, x_in, shape, w, b);
  const Tensor x = x_in.contiguous(), dy = dy_in.contiguous();
  const Tensor mu = mean.contiguous(), rs = rstd.contiguous();
  TORCH_CHECK_VALUE(mu.numel() == r.m && rs.numel() == r.m, "dnngraph::", op,
                    ": 'mean' and 'rstd' need one value per row (", r.m, "), found ", mu.numel(),
                    " and ", rs.numel());
  const Tensor scale = param_or(w, x, shape, 1.0);
  auto finish = [&](Tensor dx, Tensor dw, Tensor db) -> std::tuple<Tensor, Tensor, Tensor> {
    return {mask[0] ? dx : Tensor(), mask[1] && has(w) ? dw : Tensor(),
            mask[2] && has(b) ? db : Tensor()};
  };
  auto aten = [&] {
    // ATen's CPU kernel takes the statistics in x's type, its CUDA kernel in float (ours): on
    // the CPU it then runs in the statistics' type, and the gradients are rounded once.
    const bool up = x.is_cpu() && mu.scalar_type() != x.scalar_type();
    auto in = [&](const Tensor& t) { return up ? t.to(mu.scalar_type()) : t; };
    auto [dx, dw, db] =
        at::native_layer_norm_backward(in(dy), in(x), shape, mu, rs, in(scale),
                                       in(param_or(b, x, shape, 0.0)), {true, true, true});
    if (up) dx = dx.to(x.scalar_type()), dw = dw.to(x.scalar_type()), db = db.to(x.scalar_type());
    return finish(dx, dw, db);
  };
  if (x.numel() == 0) return aten();
  Key key(op);
  key.add(dy).add(x).add(mu).add(rs).add(scale).add_device(x.device());
  auto g = cached_graph(key, x.device(), op, [&](Graph& gr) {
    set_numerics(gr, x);
    auto DY_ = rows_tensor(gr, DY, "dy", r, dy.scalar_type());
    auto X_ = rows_tensor(gr, X, "x", r, x.scalar_type());
    auto S = params_tensor(gr, SCALE, "weight", r, scale.scalar_type());
    auto M =
        tensor_like(gr, MEAN, "mean", {r.m, 1, 1, 1}, {1, 1, 1, 1}, data_type_of(mu, op, "mean"));
    auto R =
        tensor_like(gr, RSTD, "rstd", {r.m, 1, 1, 1}, {1, 1, 1, 1}, data_type_of(rs, op, "rstd"));
    auto out = gr.layernorm_backward(DY_, X_, S, M, R);
    rows_output(out[0], DX, "dx", r, x.scalar_type());
    params_output(out[1], DSCALE, "dweight", r, scale.scalar_type());
    params_output(out[2], DBIAS, "dbias", r, scale.scalar_type());
  });
  if (!g->graph) {
    warn_fallback(op, g->unsupported);
    return aten();
  }
  Tensor dx = at::empty_like(x);
  Tensor dw = at::empty(shape, scale.options()), db = at::empty(shape, scale.options());
  execute(*g, x.device(), op,
          {{DY, &dy},
           {X, &x},
           {SCALE, &scale},
           {MEAN, &mu},
           {RSTD, &rs},
           {DX, &dx},
           {DSCALE, &dw},
           {DBIAS, &db}});
  return finish(dx, dw, db);
}

// ---------------------------------------------------------------- rms_norm

std::tuple<Tensor, Tensor> rms_norm_aten(const Tensor& x, const Rows& r, const OptTensor& w,
                                         double eps, at::ScalarType st) {
  const Tensor xf = x.to(st).reshape({r.m, r.d});
  Tensor rstd = at::rsqrt(xf.pow(2).mean({1}, true) + eps);
  Tensor y = (xf * rstd).reshape(x.sizes());
  if (has(w)) y = y * w->to(st);
  return {y.to(x.scalar_type()), rstd.reshape(r.stat_shape)};
}

std::tuple<Tensor, Tensor> rms_norm(const Tensor& x_in, at::IntArrayRef shape, const OptTensor& w,
                                    std::optional<double> eps_in) {
  const char* op = "rms_norm";
  rules::norm(op, x_in, c10::fromIntArrayRefSlow(shape), w, std::nullopt);
  check_inputs(op, x_in, w, std::nullopt);
  const Rows r = rows_of(op, x_in, shape, w, std::nullopt);
  const double eps = eps_in ? *eps_in : default_rms_eps(x_in.scalar_type());
  const at::ScalarType st = stat_dtype(x_in.scalar_type());
  const Tensor x = x_in.contiguous();
  if (x.numel() == 0) return rms_norm_aten(x, r, w, eps, st);
  const Tensor scale = param_or(w, x, shape, 1.0);
  Key key(op);
  key.add(x).add(scale).add(eps).add_device(x.device());
  auto g = cached_graph(key, x.device(), op, [&](Graph& gr) {
    set_numerics(gr, x);
    auto X_ = rows_tensor(gr, X, "x", r, x.scalar_type());
    auto S = params_tensor(gr, SCALE, "weight", r, scale.scalar_type());
    auto out = gr.rmsnorm(X_, S, nullptr, gr.scalar(ir::Scalar::of_float(eps), "eps"),
                          NormForwardPhase::Training);
    rows_output(out[0], Y, "y", r, x.scalar_type());
    stats_output(out[1], OUT_RSTD, "rstd", r, st);
  });
  if (!g->graph) {
    warn_fallback(op, g->unsupported);
    return rms_norm_aten(x, r, w, eps, st);
  }
  Tensor y = at::empty_like(x);
  Tensor rstd = at::empty(r.stat_shape, x.options().dtype(st));
  execute(*g, x.device(), op, {{X, &x}, {SCALE, &scale}, {Y, &y}, {OUT_RSTD, &rstd}});
  return {y, rstd};
}

std::tuple<Tensor, Tensor> rms_norm_backward(const Tensor& dy_in, const Tensor& x_in,
                                             at::IntArrayRef shape, const Tensor& rstd,
                                             const OptTensor& w, std::array<bool, 2> mask) {
  const char* op = "rms_norm_backward";
  rules::norm(op, x_in, c10::fromIntArrayRefSlow(shape), w, std::nullopt);
  check_inputs(op, x_in, w, std::nullopt);
  check_device(op, x_in, "x", {{&dy_in, "dy"}, {&rstd, "rstd"}});
  check_same_dtype(op, x_in, "x", dy_in, "dy");
  TORCH_CHECK_VALUE(dy_in.sizes() == x_in.sizes(), "dnngraph::", op, ": 'dy' has shape ",
                    dy_in.sizes(), " but 'x' has ", x_in.sizes());
  const Rows r = rows_of(op, x_in, shape, w, std::nullopt);
  const Tensor x = x_in.contiguous(), dy = dy_in.contiguous(), rs = rstd.contiguous();
  TORCH_CHECK_VALUE(rs.numel() == r.m, "dnngraph::", op, ": 'rstd' needs one value per row (", r.m,
                    "), found ", rs.numel());
  const Tensor scale = param_or(w, x, shape, 1.0);
  auto finish = [&](Tensor dx, Tensor dw) -> std::tuple<Tensor, Tensor> {
    return {mask[0] ? dx : Tensor(), mask[1] && has(w) ? dw : Tensor()};
  };
  auto aten = [&] {
    const at::ScalarType st = rs.scalar_type();
    const Tensor xf = x.to(st).reshape({r.m, r.d}), rf = rs.reshape({r.m, 1});
    const Tensor gy = dy.to(st).reshape({r.m, r.d});
    const Tensor gx = gy * scale.to(st).reshape({1, r.d});
    const Tensor xhat = xf * rf;
    const Tensor dx = rf * (gx - xhat * (gx * xhat).mean({1}, true));
    const Tensor dw = (gy * xhat).sum({0});
    return finish(dx.reshape(x.sizes()).to(x.scalar_type()),
                  dw.reshape(shape).to(scale.scalar_type()));
  };
  if (x.numel() == 0) return aten();
  Key key(op);
  key.add(dy).add(x).add(rs).add(scale).add_device(x.device());
  auto g = cached_graph(key, x.device(), op, [&](Graph& gr) {
    set_numerics(gr, x);
    auto DY_ = rows_tensor(gr, DY, "dy", r, dy.scalar_type());
    auto X_ = rows_tensor(gr, X, "x", r, x.scalar_type());
    auto S = params_tensor(gr, SCALE, "weight", r, scale.scalar_type());
    auto R =
        tensor_like(gr, RSTD, "rstd", {r.m, 1, 1, 1}, {1, 1, 1, 1}, data_type_of(rs, op, "rstd"));
    auto out = gr.rmsnorm_backward(DY_, X_, S, R, false);
    rows_output(out[0], DX, "dx", r, x.scalar_type());
    params_output(out[1], DSCALE, "dweight", r, scale.scalar_type());
  });
  if (!g->graph) {
    warn_fallback(op, g->unsupported);
    return aten();
  }
  Tensor dx = at::empty_like(x), dw = at::empty(shape, scale.options());
  execute(*g, x.device(), op,
          {{DY, &dy}, {X, &x}, {SCALE, &scale}, {RSTD, &rs}, {DX, &dx}, {DSCALE, &dw}});
  return finish(dx, dw);
}

// ---------------------------------------------------------------- Meta (shapes only)

std::vector<c10::SymInt> sym_stat_shape(const Tensor& x, size_t n) {
  std::vector<c10::SymInt> s(x.sym_sizes().begin(), x.sym_sizes().end() - n);
  s.resize(x.dim(), c10::SymInt(1));
  return s;
}

// A backward's dy (x's shape) and statistics (one value per row), on x's device.
void check_backward_inputs(const char* op, const Tensor& dy, const Tensor& x, size_t n,
                           std::initializer_list<std::pair<const Tensor*, const char*>> stats) {
  rules::check_same_device(op, x, "x", {{&dy, "dy"}});
  rules::check_grad(op, dy, "dy", rules::SymShape(x.sym_sizes().begin(), x.sym_sizes().end()));
  c10::SymInt rows = 1;
  for (int64_t i = 0; i < x.dim() - static_cast<int64_t>(n); ++i) rows = rows * x.sym_size(i);
  for (const auto& [t, name] : stats) rules::check_stat(op, *t, name, x, "x", rows);
}

std::tuple<Tensor, Tensor, Tensor> layer_norm_meta(const Tensor& x, c10::SymIntArrayRef shape,
                                                   const OptTensor& w, const OptTensor& b, double) {
  rules::norm("layer_norm", x, shape, w, b);
  TORCH_CHECK_VALUE(shape.size() >= 1 && x.dim() >= static_cast<int64_t>(shape.size()),
                    "dnngraph::layer_norm: normalized_shape ", shape, " does not fit x ",
                    x.sym_sizes());
  auto st = x.options().dtype(stat_dtype(x.scalar_type()));
  auto ss = sym_stat_shape(x, shape.size());
  return {at::empty_symint(x.sym_sizes(), x.options()), at::empty_symint(ss, st),
          at::empty_symint(ss, st)};
}

std::tuple<Tensor, Tensor, Tensor> layer_norm_backward_meta(const Tensor& dy, const Tensor& x,
                                                            c10::SymIntArrayRef shape,
                                                            const Tensor& mean, const Tensor& rstd,
                                                            const OptTensor& w, const OptTensor& b,
                                                            std::array<bool, 3> mask) {
  rules::norm("layer_norm_backward", x, shape, w, b);
  check_backward_inputs("layer_norm_backward", dy, x, shape.size(),
                        {{&mean, "mean"}, {&rstd, "rstd"}});
  return {mask[0] ? at::empty_symint(x.sym_sizes(), x.options()) : Tensor(),
          mask[1] && has(w) ? at::empty_symint(shape, w->options()) : Tensor(),
          mask[2] && has(b) ? at::empty_symint(shape, b->options()) : Tensor()};
}

std::tuple<Tensor, Tensor> rms_norm_meta(const Tensor& x, c10::SymIntArrayRef shape,
                                         const OptTensor& w, std::optional<double>) {
  rules::norm("rms_norm", x, shape, w, std::nullopt);
  TORCH_CHECK_VALUE(shape.size() >= 1 && x.dim() >= static_cast<int64_t>(shape.size()),
                    "dnngraph::rms_norm: normalized_shape ", shape, " does not fit x ",
                    x.sym_sizes());
  return {at::empty_symint(x.sym_sizes(), x.options()),
          at::empty_symint(sym_stat_shape(x, shape.size()),
                           x.options().dtype(stat_dtype(x.scalar_type())))};
}

std::tuple<Tensor, Tensor> rms_norm_backward_meta(const Tensor& dy, const Tensor& x,
                                                  c10::SymIntArrayRef shape, const Tensor& rstd,
                                                  const OptTensor& w, std::array<bool, 2> mask) {
  rules::norm("rms_norm_backward", x, shape, w, std::nullopt);
  check_backward_inputs("rms_norm_backward", dy, x, shape.size(), {{&rstd, "rstd"}});
  return {mask[0] ? at::empty_symint(x.sym_sizes(), x.options()) : Tensor(),
          mask[1] && has(w) ? at::empty_symint(shape, w->options()) : Tensor()};
}

// ---------------------------------------------------------------- autograd

using LnSig = std::tuple<Tensor, Tensor, Tensor>(const Tensor&, c10::SymIntArrayRef,
                                                 const OptTensor&, const OptTensor&, double);
using LnBwdSig = std::tuple<Tensor, Tensor, Tensor>(const Tensor&, const Tensor&,
                                                    c10::SymIntArrayRef, const Tensor&,
                                                    const Tensor&, const OptTensor&,
                                                    const OptTensor&, std::array<bool, 3>);

class LayerNormFn : public torch::autograd::Function<LayerNormFn> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& x, c10::SymIntArrayRef shape,
                               const OptTensor& w, const OptTensor& b, double eps) {
    static auto op = op_handle<LnSig>("dnngraph::layer_norm");
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [y, mean, rstd] = op.call(x, shape, w, b, eps);
    ctx->save_for_backward({x, mean, rstd, value_or_undefined(w), value_or_undefined(b)});
    ctx->saved_data["n"] = static_cast<int64_t>(shape.size());
    ctx->mark_non_differentiable({mean, rstd});
    // No zeros made for the gradients of unused outputs: backward takes undefined ones.
    ctx->set_materialize_grads(false);
    return {y, mean, rstd};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static auto op = op_handle<LnBwdSig>("dnngraph::layer_norm_backward");
    auto saved = ctx->get_saved_variables();
    const Tensor& x = saved[0];
    const int64_t n = ctx->saved_data["n"].toInt();
    auto shape = x.sym_sizes().slice(x.dim() - n);
    // Autograd edges exist only for tensors that were given: x, then weight, then bias.
    const bool hw = saved[3].defined(), hb = saved[4].defined();
    std::array<bool, 3> mask{ctx->needs_input_grad(0), hw && ctx->needs_input_grad(1),
                             hb && ctx->needs_input_grad(hw ? 2 : 1)};
    if (!grads[0].defined()) return {Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
    auto [dx, dw, db] =
        op.call(grads[0], x, shape, saved[1], saved[2], opt(saved[3]), opt(saved[4]), mask);
    return {dx, Tensor(), dw, db, Tensor()};
  }
};

class RmsNormFn : public torch::autograd::Function<RmsNormFn> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& x, c10::SymIntArrayRef shape,
                               const OptTensor& w, std::optional<double> eps) {
    static auto op = op_handle<RmsSig>("dnngraph::rms_norm");
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [y, rstd] = op.call(x, shape, w, eps);
    ctx->save_for_backward({x, rstd, value_or_undefined(w)});
    ctx->saved_data["n"] = static_cast<int64_t>(shape.size());
    ctx->mark_non_differentiable({rstd});
    // No zeros made for the gradients of unused outputs: backward takes undefined ones.
    ctx->set_materialize_grads(false);
    return {y, rstd};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static auto op = op_handle<RmsBwdSig>("dnngraph::rms_norm_backward");
    auto saved = ctx->get_saved_variables();
    const Tensor& x = saved[0];
    const int64_t n = ctx->saved_data["n"].toInt();
    auto shape = x.sym_sizes().slice(x.dim() - n);
    std::array<bool, 2> mask{ctx->needs_input_grad(0),
                             saved[2].defined() && ctx->needs_input_grad(1)};
    if (!grads[0].defined()) return {Tensor(), Tensor(), Tensor(), Tensor()};
    auto [dx, dw] = op.call(grads[0], x, shape, saved[1], opt(saved[2]), mask);
    return {dx, Tensor(), dw, Tensor()};
  }
};

std::tuple<Tensor, Tensor, Tensor> layer_norm_autograd(const Tensor& x, c10::SymIntArrayRef shape,
                                                       const OptTensor& w, const OptTensor& b,
                                                       double eps) {
  rules::refuse_forward_ad(
      "layer_norm",
      {{&x, "x"}, {has(w) ? &*w : nullptr, "weight"}, {has(b) ? &*b : nullptr, "bias"}});
  if (!wants_grad(x, w, b)) {
    static auto op = op_handle<LnSig>("dnngraph::layer_norm");
    at::AutoDispatchBelowADInplaceOrView guard;
    return op.call(x, shape, w, b, eps);
  }
  auto r = LayerNormFn::apply(x, shape, w, b, eps);
  return {r[0], r[1], r[2]};
}
std::tuple<Tensor, Tensor> rms_norm_autograd(const Tensor& x, c10::SymIntArrayRef shape,
                                             const OptTensor& w, std::optional<double> eps) {
  rules::refuse_forward_ad("rms_norm", {{&x, "x"}, {has(w) ? &*w : nullptr, "weight"}});
  if (!wants_grad(x, w)) {
    static auto op = op_handle<RmsSig>("dnngraph::rms_norm");
    at::AutoDispatchBelowADInplaceOrView guard;
    return op.call(x, shape, w, eps);
  }
  auto r = RmsNormFn::apply(x, shape, w, eps);
  return {r[0], r[1]};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(dnngraph, m) {
  m.def(
      "layer_norm(Tensor x, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
      "float eps=1e-05) -> (Tensor, Tensor, Tensor)");
  m.def(
      "layer_norm_backward(Tensor dy, Tensor x, SymInt[] normalized_shape, Tensor mean, "
      "Tensor rstd, Tensor? weight, Tensor? bias, bool[3] output_mask) -> (Tensor, Tensor, "
      "Tensor)");
  m.def(
      "rms_norm(Tensor x, SymInt[] normalized_shape, Tensor? weight=None, float? eps=None) -> "
      "(Tensor, Tensor)");
  m.def(
      "rms_norm_backward(Tensor dy, Tensor x, SymInt[] normalized_shape, Tensor rstd, "
      "Tensor? weight, bool[2] output_mask) -> (Tensor, Tensor)");
}

// The same kernels serve CPU (reference engine) and CUDA (cuDNN): the handle follows the
// tensors' device.
namespace {
void impl_devices(torch::Library& m) {
  m.impl("layer_norm", &layer_norm);
  m.impl("layer_norm_backward", &layer_norm_backward);
  m.impl("rms_norm", &rms_norm);
  m.impl("rms_norm_backward", &rms_norm_backward);
}
}  // namespace
TORCH_LIBRARY_IMPL(dnngraph, CPU, m) { impl_devices(m); }
TORCH_LIBRARY_IMPL(dnngraph, CUDA, m) { impl_devices(m); }
TORCH_LIBRARY_IMPL(dnngraph, Meta, m) {
  m.impl("layer_norm", rules::meta_kernel(&layer_norm_meta));
  m.impl("layer_norm_backward", rules::meta_kernel(&layer_norm_backward_meta));
  m.impl("rms_norm", rules::meta_kernel(&rms_norm_meta));
  m.impl("rms_norm_backward", rules::meta_kernel(&rms_norm_backward_meta));
}
TORCH_LIBRARY_IMPL(dnngraph, Autograd, m) {
  m.impl("layer_norm", &layer_norm_autograd);
  m.impl("rms_norm", &rms_norm_autograd);
}

}  // namespace dnngraph::torch_ops
