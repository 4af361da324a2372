// dnngraph::sdpa and sdpa_backward: scaled dot-product attention on [B, H, S, D] tensors (any
// strides), optional additive bias [B|1, H|1, S_q, S_kv] (differentiable), causal masking
// (top-left aligned, as torch's is_causal), grouped-query attention (enable_gqa).
// The forward returns (out, logsumexp [B, H, S_q] fp32); the backward takes them back.
// Layouts (op_support.hpp, empty_bhsd): out follows q's layout ([B, S, H, D] storage when q is
// a head split of [B, S, H*D], so merging the heads back is a view), dq/dk/dv follow q/k/v's
// strides where those are dense (else the same rule), and dout is taken with any strides: no
// copies around the graphs.
// Without a cuDNN plan on a GPU the op runs ATen's flash attention (forward, and backward from
// the saved out and logsumexp, no recompute) where it applies, else ATen's math.
#include <torch/csrc/autograd/autograd.h>

#include <cmath>

#include "core/op_support.hpp"
#include "core/shape_rules.hpp"
#include "dnngraph/ir/sdpa.hpp"

namespace dnngraph::torch_ops {
namespace {

enum Uid : int64_t { Q = 1, K = 2, V = 3, BIAS = 4, O = 5, DO = 6, STATS = 7 };
enum OutUid : int64_t { OUT_O = 100, OUT_STATS, DQ, DK, DV, DBIAS };

struct Attn {
  int64_t b = 0, hq = 0, hk = 0, sq = 0, skv = 0, d = 0, dv = 0;
  double scale = 1.0;
  Tensor bias;  // 4-D or undefined
};

Attn check_attn(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                const OptTensor& bias, double dropout_p, bool causal, std::optional<double> scale,
                bool gqa) {
  check_device(op, q, "q", {{&k, "k"}, {&v, "v"}, {has(bias) ? &*bias : nullptr, "attn_bias"}});
  data_type_of(q, op, "q");
  check_same_dtype(op, q, "q", k, "k");
  check_same_dtype(op, q, "q", v, "v");
  TORCH_CHECK_NOT_IMPLEMENTED(dropout_p == 0.0, "dnngraph::", op, ": dropout_p=", dropout_p,
                              " is not supported (dropout with torch's generator is not offered "
                              "yet); pass dropout_p=0");
  TORCH_CHECK_VALUE(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "dnngraph::", op,
                    ": q, k, v must be 4-D [B, H, S, D]; got ", q.sizes(), ", ", k.sizes(), ", ",
                    v.sizes());
  Attn a{q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), q.size(3), v.size(3), 1.0, {}};
  TORCH_CHECK_VALUE(k.size(0) == a.b && v.size(0) == a.b && k.size(3) == a.d &&
                        v.size(2) == a.skv && v.size(1) == a.hk,
                    "dnngraph::", op, ": shapes q ", q.sizes(), ", k ", k.sizes(), ", v ",
                    v.sizes(), " do not agree (k: [B, H_kv, S_kv, D], v: [B, H_kv, S_kv, D_v])");
  TORCH_CHECK_VALUE(a.hq == a.hk || (gqa && a.hq % a.hk == 0), "dnngraph::", op, ": q has ", a.hq,
                    " heads and k/v ", a.hk,
                    (gqa ? "; q's heads must be a multiple of k's"
                         : "; pass enable_gqa=True for "
                           "grouped-query attention"));
  TORCH_CHECK_VALUE(!(causal && has(bias)), "dnngraph::", op,
                    ": give either attn_bias or is_causal, not both (as torch)");
  ir::SdpaOptions o;
  o.attn_scale = scale;
  a.scale = ir::sdpa_scale_of(o, a.d);  // the IR's default, 1/sqrt(d), when none is given
  if (has(bias)) {
    check_same_dtype(op, q, "q", *bias, "attn_bias");
    TORCH_CHECK_VALUE(bias->dim() <= 4, "dnngraph::", op, ": attn_bias has ", bias->dim(),
                      " dims; expected at most 4");
    std::vector<int64_t> s(4 - bias->dim(), 1);
    s.insert(s.end(), bias->sizes().begin(), bias->sizes().end());
    TORCH_CHECK_VALUE(
        (s[0] == 1 || s[0] == a.b) && (s[1] == 1 || s[1] == a.hq) && s[2] == a.sq && s[3] == a.skv,
        "dnngraph::", op, ": attn_bias of shape ", bias->sizes(),
        " must be [B|1, H|1, S_q, S_kv] = [", a.b, "|1, ", a.hq, "|1, ", a.sq, ", ", a.skv, "]");
    a.bias = bias->reshape(s).contiguous();
  }
  return a;
}

ir::SdpaAttrs sdpa_attrs(const Attn& a, bool causal) {
  ir::SdpaAttrs s;
  s.is_inference = false;
  s.attn_scale = a.scale;
  s.causal = causal;
  return s;
}

// The numerics of the graphs the Python API builds for attention (io type of q, fp32
// intermediates and compute; fp64 throughout for fp64): test_torch_sdpa.py pins the equality.
void sdpa_numerics(Graph& g, const Tensor& q) {
  set_numerics(g, q);
  g.set_io_data_type(data_type_of(q, g.name().c_str(), "q"));
}

// STATS as the graph sees it: [B, H, S_q, 1] over a torch [B, H, S_q] tensor.
void stats_port(const ir::Tensor& t, const Tensor& lse) {
  t->set_dim({lse.size(0), lse.size(1), lse.size(2), 1})
      .set_stride({lse.stride(0), lse.stride(1), lse.stride(2), 1})
      .set_data_type(data_type_of(lse, "sdpa", "logsumexp"));
}

// ---------------------------------------------------------------- ATen fallback (math)

Tensor repeat_heads(const Tensor& t, int64_t hq) {
  return t.size(1) == hq ? t : t.repeat_interleave(hq / t.size(1), 1);
}
Tensor scores_of(const Tensor& q, const Tensor& k, const Attn& a, bool causal) {
  Tensor s = at::matmul(q, repeat_heads(k, a.hq).transpose(-2, -1));
  if (a.d > 0) s = s * a.scale;  // empty dot products are 0 whatever the scale (1/sqrt(0) = inf)
  if (a.bias.defined()) s = s + a.bias.to(s.scalar_type());
  if (causal)
    s = s.masked_fill(at::ones({a.sq, a.skv}, q.options().dtype(at::kBool)).triu(1),
                      -std::numeric_limits<double>::infinity());
  return s;
}

std::tuple<Tensor, Tensor> sdpa_math(const Tensor& q, const Tensor& k, const Tensor& v,
                                     const Attn& a, bool causal) {
  const at::ScalarType st = stat_dtype(q.scalar_type());
  Tensor s = scores_of(q.to(st), k.to(st), a, causal);
  Tensor lse = at::logsumexp(s, -1);
  Tensor out = at::matmul(at::exp(s - lse.unsqueeze(-1)), repeat_heads(v.to(st), a.hq));
  return {out.to(q.scalar_type()).contiguous(), lse.contiguous()};
}

// ATen's flash attention takes these: CUDA, fp16/bf16, no bias, as many k/v heads as q heads,
// one head dim <= 256 that is a multiple of 8, unit stride in the last dim; and, when causal, as
// many queries as keys: its causal mask is aligned to the bottom right, this op's (as torch's
// is_causal) to the top left, and the two agree only on a square.
bool flash_applies(const Tensor& q, const Tensor& k, const Tensor& v, const Attn& a, bool causal) {
  const at::ScalarType t = q.scalar_type();
  return q.is_cuda() && (t == at::kHalf || t == at::kBFloat16) && !a.bias.defined() &&
         (!causal || a.sq == a.skv) && a.hq == a.hk && a.d == a.dv && a.d % 8 == 0 && a.d <= 256 &&
         q.stride(-1) == 1 && k.stride(-1) == 1 && v.stride(-1) == 1;
}

// An attention operand as the engine takes it: cuDNN's attention kernels read rows that start
// off a 16-byte boundary wrongly (the engine refuses such strides), so an operand with a stride
// of that kind (x[..., 1:] of bf16) is copied into dense memory of the same dim order.
Tensor attention_operand(const Tensor& t_in) {
  Tensor t = rules::engine_operand(t_in);
  if (!t.defined() || t.is_non_overlapping_and_dense()) return t;  // a copy keeps its strides
  const int64_t bytes = static_cast<int64_t>(t.element_size());
  for (int64_t i = 0; i < t.dim(); ++i)
    if (t.size(i) > 1 && t.stride(i) != 1 && (t.stride(i) * bytes) % kAlignmentBytes != 0)
      return at::empty_like(t).copy_(t);
  return t;
}

Status with_path(const Status& why, const char* path) {
  return make_error(ErrorCode::NotSupported, why.message(), "; it runs ", path);
}

// The backward through ATen's own attention (its fused kernels where it has them): recompute
// the forward with autograd on and differentiate it. Used when the engine has no plan.
std::tuple<Tensor, Tensor, Tensor, Tensor> sdpa_backward_aten(const Tensor& dout, const Tensor& q,
                                                              const Tensor& k, const Tensor& v,
                                                              const Attn& a, bool causal) {
  // The op may run below autograd (e.g. inside another op's backward): turn it back on here.
  const auto saved = c10::impl::tls_local_dispatch_key_set();
  c10::impl::ForceDispatchKeyGuard keys(
      saved.included_, saved.excluded_ - c10::autograd_dispatch_keyset_with_ADInplaceOrView);
  at::AutoGradMode grad_mode(true);
  std::vector<Tensor> in{q.detach().requires_grad_(true), k.detach().requires_grad_(true),
                         v.detach().requires_grad_(true)};
  OptTensor bias;
  if (a.bias.defined()) {
    in.push_back(a.bias.detach().requires_grad_(true));
    bias = in.back();
  }
  Tensor out = at::scaled_dot_product_attention(in[0], in[1], in[2], bias, 0.0, causal, a.scale,
                                                a.hq != a.hk);
  auto g = torch::autograd::grad({out}, in, {dout});
  return {g[0], g[1], g[2], a.bias.defined() ? g[3] : Tensor()};
}

// ---------------------------------------------------------------- kernels

std::tuple<Tensor, Tensor> sdpa(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                const OptTensor& bias, double dropout_p, bool causal,
                                std::optional<double> scale, bool gqa) {
  const char* op = "sdpa";
  rules::sdpa(op, q_in, k_in, v_in, bias, causal, gqa);
  const Tensor q = attention_operand(q_in), k = attention_operand(k_in),
               v = attention_operand(v_in);
  const Attn a = check_attn(op, q, k, v, bias, dropout_p, causal, scale, gqa);
  Tensor out = empty_bhsd(q, a.dv, q.options());
  Tensor lse = at::empty({a.b, a.hq, a.sq}, q.options().dtype(stat_dtype(q.scalar_type())));
  // ATen's results written into the layouts the graph writes and the Meta kernel promises
  // (torch.compile checks them).
  auto aten_result = [&](const std::tuple<Tensor, Tensor>& r) -> std::tuple<Tensor, Tensor> {
    out.copy_(std::get<0>(r));
    lse.copy_(std::get<1>(r));
    return {out, lse};
  };
  if (q.numel() == 0 || k.numel() == 0 || v.numel() == 0)
    return aten_result(sdpa_math(q, k, v, a, causal));
  Key key(op);
  key.add(q).add(k).add(v).add(a.bias).add(a.scale).add(causal).add_device(q.device());
  auto g = cached_graph(key, q.device(), op, [&](Graph& gr) {
    sdpa_numerics(gr, q);
    // One statement per tensor: the graph's tensor order is fixed (argument evaluation order
    // is not), the order the Python API's users write them in.
    ir::Tensor tq = tensor_like(gr, Q, "q", q), tk = tensor_like(gr, K, "k", k);
    ir::Tensor tv = tensor_like(gr, V, "v", v);
    ir::SdpaInputs extra;
    if (a.bias.defined()) extra.bias = tensor_like(gr, BIAS, "attn_bias", a.bias);
    auto r = gr.sdpa(tq, tk, tv, sdpa_attrs(a, causal), extra);
    output_like(r[0], OUT_O, "out", out);
    r[1]->set_output(true).set_name("logsumexp").set_uid(OUT_STATS);
    stats_port(r[1], lse);
  });
  if (!g->graph) {
    if (flash_applies(q, k, v, a, causal)) {
      warn_fallback(op, with_path(g->unsupported, "on ATen's flash attention"));
      auto r = at::_scaled_dot_product_flash_attention(q, k, v, 0.0, causal, false, a.scale);
      return aten_result({std::get<0>(r), std::get<1>(r)});
    }
    warn_fallback(op, with_path(g->unsupported, "on ATen's math attention"));
    return aten_result(sdpa_math(q, k, v, a, causal));
  }
  execute(*g, q.device(), op,
          {{Q, &q}, {K, &k}, {V, &v}, {BIAS, &a.bias}, {OUT_O, &out}, {OUT_STATS, &lse}});
  return {out, lse};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> sdpa_backward(const Tensor& dout_in, const Tensor& q_in,
                                                         const Tensor& k_in, const Tensor& v_in,
                                                         const Tensor& out_in, const Tensor& lse_in,
                                                         const OptTensor& bias, double dropout_p,
                                                         bool causal, std::optional<double> scale,
                                                         bool gqa) {
  const char* op = "sdpa_backward";
  const rules::SymShape shape = rules::sdpa(op, q_in, k_in, v_in, bias, causal, gqa);
  rules::check_same_device(op, q_in, "q",
                           {{&dout_in, "dout"}, {&out_in, "out"}, {&lse_in, "logsumexp"}});
  rules::check_grad(op, dout_in, "dout", shape);
  rules::check_grad(op, out_in, "out", shape);
  const Tensor q = attention_operand(q_in), k = attention_operand(k_in),
               v = attention_operand(v_in), out = attention_operand(out_in),
               dout = attention_operand(dout_in);
  const Attn a = check_attn(op, q, k, v, bias, dropout_p, causal, scale, gqa);
  check_device(op, q, "q", {{&dout, "dout"}, {&out, "out"}, {&lse_in, "logsumexp"}});
  check_same_dtype(op, q, "q", dout, "dout");
  const std::vector<int64_t> o_shape{a.b, a.hq, a.sq, a.dv};
  TORCH_CHECK_VALUE(dout.sizes() == at::IntArrayRef(o_shape) && out.sizes() == dout.sizes(),
                    "dnngraph::", op, ": 'dout' ", dout.sizes(), " and 'out' ", out.sizes(),
                    " must be ", at::IntArrayRef(o_shape));
  TORCH_CHECK_VALUE(lse_in.dim() == 3 && lse_in.size(0) == a.b && lse_in.size(1) == a.hq &&
                        lse_in.size(2) == a.sq,
                    "dnngraph::", op, ": 'logsumexp' has shape ", lse_in.sizes(), "; expected [",
                    a.b, ", ", a.hq, ", ", a.sq, "]");
  const Tensor lse = lse_in.contiguous();
  Tensor dq = empty_grad_bhsd(q), dk = empty_grad_bhsd(k), dv = empty_grad_bhsd(v);
  Tensor db = a.bias.defined() ? at::empty_like(a.bias) : Tensor();
  auto finish = [&] {
    return std::tuple<Tensor, Tensor, Tensor, Tensor>{
        dq, dk, dv, db.defined() ? db.view(bias->sizes()) : Tensor()};
  };
  // ATen's gradients written into the layouts the graph writes and the Meta kernel promises.
  auto aten_result = [&](const Tensor& gq, const Tensor& gk, const Tensor& gv, const Tensor& gb) {
    dq.copy_(gq), dk.copy_(gk), dv.copy_(gv);
    if (db.defined()) db.copy_(gb);
    return finish();
  };
  auto math = [&] {
    auto [gq, gk, gv, gb] = sdpa_backward_aten(dout, q, k, v, a, causal);
    return aten_result(gq, gk, gv, gb);
  };
  if (q.numel() == 0 || k.numel() == 0 || v.numel() == 0) return math();
  Key key(op);
  key.add(dout).add(q).add(k).add(v).add(out).add(lse).add(a.bias).add(a.scale).add(causal);
  key.add(dq).add(dk).add(dv).add_device(q.device());
  auto g = cached_graph(key, q.device(), op, [&](Graph& gr) {
    sdpa_numerics(gr, q);
    ir::Tensor tq = tensor_like(gr, Q, "q", q), tk = tensor_like(gr, K, "k", k);
    ir::Tensor tv = tensor_like(gr, V, "v", v), to = tensor_like(gr, O, "out", out);
    ir::Tensor tdo = tensor_like(gr, DO, "dout", dout);
    ir::Tensor S = tensor_like(gr, STATS, "logsumexp", lse);
    stats_port(S, lse);
    ir::SdpaInputs extra;
    if (a.bias.defined()) extra.bias = tensor_like(gr, BIAS, "attn_bias", a.bias);
    ir::SdpaBwdAttrs attrs;
    static_cast<ir::SdpaOptions&>(attrs) = sdpa_attrs(a, causal);
    auto r = gr.sdpa_backward(tq, tk, tv, to, tdo, S, attrs, extra);
    output_like(r[0], DQ, "dq", dq);
    output_like(r[1], DK, "dk", dk);
    output_like(r[2], DV, "dv", dv);
    if (a.bias.defined()) output_like(r[3], DBIAS, "dbias", db);
  });
  if (!g->graph) {
    if (flash_applies(q, k, v, a, causal) && dout.stride(-1) == 1 && out.stride(-1) == 1) {
      warn_fallback(op, with_path(g->unsupported,
                                  "on ATen's flash attention backward (from the saved out and "
                                  "logsumexp, no forward recompute)"));
      const Tensor none = at::empty({0}, q.options().dtype(at::kLong));
      auto r = at::_scaled_dot_product_flash_attention_backward(dout, q, k, v, out, lse, Tensor(),
                                                                Tensor(), a.sq, a.skv, 0.0, causal,
                                                                none, none, a.scale);
      return aten_result(std::get<0>(r), std::get<1>(r), std::get<2>(r), Tensor());
    }
    warn_fallback(op, with_path(g->unsupported,
                                "on ATen's attention with the forward recomputed (flash or "
                                "memory-efficient kernels where they apply, else math)"));
    return math();
  }
  execute(*g, q.device(), op,
          {{Q, &q},
           {K, &k},
           {V, &v},
           {O, &out},
           {DO, &dout},
           {STATS, &lse},
           {BIAS, &a.bias},
           {DQ, &dq},
           {DK, &dk},
           {DV, &dv},
           {DBIAS, &db}});
  return finish();
}

// ---------------------------------------------------------------- Meta

std::tuple<Tensor, Tensor> sdpa_meta(const Tensor& q, const Tensor& k, const Tensor& v,
                                     const OptTensor& bias, double, bool causal,
                                     std::optional<double>, bool gqa) {
  rules::sdpa("sdpa", q, k, v, bias, causal, gqa);
  Tensor lse = at::empty_symint({q.sym_size(0), q.sym_size(1), q.sym_size(2)},
                                q.options().dtype(stat_dtype(q.scalar_type())));
  return {empty_bhsd(q, v.sym_size(3), q.options()), lse};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> sdpa_backward_meta(const Tensor& dout, const Tensor& q,
                                                              const Tensor& k, const Tensor& v,
                                                              const Tensor& out, const Tensor& lse,
                                                              const OptTensor& bias, double,
                                                              bool causal, std::optional<double>,
                                                              bool gqa) {
  const rules::SymShape shape = rules::sdpa("sdpa_backward", q, k, v, bias, causal, gqa);
  rules::check_same_device("sdpa_backward", q, "q",
                           {{&dout, "dout"}, {&out, "out"}, {&lse, "logsumexp"}});
  rules::check_grad("sdpa_backward", dout, "dout", shape);
  rules::check_grad("sdpa_backward", out, "out", shape);
  rules::check_grad("sdpa_backward", lse, "logsumexp", {shape[0], shape[1], shape[2]});
  return {empty_grad_bhsd(q), empty_grad_bhsd(k), empty_grad_bhsd(v),
          has(bias) ? at::empty_symint(bias->sym_sizes(), bias->options()) : Tensor()};
}

// ---------------------------------------------------------------- autograd

using SdpaSig = std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&,
                                           const OptTensor&, double, bool, std::optional<double>,
                                           bool);
using SdpaBwdSig = std::tuple<Tensor, Tensor, Tensor, Tensor>(const Tensor&, const Tensor&,
                                                              const Tensor&, const Tensor&,
                                                              const Tensor&, const Tensor&,
                                                              const OptTensor&, double, bool,
                                                              std::optional<double>, bool);

class SdpaFn : public torch::autograd::Function<SdpaFn> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& q, const Tensor& k,
                               const Tensor& v, const OptTensor& bias, double dropout_p,
                               bool causal, std::optional<double> scale, bool gqa) {
    static auto op = op_handle<SdpaSig>("dnngraph::sdpa");
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [out, lse] = op.call(q, k, v, bias, dropout_p, causal, scale, gqa);
    ctx->save_for_backward({q, k, v, out, lse, value_or_undefined(bias)});
    ctx->saved_data["dropout_p"] = dropout_p;
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["scale"] = scale ? c10::IValue(*scale) : c10::IValue();
    ctx->saved_data["gqa"] = gqa;
    ctx->mark_non_differentiable({lse});
    // No zeros made for the gradients of unused outputs: backward takes undefined ones.
    ctx->set_materialize_grads(false);
    return {out, lse};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static auto op = op_handle<SdpaBwdSig>("dnngraph::sdpa_backward");
    const variable_list none(8);
    if (!grads[0].defined()) return none;
    auto s = ctx->get_saved_variables();
    auto& d = ctx->saved_data;
    std::optional<double> scale;
    if (!d["scale"].isNone()) scale = d["scale"].toDouble();
    auto [dq, dk, dv, db] =
        op.call(grads[0], s[0], s[1], s[2], s[3], s[4], opt(s[5]), d["dropout_p"].toDouble(),
                d["causal"].toBool(), scale, d["gqa"].toBool());
    variable_list r = none;
    r[0] = dq, r[1] = dk, r[2] = dv;
    if (s[5].defined() && ctx->needs_input_grad(3)) r[3] = db;
    return r;
  }
};

std::tuple<Tensor, Tensor> sdpa_autograd(const Tensor& q, const Tensor& k, const Tensor& v,
                                         const OptTensor& bias, double dropout_p, bool causal,
                                         std::optional<double> scale, bool gqa) {
  rules::refuse_forward_ad(
      "sdpa", {{&q, "q"}, {&k, "k"}, {&v, "v"}, {has(bias) ? &*bias : nullptr, "attn_bias"}});
  if (!wants_grad(q, k, v, bias)) {
    static auto op = op_handle<SdpaSig>("dnngraph::sdpa");
    at::AutoDispatchBelowADInplaceOrView guard;
    return op.call(q, k, v, bias, dropout_p, causal, scale, gqa);
  }
  auto r = SdpaFn::apply(q, k, v, bias, dropout_p, causal, scale, gqa);
  return {r[0], r[1]};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(dnngraph, m) {
  m.def(
      "sdpa(Tensor q, Tensor k, Tensor v, Tensor? attn_bias=None, float dropout_p=0.0, "
      "bool is_causal=False, float? scale=None, bool enable_gqa=False) -> (Tensor, Tensor)");
  m.def(
      "sdpa_backward(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor logsumexp, "
      "Tensor? attn_bias, float dropout_p, bool is_causal, float? scale, bool enable_gqa) -> "
      "(Tensor, Tensor, Tensor, Tensor)");
}

// The same kernels serve CPU (reference engine) and CUDA (cuDNN): the handle follows the
// tensors' device.
namespace {
void impl_devices(torch::Library& m) {
  m.impl("sdpa", &sdpa);
  m.impl("sdpa_backward", &sdpa_backward);
}
}  // namespace
TORCH_LIBRARY_IMPL(dnngraph, CPU, m) { impl_devices(m); }
TORCH_LIBRARY_IMPL(dnngraph, CUDA, m) { impl_devices(m); }
TORCH_LIBRARY_IMPL(dnngraph, Meta, m) {
  m.impl("sdpa", rules::meta_kernel(&sdpa_meta));
  m.impl("sdpa_backward", rules::meta_kernel(&sdpa_backward_meta));
}
TORCH_LIBRARY_IMPL(dnngraph, Autograd, m) { m.impl("sdpa", &sdpa_autograd); }

}  // namespace dnngraph::torch_ops
