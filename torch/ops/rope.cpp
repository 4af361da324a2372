// dnngraph::rope: rotary position embedding (the rotate-half form of GPT-NeoX and Llama) as one
// graph of pointwise ops. With x1 = x[..., :D/2], x2 = x[..., D/2:] (strided views of x, no
// copy) and cos, sin [S, D/2]:
//   y1 = x1 * cos - x2 * sin,   y2 = x2 * cos + x1 * sin.
// The backward is the inverse rotation (sin negated), the same graph with the signs swapped.
// x is [B, H, S, D] with any strides (e.g. the head split of a projection); y is stored
// [B, S, H, D] when x's heads are interleaved with its positions (op_support.hpp, empty_bhsd),
// else contiguous: attention then keeps that layout and merging heads stays a view.
// cos and sin are constants of the positions: they get no gradient.
#include "core/op_support.hpp"
#include "core/shape_rules.hpp"

namespace dnngraph::torch_ops {
namespace {

enum Uid : int64_t { X1 = 1, X2 = 2, COS = 3, SIN = 4, Y1 = 100, Y2 = 101 };

void check_rope(const char* op, const Tensor& x, const Tensor& cos, const Tensor& sin) {
  rules::rope(op, x, cos, sin);
  check_device(op, x, "x", {{&cos, "cos"}, {&sin, "sin"}});
  data_type_of(x, op, "x");
  data_type_of(cos, op, "cos");
  check_same_dtype(op, cos, "cos", sin, "sin");
}

// y = rotate(x) (inverse: by -angle) through one pointwise graph.
Tensor rotate(const char* op, const Tensor& x, const Tensor& cos_in, const Tensor& sin_in,
              bool inverse) {
  const int64_t half = x.size(3) / 2;
  Tensor y = empty_bhsd(x, x.sym_size(3), x.options());
  if (y.numel() == 0) return y;
  const int64_t b = x.size(0), h = x.size(1), s = x.size(2), d = x.size(3);
  // cuDNN 9.19 plans this graph when cos and sin broadcast over one dimension, not over two
  // (batch and heads). Where the batch and heads of x and y merge (contiguous x), the graph is
  // 3-d, [B*H, S, D/2] with cos and sin [1, S, D/2]; else (a head split of [B, S, H*D]) it is
  // 4-d with cos and sin repeated over the batch, [B, 1, S, D/2] (B*S*D/2 elements against x's
  // B*H*S*D, one table per call: the op is a pure function of its inputs). Every engine gets
  // the same graph.
  const auto merges = [&](const Tensor& t) {
    return b == 1 || h == 1 || t.stride(0) == h * t.stride(1);
  };
  const bool flat = merges(x) && merges(y);
  const Tensor xg = flat ? x.view({b * h, s, d}) : x, yg = flat ? y.view({b * h, s, d}) : y;
  const auto table = [&](const Tensor& t) {
    const Tensor v = t.contiguous();
    return flat ? v.view({1, s, half})
                : v.view({1, 1, s, half}).expand({b, 1, s, half}).contiguous();
  };
  const Tensor cos = table(cos_in), sin = table(sin_in);
  const Tensor x1 = xg.narrow(-1, 0, half), x2 = xg.narrow(-1, half, half);
  const Tensor y1 = yg.narrow(-1, 0, half), y2 = yg.narrow(-1, half, half);
  // The second halves start D/2 elements in: an engine that needs 16-byte aligned tensors (cuDNN)
  // cannot take them when D/2 elements are fewer bytes than that.
  const bool aligned =
      x.device().is_cpu() || ((half * x.element_size()) % kAlignmentBytes == 0 && aligned16(x));
  Key key(op);
  key.add(x1).add(x2).add(cos).add(sin).add(inverse).add_device(x.device());
  std::shared_ptr<const BuiltGraph> g;
  if (aligned)
    g = cached_graph(key, x.device(), op, [&](Graph& gr) {
      set_numerics(gr, x);
      ir::Tensor a = tensor_like(gr, X1, "x1", x1), b = tensor_like(gr, X2, "x2", x2);
      ir::Tensor c = tensor_like(gr, COS, "cos", cos), s = tensor_like(gr, SIN, "sin", sin);
      // forward: y1 = a c - b s, y2 = b c + a s; inverse: y1 = a c + b s, y2 = b c - a s.
      ir::Tensor ac = gr.mul(a, c), bs = gr.mul(b, s), bc = gr.mul(b, c), as = gr.mul(a, s);
      ir::Tensor o1 = inverse ? gr.add(ac, bs) : gr.binary(PointwiseMode::Sub, ac, bs);
      ir::Tensor o2 = inverse ? gr.binary(PointwiseMode::Sub, bc, as) : gr.add(bc, as);
      output_like(o1, Y1, "y1", y1);
      output_like(o2, Y2, "y2", y2);
    });
  if (!g || !g->graph) {
    note_aten_part(op, "the rotation",
                   g ? g->unsupported
                     : make_error(ErrorCode::NotSupported, "the halves of 'x' (D/2 = ", half,
                                  " elements) are not 16-byte aligned for the GPU engine"));
    // Three kernels, no temporaries: y = x * cos over both halves at once (cos broadcast over
    // a pair dimension, a view), then each half adds its partner times +-sin in place.
    const double sign = inverse ? -1.0 : 1.0;
    Tensor pairs = yg.unflatten(-1, {2, half});
    at::mul_out(pairs, xg.unflatten(-1, {2, half}), cos.unsqueeze(-2));
    y1.addcmul_(x2, sin, -sign);
    y2.addcmul_(x1, sin, sign);
    return y;
  }
  execute(*g, x.device(), op,
          {{X1, &x1}, {X2, &x2}, {COS, &cos}, {SIN, &sin}, {Y1, &y1}, {Y2, &y2}});
  return y;
}

Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  check_rope("rope", x, cos, sin);
  return rotate("rope", rules::engine_operand(x), cos, sin, false);
}
Tensor rope_backward(const Tensor& dy, const Tensor& cos, const Tensor& sin) {
  check_rope("rope_backward", dy, cos, sin);
  return rotate("rope_backward", rules::engine_operand(dy), cos, sin, true);
}

Tensor rope_meta(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  rules::rope("rope", x, cos, sin);
  return empty_bhsd(x, x.sym_size(3), x.options());
}
Tensor rope_backward_meta(const Tensor& dy, const Tensor& cos, const Tensor& sin) {
  rules::rope("rope_backward", dy, cos, sin);
  return empty_bhsd(dy, dy.sym_size(3), dy.options());
}

using RopeSig = Tensor(const Tensor&, const Tensor&, const Tensor&);

class RopeFn : public torch::autograd::Function<RopeFn> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& x, const Tensor& cos,
                               const Tensor& sin) {
    static auto op = op_handle<RopeSig>("dnngraph::rope");
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({cos, sin});
    return {op.call(x, cos, sin)};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static auto op = op_handle<RopeSig>("dnngraph::rope_backward");
    if (!grads[0].defined()) return {Tensor(), Tensor(), Tensor()};
    auto s = ctx->get_saved_variables();
    return {op.call(grads[0], s[0], s[1]), Tensor(), Tensor()};
  }
};

Tensor rope_autograd(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  rules::refuse_forward_ad("rope", {{&x, "x"}, {&cos, "cos"}, {&sin, "sin"}});
  TORCH_CHECK_VALUE(!wants_grad(cos, sin), "dnngraph::rope: 'cos' and 'sin' require grad, but ",
                    "rope gives no gradient for them (they are constants of the positions); "
                    "detach them");
  if (!wants_grad(x)) {
    static auto op = op_handle<RopeSig>("dnngraph::rope");
    at::AutoDispatchBelowADInplaceOrView guard;
    return op.call(x, cos, sin);
  }
  return RopeFn::apply(x, cos, sin)[0];
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(dnngraph, m) {
  m.def("rope(Tensor x, Tensor cos, Tensor sin) -> Tensor");
  m.def("rope_backward(Tensor dy, Tensor cos, Tensor sin) -> Tensor");
}

// The same kernels serve CPU (reference engine) and CUDA (cuDNN).
namespace {
void impl_devices(torch::Library& m) {
  m.impl("rope", &rope);
  m.impl("rope_backward", &rope_backward);
}
}  // namespace
TORCH_LIBRARY_IMPL(dnngraph, CPU, m) { impl_devices(m); }
TORCH_LIBRARY_IMPL(dnngraph, CUDA, m) { impl_devices(m); }
TORCH_LIBRARY_IMPL(dnngraph, Meta, m) {
  m.impl("rope", rules::meta_kernel(&rope_meta));
  m.impl("rope_backward", rules::meta_kernel(&rope_backward_meta));
}
TORCH_LIBRARY_IMPL(dnngraph, Autograd, m) { m.impl("rope", &rope_autograd); }

}  // namespace dnngraph::torch_ops
