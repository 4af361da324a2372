// dnngraph::add_rms_norm: the residual add fused with RMSNorm (pre-norm transformer blocks),
//   sum = x + residual,  y = rms_norm(sum) * weight,
// one graph returning (sum, y, rstd). The backward is rms_norm's backward graph and an add:
//   dsum_total = rms_norm_backward(dy, sum, weight, rstd) + dsum,  dweight,
// and dsum_total is the gradient of both x and residual.
// Rows as in norm.cpp: [M, D, 1, 1] with D the normalized elements; rstd [M] as
// x.shape[:axis] + [1] * len(normalized_shape), fp32 (fp64 for fp64 inputs).
#include <limits>

#include "core/op_support.hpp"
#include "core/shape_rules.hpp"

namespace dnngraph::torch_ops {
namespace {

enum Uid : int64_t { X = 1, RES = 2, SCALE = 3 };
enum OutUid : int64_t { OUT_SUM = 100, OUT_Y, OUT_RSTD };

struct Rows {
  int64_t m = 1, d = 1;
  std::vector<int64_t> stat_shape;
};

Rows rows_of(const char* op, const Tensor& x, at::IntArrayRef shape, const OptTensor& w) {
  const int64_t n = static_cast<int64_t>(shape.size());
  TORCH_CHECK_VALUE(n >= 1 && x.dim() >= n && x.sizes().slice(x.dim() - n) == shape,
                    "dnngraph::", op, ": 'x' of shape ", x.sizes(),
                    " does not end with normalized_shape ", shape);
  TORCH_CHECK_VALUE(!has(w) || w->sizes() == shape, "dnngraph::", op, ": 'weight' has shape ",
                    w->sizes(), " but normalized_shape is ", shape);
  Rows r;
  for (int64_t i = 0; i < x.dim(); ++i) (i < x.dim() - n ? r.m : r.d) *= x.size(i);
  r.stat_shape.assign(x.sizes().begin(), x.sizes().end() - n);
  r.stat_shape.resize(x.dim(), 1);
  return r;
}

ir::Tensor rows(Graph& g, int64_t uid, const char* name, const Rows& r, const Tensor& t) {
  return tensor_like(g, uid, name, {r.m, r.d, 1, 1}, {r.d, 1, r.d, r.d},
                     data_type_of(t, g.name().c_str(), name));
}
void rows_out(const ir::Tensor& t, int64_t uid, const char* name, const Rows& r, const Tensor& like,
              int64_t m) {
  t->set_output(true).set_name(name).set_uid(uid);
  t->set_dim({m, r.d, 1, 1}).set_stride({r.d, 1, r.d, r.d});
  t->set_data_type(data_type_of(like, "output", name));
}

double default_eps(at::ScalarType t) {
  switch (t) {
    case at::kDouble:
      return std::numeric_limits<double>::epsilon();
    case at::kHalf:
      return 0.0009765625;
    case at::kBFloat16:
      return 0.0078125;
    default:
      return std::numeric_limits<float>::epsilon();
  }
}

void check_pair(const char* op, const Tensor& x, const Tensor& res, const OptTensor& w) {
  check_device(op, x, "x", {{&res, "residual"}, {has(w) ? &*w : nullptr, "weight"}});
  data_type_of(x, op, "x");
  check_same_dtype(op, x, "x", res, "residual");
  if (has(w)) check_same_dtype(op, x, "x", *w, "weight");
  TORCH_CHECK_VALUE(x.sizes() == res.sizes(), "dnngraph::", op, ": 'residual' has shape ",
                    res.sizes(), " but 'x' has ", x.sizes(), "; give both the same shape");
}

// The backward's rules: sum [..., normalized_shape] with weight, dy and dsum of sum's shape, rstd
// with one value per row, all on sum's device.
void check_backward(const char* op, const OptTensor& dsum, const Tensor& dy, const Tensor& sum,
                    c10::SymIntArrayRef shape, const Tensor& rstd, const OptTensor& w) {
  rules::norm(op, sum, shape, w, std::nullopt);
  const rules::SymShape want(sum.sym_sizes().begin(), sum.sym_sizes().end());
  rules::check_same_device(op, sum, "sum", {{&dy, "dy"}});
  rules::check_grad(op, dy, "dy", want);
  if (has(dsum)) {
    rules::check_same_device(op, sum, "sum", {{&*dsum, "dsum"}});
    rules::check_grad(op, *dsum, "dsum", want);
  }
  c10::SymInt rows = 1;
  for (int64_t i = 0; i < sum.dim() - static_cast<int64_t>(shape.size()); ++i)
    rows = rows * sum.sym_size(i);
  rules::check_stat(op, rstd, "rstd", sum, "sum", rows);
}

Tensor weight_or_ones(const OptTensor& w, const Tensor& x, at::IntArrayRef shape) {
  return has(w) ? w->contiguous() : at::ones(shape, x.options());
}

std::tuple<Tensor, Tensor, Tensor> add_rms_norm(const Tensor& x_in, const Tensor& res_in,
                                                at::IntArrayRef shape, const OptTensor& w,
                                                std::optional<double> eps_in) {
  const char* op = "add_rms_norm";
  rules::add_rms_norm(op, x_in, res_in, c10::fromIntArrayRefSlow(shape), w);
  check_pair(op, x_in, res_in, w);
  const Rows r = rows_of(op, x_in, shape, w);
  const double eps = eps_in ? *eps_in : default_eps(x_in.scalar_type());
  const at::ScalarType st = stat_dtype(x_in.scalar_type());
  const Tensor x = rules::engine_operand(x_in.contiguous()),
               res = rules::engine_operand(res_in.contiguous());
  Tensor sum = at::empty_like(x), y = at::empty_like(x);
  Tensor rstd = at::empty(r.stat_shape, x.options().dtype(st));
  if (x.numel() == 0) return {sum, y, rstd};
  const Tensor scale = weight_or_ones(w, x, shape);

  Key key(op);
  key.add(x).add(res).add(scale).add(eps).add_device(x.device());
  auto g = cached_graph(key, x.device(), op, [&](Graph& gr) {
    set_numerics(gr, x);
    ir::Tensor s = gr.add(rows(gr, X, "x", r, x), rows(gr, RES, "residual", r, res));
    rows_out(s, OUT_SUM, "sum", r, x, r.m);
    ir::Tensor sc = tensor_like(gr, SCALE, "weight", {1, r.d, 1, 1}, {r.d, 1, r.d, r.d},
                                data_type_of(scale, op, "weight"));
    auto out = gr.rmsnorm(s, sc, nullptr, gr.scalar(ir::Scalar::of_float(eps), "eps"),
                          NormForwardPhase::Training);
    rows_out(out[0], OUT_Y, "y", r, x, r.m);
    out[1]->set_output(true).set_name("rstd").set_uid(OUT_RSTD);
    out[1]->set_dim({r.m, 1, 1, 1}).set_stride({1, 1, 1, 1});
    out[1]->set_data_type(data_type_of(st, op, "rstd"));
  });
  if (!g->graph) {  // the add by ATen, then rms_norm's own graph (it warns if it has none)
    note_aten_part(op, "the residual add", g->unsupported);
    static auto rms = op_handle<RmsSig>("dnngraph::rms_norm");
    at::add_out(sum, x, res);
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [yy, rr] = rms.call(sum, c10::fromIntArrayRefSlow(shape), w, eps);
    return {sum, yy, rr};
  }
  execute(*g, x.device(), op,
          {{X, &x}, {RES, &res}, {SCALE, &scale}, {OUT_SUM, &sum}, {OUT_Y, &y}, {OUT_RSTD, &rstd}});
  return {sum, y, rstd};
}

// (dsum_total, dweight): dsum_total is the gradient of x and of residual alike.
std::tuple<Tensor, Tensor> add_rms_norm_backward(const OptTensor& dsum_in, const Tensor& dy_in,
                                                 const Tensor& sum_in, at::IntArrayRef shape,
                                                 const Tensor& rstd_in, const OptTensor& w,
                                                 std::array<bool, 2> mask) {
  const char* op = "add_rms_norm_backward";
  check_backward(op, dsum_in, dy_in, sum_in, c10::fromIntArrayRefSlow(shape), rstd_in, w);
  check_device(op, sum_in, "sum",
               {{&dy_in, "dy"},
                {&rstd_in, "rstd"},
                {has(dsum_in) ? &*dsum_in : nullptr, "dsum"},
                {has(w) ? &*w : nullptr, "weight"}});
  data_type_of(sum_in, op, "sum");
  for (const auto& [t, name] :
       {std::pair{&dy_in, "dy"}, std::pair{has(dsum_in) ? &*dsum_in : nullptr, "dsum"}}) {
    if (!t) continue;
    check_same_dtype(op, sum_in, "sum", *t, name);
    TORCH_CHECK_VALUE(t->sizes() == sum_in.sizes(), "dnngraph::", op, ": '", name, "' has shape ",
                      t->sizes(), " but 'sum' has ", sum_in.sizes());
  }
  if (has(w)) check_same_dtype(op, sum_in, "sum", *w, "weight");
  rows_of(op, sum_in, shape, w);
  // rms_norm's backward graph, then dsum added by ATen: cuDNN 9.19 plans that graph with the add
  // fused behind it but fails at execute (a null pointer for the virtual dx), so the add is left
  // out of the graph on every engine.
  static auto rms_backward = op_handle<RmsBwdSig>("dnngraph::rms_norm_backward");
  at::AutoDispatchBelowADInplaceOrView guard;
  auto [ds, dw] =
      rms_backward.call(dy_in, sum_in, c10::fromIntArrayRefSlow(shape), rstd_in, w, mask);
  if (!mask[0]) return {Tensor(), dw};
  if (has(dsum_in)) ds.add_(*dsum_in);
  return {ds, dw};
}

// ---------------------------------------------------------------- Meta

std::tuple<Tensor, Tensor, Tensor> add_rms_norm_meta(const Tensor& x, const Tensor& res,
                                                     c10::SymIntArrayRef shape, const OptTensor& w,
                                                     std::optional<double>) {
  rules::add_rms_norm("add_rms_norm", x, res, shape, w);
  std::vector<c10::SymInt> ss(x.sym_sizes().begin(), x.sym_sizes().end() - shape.size());
  ss.resize(x.dim(), c10::SymInt(1));
  return {at::empty_symint(x.sym_sizes(), x.options()),
          at::empty_symint(x.sym_sizes(), x.options()),
          at::empty_symint(ss, x.options().dtype(stat_dtype(x.scalar_type())))};
}
std::tuple<Tensor, Tensor> add_rms_norm_backward_meta(const OptTensor& dsum, const Tensor& dy,
                                                      const Tensor& s, c10::SymIntArrayRef shape,
                                                      const Tensor& rstd, const OptTensor& w,
                                                      std::array<bool, 2> mask) {
  check_backward("add_rms_norm_backward", dsum, dy, s, shape, rstd, w);
  return {mask[0] ? at::empty_symint(s.sym_sizes(), s.options()) : Tensor(),
          mask[1] && has(w) ? at::empty_symint(shape, w->options()) : Tensor()};
}

// ---------------------------------------------------------------- autograd

using Sig = std::tuple<Tensor, Tensor, Tensor>(const Tensor&, const Tensor&, c10::SymIntArrayRef,
                                               const OptTensor&, std::optional<double>);
using BwdSig = std::tuple<Tensor, Tensor>(const OptTensor&, const Tensor&, const Tensor&,
                                          c10::SymIntArrayRef, const Tensor&, const OptTensor&,
                                          std::array<bool, 2>);

class AddRmsNormFn : public torch::autograd::Function<AddRmsNormFn> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& x, const Tensor& res,
                               c10::SymIntArrayRef shape, const OptTensor& w,
                               std::optional<double> eps) {
    static auto op = op_handle<Sig>("dnngraph::add_rms_norm");
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [sum, y, rstd] = op.call(x, res, shape, w, eps);
    ctx->save_for_backward({sum, rstd, value_or_undefined(w)});
    ctx->saved_data["n"] = static_cast<int64_t>(shape.size());
    ctx->mark_non_differentiable({rstd});
    // No zeros made for the gradients of unused outputs: backward takes undefined ones.
    ctx->set_materialize_grads(false);
    return {sum, y, rstd};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static auto op = op_handle<BwdSig>("dnngraph::add_rms_norm_backward");
    auto s = ctx->get_saved_variables();
    const int64_t n = ctx->saved_data["n"].toInt();
    auto shape = s[0].sym_sizes().slice(s[0].dim() - n);
    const bool gx = ctx->needs_input_grad(0) || ctx->needs_input_grad(1);
    std::array<bool, 2> mask{gx, s[2].defined() && ctx->needs_input_grad(2)};
    if (!grads[1].defined()) {  // only the sum was used: its gradient passes through
      return {grads[0], grads[0], Tensor(), Tensor(), Tensor()};
    }
    auto [ds, dw] = op.call(opt(grads[0]), grads[1], s[0], shape, s[1], opt(s[2]), mask);
    return {ds, ds, Tensor(), dw, Tensor()};
  }
};

std::tuple<Tensor, Tensor, Tensor> add_rms_norm_autograd(const Tensor& x, const Tensor& res,
                                                         c10::SymIntArrayRef shape,
                                                         const OptTensor& w,
                                                         std::optional<double> eps) {
  rules::refuse_forward_ad("add_rms_norm",
                           {{&x, "x"}, {&res, "residual"}, {has(w) ? &*w : nullptr, "weight"}});
  if (!wants_grad(x, res, w)) {
    static auto op = op_handle<Sig>("dnngraph::add_rms_norm");
    at::AutoDispatchBelowADInplaceOrView guard;
    return op.call(x, res, shape, w, eps);
  }
  auto r = AddRmsNormFn::apply(x, res, shape, w, eps);
  return {r[0], r[1], r[2]};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(dnngraph, m) {
  m.def(
      "add_rms_norm(Tensor x, Tensor residual, SymInt[] normalized_shape, Tensor? weight=None, "
      "float? eps=None) -> (Tensor, Tensor, Tensor)");
  m.def(
      "add_rms_norm_backward(Tensor? dsum, Tensor dy, Tensor sum, SymInt[] normalized_shape, "
      "Tensor rstd, Tensor? weight, bool[2] output_mask) -> (Tensor, Tensor)");
}

// The same kernels serve CPU (reference engine) and CUDA (cuDNN).
namespace {
void impl_devices(torch::Library& m) {
  m.impl("add_rms_norm", &add_rms_norm);
  m.impl("add_rms_norm_backward", &add_rms_norm_backward);
}
}  // namespace
TORCH_LIBRARY_IMPL(dnngraph, CPU, m) { impl_devices(m); }
TORCH_LIBRARY_IMPL(dnngraph, CUDA, m) { impl_devices(m); }
TORCH_LIBRARY_IMPL(dnngraph, Meta, m) {
  m.impl("add_rms_norm", rules::meta_kernel(&add_rms_norm_meta));
  m.impl("add_rms_norm_backward", rules::meta_kernel(&add_rms_norm_backward_meta));
}
TORCH_LIBRARY_IMPL(dnngraph, Autograd, m) { m.impl("add_rms_norm", &add_rms_norm_autograd); }

}  // namespace dnngraph::torch_ops
