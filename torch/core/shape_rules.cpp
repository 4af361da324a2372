#include "core/shape_rules.hpp"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <string>

#include "core/runtime.hpp"  // parse_act

namespace dnngraph::torch_ops::rules {

using at::Tensor;
using c10::SymInt;

namespace {

bool has(const OptTensor& t) { return t && t->defined(); }

// `bias` broadcastable (trailing dims aligned, each 1 or equal) to `out`.
void check_bias(const char* op, const char* name, const Tensor& bias, const SymShape& out) {
  const auto bs = bias.sym_sizes();
  const size_t rank = out.size();
  TORCH_CHECK_VALUE(bs.size() <= rank, "dnngraph::", op, ": '", name, "' of shape ", bs,
                    " has more dims than the output ", c10::SymIntArrayRef(out),
                    "; give a bias broadcastable to the output");
  for (size_t i = 0; i < bs.size(); ++i) {
    const SymInt& want = out[rank - bs.size() + i];
    TORCH_CHECK_VALUE(bs[i] == 1 || bs[i] == want, "dnngraph::", op, ": '", name, "' of shape ", bs,
                      " does not broadcast to the output ", c10::SymIntArrayRef(out), " (dim ", i,
                      " is ", bs[i], "; expected 1 or ", want, ")");
  }
}

}  // namespace

void check_same_device(const char* op, const Tensor& x, const char* x_name,
                       std::initializer_list<std::pair<const Tensor*, const char*>> others) {
  const at::Device d = x.device();
  for (const auto& [t, name] : others)
    if (t && t->defined())
      TORCH_CHECK_VALUE(t->device() == d, "dnngraph::", op, ": tensor '", name, "' is on ",
                        t->device(), " but '", x_name, "' is on ", d,
                        "; move them to one device (a parameter still on 'meta' must be "
                        "materialised first, e.g. with module.to_empty() and an init)");
}

SymShape linear(const char* op, const Tensor& x, const Tensor& w, const OptTensor& bias) {
  check_same_device(op, x, "x", {{&w, "weight"}, {has(bias) ? &*bias : nullptr, "bias"}});
  TORCH_CHECK_VALUE(w.dim() == 2, "dnngraph::", op,
                    ": 'weight' must be 2-D [out_features, in_features]; got shape ",
                    w.sym_sizes());
  TORCH_CHECK_VALUE(x.dim() >= 1, "dnngraph::", op,
                    ": 'x' must have at least 1 dim [..., in_features]; got a 0-dim tensor");
  TORCH_CHECK_VALUE(x.sym_size(-1) == w.sym_size(1), "dnngraph::", op, ": 'x' of shape ",
                    x.sym_sizes(), " does not end with in_features = ", w.sym_size(1),
                    " of 'weight' ", w.sym_sizes(), "; give x [..., ", w.sym_size(1), "]");
  if (has(bias))
    TORCH_CHECK_VALUE(bias->dim() == 1 && bias->sym_size(0) == w.sym_size(0), "dnngraph::", op,
                      ": 'bias' must be [out_features] = [", w.sym_size(0), "]; got shape ",
                      bias->sym_sizes());
  SymShape out(x.sym_sizes().begin(), x.sym_sizes().end() - 1);
  out.push_back(w.sym_size(0));
  return out;
}

SymShape matmul_epilogue(const char* op, const Tensor& a, const Tensor& b, const OptTensor& bias) {
  check_same_device(op, a, "a", {{&b, "b"}, {has(bias) ? &*bias : nullptr, "bias"}});
  TORCH_CHECK_VALUE((a.dim() == 2 || a.dim() == 3) && a.dim() == b.dim(), "dnngraph::", op,
                    ": 'a' and 'b' must both be 2-D [M, K] / [K, N] or both 3-D [B, M, K] / "
                    "[B|1, K, N]; got 'a' ",
                    a.sym_sizes(), " and 'b' ", b.sym_sizes());
  const bool two_d = a.dim() == 2;
  const int64_t r = a.dim();
  TORCH_CHECK_VALUE(a.sym_size(r - 1) == b.sym_size(r - 2), "dnngraph::", op, ": 'a' of shape ",
                    a.sym_sizes(), " and 'b' of shape ", b.sym_sizes(),
                    " disagree on K (a's last dim ", a.sym_size(r - 1), ", b's dim ", r - 2, " ",
                    b.sym_size(r - 2), "); give a [.., M, K] and b [.., K, N]");
  SymShape out;
  if (!two_d) {
    const SymInt ba = a.sym_size(0), bb = b.sym_size(0);
    TORCH_CHECK_VALUE(ba == bb || ba == 1 || bb == 1, "dnngraph::", op, ": batch dims of 'a' ",
                      a.sym_sizes(), " and 'b' ", b.sym_sizes(),
                      " do not broadcast; give equal batches or a batch of 1");
    out.push_back(ba == 1 ? bb : ba);
  }
  out.push_back(a.sym_size(r - 2));
  out.push_back(b.sym_size(r - 1));
  if (has(bias)) {
    // The fused graph takes a bias of at most 3 dims against the 3-D form of the output.
    SymShape out3 = out;
    if (two_d) out3.insert(out3.begin(), SymInt(1));
    TORCH_CHECK_VALUE(bias->dim() <= 3, "dnngraph::", op, ": 'bias' has ", bias->dim(),
                      " dims; expected at most 3, broadcastable to ", c10::SymIntArrayRef(out));
    check_bias(op, "bias", *bias, two_d && bias->dim() == 3 ? out3 : out);
  }
  return out;
}

SymShape conv2d(const char* op, const Tensor& x, const Tensor& w, const OptTensor& bias,
                at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                int64_t groups) {
  check_same_device(op, x, "x", {{&w, "weight"}, {has(bias) ? &*bias : nullptr, "bias"}});
  TORCH_CHECK_VALUE(x.dim() == 4 && w.dim() == 4, "dnngraph::", op,
                    ": 'x' and 'weight' must be 4-D (N, C, H, W) and (K, C/groups, R, S); got ",
                    x.sym_sizes(), " and ", w.sym_sizes());
  for (const auto& [v, name, least] :
       {std::tuple{stride, "stride", 1}, {padding, "padding", 0}, {dilation, "dilation", 1}}) {
    TORCH_CHECK_VALUE(v.size() == 2, "dnngraph::", op, ": '", name, "' needs 2 values; got ", v);
    TORCH_CHECK_VALUE(v[0] >= least && v[1] >= least, "dnngraph::", op, ": '", name, "' is ", v,
                      "; each value must be >= ", least);
  }
  TORCH_CHECK_VALUE(groups >= 1, "dnngraph::", op, ": 'groups' is ", groups, "; must be >= 1");
  TORCH_CHECK_VALUE(
      x.sym_size(1) == w.sym_size(1) * groups && w.sym_size(0) % groups == 0, "dnngraph::", op,
      ": 'x' has ", x.sym_size(1), " channels and 'weight' ", w.sym_sizes(),
      " with groups=", groups,
      "; expected C = weight.size(1) * groups and weight.size(0) divisible by groups");
  if (has(bias))
    TORCH_CHECK_VALUE(bias->dim() == 1 && bias->sym_size(0) == w.sym_size(0), "dnngraph::", op,
                      ": 'bias' must be [", w.sym_size(0), "]; got shape ", bias->sym_sizes());
  SymShape out{x.sym_size(0), w.sym_size(0), 0, 0};
  for (int i = 0; i < 2; ++i) {
    // The padded extent minus the dilated filter's: the output is this / stride + 1. With
    // concrete sizes, computed without wrapping int64.
    const auto in = x.sym_size(2 + i).maybe_as_int(), ker = w.sym_size(2 + i).maybe_as_int();
    if (in && ker) {
      int64_t padded = 0, reach = 0, concrete = 0;
      const bool wraps = __builtin_mul_overflow(padding[i], 2, &padded) ||
                         __builtin_add_overflow(padded, *in, &padded) ||
                         __builtin_mul_overflow(dilation[i], *ker - 1, &reach) ||
                         __builtin_sub_overflow(padded, reach + 1, &concrete);
      TORCH_CHECK_VALUE(!wraps, "dnngraph::", op, ": padding ", padding, " and dilation ", dilation,
                        " with 'x' ", x.sym_sizes(), " and 'weight' ", w.sym_sizes(),
                        " give sizes beyond int64 along spatial dim ", i,
                        "; use smaller padding or dilation");
    }
    const SymInt span =
        x.sym_size(2 + i) + 2 * padding[i] - dilation[i] * (w.sym_size(2 + i) - 1) - 1;
    TORCH_CHECK_VALUE(span >= 0, "dnngraph::", op, ": the output would be empty: 'x' ",
                      x.sym_sizes(), " is too small for 'weight' ", w.sym_sizes(), " with padding ",
                      padding, " and dilation ", dilation, " along spatial dim ", i,
                      "; pad more or use a smaller filter");
    out[2 + i] = span / stride[i] + 1;
  }
  return out;
}

SymShape sdpa(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
              const OptTensor& bias, bool causal, bool gqa) {
  check_same_device(op, q, "q",
                    {{&k, "k"}, {&v, "v"}, {has(bias) ? &*bias : nullptr, "attn_bias"}});
  TORCH_CHECK_VALUE(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "dnngraph::", op,
                    ": 'q', 'k', 'v' must be 4-D [B, H, S, D]; got ", q.sym_sizes(), ", ",
                    k.sym_sizes(), ", ", v.sym_sizes());
  TORCH_CHECK_VALUE(k.sym_size(0) == q.sym_size(0) && v.sym_size(0) == q.sym_size(0) &&
                        k.sym_size(3) == q.sym_size(3) && v.sym_size(2) == k.sym_size(2) &&
                        v.sym_size(1) == k.sym_size(1),
                    "dnngraph::", op, ": shapes 'q' ", q.sym_sizes(), ", 'k' ", k.sym_sizes(),
                    ", 'v' ", v.sym_sizes(),
                    " do not agree (q [B, H, S_q, D], k [B, H_kv, S_kv, D], v [B, H_kv, S_kv, "
                    "D_v])");
  const SymInt hq = q.sym_size(1), hk = k.sym_size(1);
  if (!(hq == hk)) {
    TORCH_CHECK_VALUE(gqa, "dnngraph::", op, ": 'q' has ", hq, " heads and 'k'/'v' ", hk,
                      "; pass enable_gqa=True for grouped-query attention");
    TORCH_CHECK_VALUE(hk >= 1, "dnngraph::", op, ": 'k' and 'v' have 0 heads but 'q' has ", hq,
                      "; grouped-query attention needs at least one k/v head");
    TORCH_CHECK_VALUE(hq % hk == 0, "dnngraph::", op, ": 'q' has ", hq, " heads and 'k'/'v' ", hk,
                      "; with enable_gqa, q's heads must be a multiple of k's");
  }
  TORCH_CHECK_VALUE(!(causal && has(bias)), "dnngraph::", op,
                    ": give either attn_bias or is_causal, not both (as torch)");
  if (has(bias)) {
    TORCH_CHECK_VALUE(bias->dim() <= 4, "dnngraph::", op, ": attn_bias has ", bias->dim(),
                      " dims; expected at most 4");
    const SymShape scores{q.sym_size(0), hq, q.sym_size(2), k.sym_size(2)};
    const auto bs = bias->sym_sizes();
    const size_t lead = 4 - bs.size();
    for (size_t i = 0; i < bs.size(); ++i) {
      const size_t d = lead + i;
      TORCH_CHECK_VALUE(bs[i] == scores[d] || (d < 2 && bs[i] == 1), "dnngraph::", op,
                        ": attn_bias of shape ", bs, " must be [B|1, H|1, S_q, S_kv] = [",
                        scores[0], "|1, ", scores[1], "|1, ", scores[2], ", ", scores[3], "]");
    }
  }
  return {q.sym_size(0), hq, q.sym_size(2), v.sym_size(3)};
}

SymShape conv2d_add(const char* op, const Tensor& x, const Tensor& w, const OptTensor& bias,
                    const Tensor& res, at::IntArrayRef stride, at::IntArrayRef padding,
                    at::IntArrayRef dilation, int64_t groups) {
  SymShape out = conv2d(op, x, w, bias, stride, padding, dilation, groups);
  check_same_device(op, x, "x", {{&res, "residual"}});
  bool same = res.dim() == 4;
  for (int64_t i = 0; same && i < 4; ++i) same = res.sym_size(i) == out[i];
  TORCH_CHECK_VALUE(same, "dnngraph::", op, ": 'residual' has shape ", res.sym_sizes(),
                    "; expected the convolution's output shape ", c10::SymIntArrayRef(out),
                    " (give the residual of that shape)");
  return out;
}

SymShape residual_block(const char* op, const Tensor& x, const Tensor& w1, const OptTensor& b1,
                        const Tensor& w2, const OptTensor& b2) {
  TORCH_CHECK_VALUE(x.dim() == 4, "dnngraph::", op, ": 'x' must be [N, C, H, W]; got shape ",
                    x.sym_sizes());
  SymShape want(x.sym_sizes().begin(), x.sym_sizes().end());
  for (auto [w, b, wn, bn] : {std::tuple{&w1, &b1, "w1", "b1"}, {&w2, &b2, "w2", "b2"}}) {
    TORCH_CHECK_VALUE(
        w->dim() == 4 && w->sym_size(0) == x.sym_size(1) && w->sym_size(1) == x.sym_size(1) &&
            w->sym_size(2) == w->sym_size(3) && w->sym_size(2) % 2 == 1,
        "dnngraph::", op, ": '", wn, "' must be [C, C, k, k] with C = ", x.sym_size(1),
        " (x's channels) and an odd k, so that the convolution "
        "keeps x's shape; got shape ",
        w->sym_sizes());
    TORCH_CHECK_VALUE(!b->has_value() || !(*b)->defined() ||
                          ((*b)->dim() == 1 && (*b)->sym_size(0) == x.sym_size(1)),
                      "dnngraph::", op, ": '", bn, "' must be [C] with C = ", x.sym_size(1),
                      "; got shape ", (*b)->sym_sizes());
    const int64_t p = w->sym_size(2).guard_int(__FILE__, __LINE__) / 2;
    check_same_device(op, x, "x", {{w, wn}});
    const SymShape out = conv2d(op, x, *w, *b, {1, 1}, {p, p}, {1, 1}, 1);
    TORCH_CHECK_VALUE(out == want, "dnngraph::", op, ": '", wn, "' gives an output of shape ",
                      c10::SymIntArrayRef(out), "; the block needs x's shape ", x.sym_sizes());
  }
  return want;
}

void rope(const char* op, const Tensor& x, const Tensor& cos, const Tensor& sin) {
  check_same_device(op, x, "x", {{&cos, "cos"}, {&sin, "sin"}});
  TORCH_CHECK_VALUE(x.dim() == 4 && x.sym_size(3) % 2 == 0, "dnngraph::", op,
                    ": 'x' must be [B, H, S, D] with an even D; got ", x.sym_sizes());
  const SymInt s = x.sym_size(2), half = x.sym_size(3) / 2;
  TORCH_CHECK_VALUE(cos.dim() == 2 && cos.sym_size(0) == s && cos.sym_size(1) == half &&
                        sin.dim() == 2 && sin.sym_size(0) == s && sin.sym_size(1) == half,
                    "dnngraph::", op, ": 'cos' and 'sin' must be [S, D/2] = [", s, ", ", half,
                    "] for 'x' ", x.sym_sizes(), "; got ", cos.sym_sizes(), " and ",
                    sin.sym_sizes());
}

SymShape swiglu(const char* op, const Tensor& z) {
  TORCH_CHECK_VALUE(z.dim() >= 1 && z.sym_size(-1) % 2 == 0, "dnngraph::", op,
                    ": 'z' must end with an even dim 2F (the gate's half, then the up half); "
                    "got shape ",
                    z.sym_sizes());
  SymShape out(z.sym_sizes().begin(), z.sym_sizes().end());
  out.back() = out.back() / 2;
  return out;
}

void swiglu_backward(const char* op, const Tensor& dy, const Tensor& z) {
  check_same_device(op, z, "z", {{&dy, "dy"}});
  check_grad(op, dy, "dy", swiglu(op, z));
}

void add_rms_norm(const char* op, const Tensor& x, const Tensor& res, c10::SymIntArrayRef shape,
                  const OptTensor& w) {
  check_same_device(op, x, "x", {{&res, "residual"}});
  norm(op, x, shape, w, std::nullopt);
  check_grad(op, res, "residual", SymShape(x.sym_sizes().begin(), x.sym_sizes().end()));
}

void activation_backward(const char* op, const Tensor& dy, const Tensor& saved,
                         c10::string_view act) {
  check_same_device(op, dy, "dy", {{&saved, "saved"}});
  if (parse_act(op, std::string_view(act.data(), act.size())) == Act::None) return;
  check_grad(op, saved, "saved", SymShape(dy.sym_sizes().begin(), dy.sym_sizes().end()));
  TORCH_CHECK_TYPE(saved.scalar_type() == dy.scalar_type(), "dnngraph::", op,
                   ": tensor 'saved' has dtype ", saved.scalar_type(), " but 'dy' has ",
                   dy.scalar_type(), "; give both the same dtype");
}

void check_saved(const char* op, const OptTensor& saved, const Tensor& x, const char* x_name,
                 const SymShape& want) {
  if (!has(saved)) return;
  check_same_device(op, x, x_name, {{&*saved, "saved"}});
  if (saved->sym_numel() == 0) return;  // "not saved": the backward recomputes it
  check_grad(op, *saved, "saved", want);
  TORCH_CHECK_TYPE(saved->scalar_type() == x.scalar_type(), "dnngraph::", op,
                   ": tensor 'saved' has dtype ", saved->scalar_type(), " but '", x_name, "' has ",
                   x.scalar_type(), "; give both the same dtype");
}

void check_stat(const char* op, const Tensor& stat, const char* name, const Tensor& x,
                const char* x_name, const SymInt& want) {
  check_same_device(op, x, x_name, {{&stat, name}});
  TORCH_CHECK_VALUE(stat.sym_numel() == want, "dnngraph::", op, ": '", name, "' has shape ",
                    stat.sym_sizes(), " (", stat.sym_numel(),
                    " values); expected one value per row, ", want,
                    " (pass the statistics the forward returned)");
}

void check_grad(const char* op, const Tensor& t, const char* name, const SymShape& want) {
  bool same = t.dim() == static_cast<int64_t>(want.size());
  for (size_t i = 0; same && i < want.size(); ++i)
    same = t.sym_size(static_cast<int64_t>(i)) == want[i];
  TORCH_CHECK_VALUE(same, "dnngraph::", op, ": '", name, "' has shape ", t.sym_sizes(),
                    "; the forward's output is ", c10::SymIntArrayRef(want));
}

void norm(const char* op, const Tensor& x, c10::SymIntArrayRef shape, const OptTensor& w,
          const OptTensor& b) {
  check_same_device(op, x, "x",
                    {{has(w) ? &*w : nullptr, "weight"}, {has(b) ? &*b : nullptr, "bias"}});
  const int64_t n = static_cast<int64_t>(shape.size());
  TORCH_CHECK_VALUE(n >= 1, "dnngraph::", op, ": normalized_shape is empty; give at least one dim");
  bool fits = x.dim() >= n;
  for (int64_t i = 0; fits && i < n; ++i) fits = x.sym_size(x.dim() - n + i) == shape[i];
  TORCH_CHECK_VALUE(fits, "dnngraph::", op, ": input 'x' of shape ", x.sym_sizes(),
                    " does not end with normalized_shape ", shape);
  for (const auto& [t, name] : {std::pair{&w, "weight"}, std::pair{&b, "bias"}})
    if (has(*t)) {
      bool same = (*t)->dim() == n;
      for (int64_t i = 0; same && i < n; ++i) same = (*t)->sym_size(i) == shape[i];
      TORCH_CHECK_VALUE(same, "dnngraph::", op, ": '", name, "' has shape ", (*t)->sym_sizes(),
                        " but normalized_shape is ", shape);
    }
}

void refuse_forward_ad(const char* op,
                       std::initializer_list<std::pair<const Tensor*, const char*>> inputs) {
  for (const auto& [t, name] : inputs)
    TORCH_CHECK_NOT_IMPLEMENTED(
        !t || !has_tangent(*t), "dnngraph::", op, ": '", name,
        "' has a forward-mode tangent, but the op has no forward-mode derivative "
        "(torch.autograd.forward_ad, torch.func.jvp and jacfwd); use reverse mode (backward(), "
        "torch.autograd.grad), or the matching torch op");
}

at::Tensor engine_operand(const Tensor& t) {
  if (!t.defined() || t.numel() == 0) return t;
  const auto sizes = t.sizes(), strides = t.strides();
  bool zero_on_unit = false;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (strides[i] >= 1) continue;
    if (sizes[i] > 1) return engine_operand(t.contiguous());
    zero_on_unit = true;
  }
  if (!zero_on_unit) return t;
  std::vector<int64_t> s(strides.begin(), strides.end());
  for (int64_t& v : s) v = std::max<int64_t>(v, 1);
  return t.as_strided(sizes, s);
}

namespace {

// The user's name of a schema argument.
const char* display_name(const std::string& arg) { return arg == "w" ? "weight" : arg.c_str(); }

// Calls the Meta kernel, then checks that every tensor argument is on one device.
class DeviceCheckedMeta final : public c10::OperatorKernel {
 public:
  explicit DeviceCheckedMeta(c10::KernelFunction inner) : inner_(std::move(inner)) {}
  void operator()(const c10::OperatorHandle& handle, c10::DispatchKeySet keys,
                  torch::jit::Stack* stack) {
    const auto& schema = handle.schema();
    const auto& args = schema.arguments();
    std::vector<std::pair<Tensor, size_t>> tensors;  // (tensor, argument index)
    const size_t first = stack->size() - args.size();
    for (size_t i = 0; i < args.size(); ++i) {
      const c10::IValue& v = (*stack)[first + i];
      if (v.isTensor()) {
        tensors.emplace_back(v.toTensor(), i);
      } else if (v.isTensorList()) {
        for (const Tensor& t : v.toTensorVector()) tensors.emplace_back(t, i);
      } else if (v.isOptionalTensorList()) {
        for (const std::optional<Tensor> t : v.toOptionalTensorList())
          if (t) tensors.emplace_back(*t, i);
      }
    }
    inner_.callBoxed(handle, keys, stack);  // its own rules first, with their messages
    const Tensor* ref = nullptr;
    size_t ref_arg = 0;
    for (const auto& [t, i] : tensors) {
      if (!t.defined()) continue;
      if (!ref) {
        ref = &t, ref_arg = i;
        continue;
      }
      TORCH_CHECK_VALUE(t.device() == ref->device(), "dnngraph::", schema.name().substr(10),
                        ": tensor '", display_name(args[i].name()), "' is on ", t.device(),
                        " but '", display_name(args[ref_arg].name()), "' is on ", ref->device(),
                        "; move them to one device (a parameter still on 'meta' must be "
                        "materialised first, e.g. with module.to_empty() and an init)");
    }
  }

 private:
  c10::KernelFunction inner_;
};

}  // namespace

torch::CppFunction meta_kernel_boxed(c10::KernelFunction inner) {
  return torch::CppFunction::makeFromBoxedFunctor(
      std::make_unique<DeviceCheckedMeta>(std::move(inner)));
}

}  // namespace dnngraph::torch_ops::rules
