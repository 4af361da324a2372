// dnngraph::residual_block: the ResNet basic block without batch norm, as one op,
//   h = relu(conv(x, w1) + b1),  y = relu(x + conv(h, w2) + b2)
// with k x k convolutions (k odd), stride 1 and padding k/2, C channels in and out.
//   forward : conv2d_bias_act's graph for h, conv2d_bias_add_act's for y (two graphs).
//   backward: the block's two convolutions are one op's, so the derivative of the inner relu
//             joins the outer convolution's dgrad as its epilogue and the residual's gradient
//             joins the inner one's, which separate ops cannot do:
//               dZ2 = relu'(y) * dY                              (activation_backward)
//               dW2, db2 = wgrad(dZ2, h), sum(dZ2)                (conv2d_bias_act's graphs)
//               dZ1 [, db1] = relu'(h) * dgrad(dZ2, W2) [, sum]   (one graph)
//               dW1 [, db1] = wgrad(dZ1, x) [, sum(dZ1)]          (conv2d_bias_act's graphs)
//               dX = dgrad(dZ1, W1) + dZ2                         (one graph)
//             Where the engine has no plan for a fused graph, its parts run as the separate
//             graphs (dgrad, then the activation derivative or the add), logged once at info
//             level. Layouts as conv2d_bias_act: channels_last end to end.
#include "core/op_support.hpp"
#include "core/shape_rules.hpp"

namespace dnngraph::torch_ops {
namespace {

enum Uid : int64_t { DZ = 1, W = 2, H = 3, RES = 4, DZ1 = 100, DB = 101, DX = 102 };

using Grads = std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor>;

const std::vector<int64_t> kOnes{1, 1};

std::vector<int64_t> same_padding(const Tensor& w) { return {w.size(2) / 2, w.size(3) / 2}; }

void check_block(const char* op, const Tensor& x, const Tensor& w1, const OptTensor& b1,
                 const Tensor& w2, const OptTensor& b2) {
  rules::residual_block(op, x, w1, b1, w2, b2);
  check_device(op, x, "x",
               {{&w1, "w1"},
                {&w2, "w2"},
                {has(b1) ? &*b1 : nullptr, "b1"},
                {has(b2) ? &*b2 : nullptr, "b2"}});
  data_type_of(x, op, "x");
  check_same_dtype(op, x, "x", w1, "w1");
  check_same_dtype(op, x, "x", w2, "w2");
  if (has(b1)) check_same_dtype(op, x, "x", *b1, "b1");
  if (has(b2)) check_same_dtype(op, x, "x", *b2, "b2");
}

// (y, h): the block's output and its inner activation (what the backward reads).
std::tuple<Tensor, Tensor> residual_block_train(const Tensor& x, const Tensor& w1,
                                                const OptTensor& b1, const Tensor& w2,
                                                const OptTensor& b2) {
  const char* op = "residual_block";
  check_block(op, x, w1, b1, w2, b2);
  static auto conv = op_handle<ConvSig>("dnngraph::conv2d_bias_act");
  static auto conv_add = op_handle<ConvAddSig>("dnngraph::conv2d_bias_add_act");
  Tensor h = conv.call(x, w1, b1, kOnes, same_padding(w1), kOnes, 1, "relu");
  Tensor y = conv_add.call(h, w2, b2, x, kOnes, same_padding(w2), kOnes, 1, "relu");
  return {y, h};
}

Tensor residual_block(const Tensor& x, const Tensor& w1, const OptTensor& b1, const Tensor& w2,
                      const OptTensor& b2) {
  return std::get<0>(residual_block_train(x, w1, b1, w2, b2));
}

ir::ConvDgradAttrs dgrad_attrs(const Tensor& w) {
  ir::ConvDgradAttrs a;
  a.set_padding(same_padding(w)).set_stride(kOnes).set_dilation(kOnes);
  return a;
}

// dgrad(dz, w) as a virtual tensor of `like`'s dims and strides.
ir::Tensor dgrad_of(Graph& gr, const Tensor& dz, const char* dz_name, const Tensor& w,
                    const char* w_name, const Tensor& like) {
  ir::Tensor d = gr.conv_dgrad(tensor_like(gr, DZ, dz_name, dz), tensor_like(gr, W, w_name, w),
                               dgrad_attrs(w));
  d->set_dim(like.sizes().vec()).set_stride(like.strides().vec());
  return d;
}

// dZ1 = relu'(h) * dgrad(dZ2, W2), and db1 = sum of dZ1 over N, H, W when db1 is defined (as
// [1, C, 1, 1]), by one graph. False when the engine has no plan for it.
bool dgrad_drelu(const char* op, const Tensor& dz2, const Tensor& w2, const Tensor& h,
                 const Tensor& dz1, const Tensor& db1) {
  Key key("residual_block_dgrad_drelu");
  key.add(dz2).add(w2).add(h).add(dz1).add(db1).add_device(dz2.device());
  auto g = cached_graph(key, dz2.device(), op, [&](Graph& gr) {
    set_numerics(gr, dz2);
    ir::Tensor d = act_backward(gr, Act::Relu, dgrad_of(gr, dz2, "dz2", w2, "w2", h),
                                tensor_like(gr, H, "h", h));
    output_like(d, DZ1, "dz1", dz1);
    if (db1.defined()) output_like(gr.reduction(d, {ReductionMode::Add}), DB, "db1", db1);
  });
  if (!g->graph) {
    note_unfused(op, g->unsupported);
    return false;
  }
  execute(*g, dz2.device(), op, {{DZ, &dz2}, {W, &w2}, {H, &h}, {DZ1, &dz1}, {DB, &db1}});
  return true;
}

// dX = dgrad(dZ1, W1) + dZ2 by one graph. False when the engine has no plan for it.
bool dgrad_add(const char* op, const Tensor& dz1, const Tensor& w1, const Tensor& dz2,
               const Tensor& dx) {
  Key key("residual_block_dgrad_add");
  key.add(dz1).add(w1).add(dz2).add(dx).add_device(dz1.device());
  auto g = cached_graph(key, dz1.device(), op, [&](Graph& gr) {
    set_numerics(gr, dz1);
    ir::Tensor d = dgrad_of(gr, dz1, "dz1", w1, "w1", dx);
    output_like(gr.add(d, tensor_like(gr, RES, "dz2", dz2)), DX, "dx", dx);
  });
  if (!g->graph) {
    note_unfused(op, g->unsupported);
    return false;
  }
  execute(*g, dz1.device(), op, {{DZ, &dz1}, {W, &w1}, {RES, &dz2}, {DX, &dx}});
  return true;
}

Tensor zeros_like_in(const Tensor& t, at::MemoryFormat f) {
  return at::zeros(t.sizes(), t.options().memory_format(f));
}

// mask: x, w1, b1, w2, b2.
Grads residual_block_backward(const Tensor& dy, const Tensor& x_in, const Tensor& w1_in,
                              const OptTensor& b1, const Tensor& w2_in, const OptTensor& b2,
                              const Tensor& h_in, const Tensor& y_in, std::array<bool, 5> mask) {
  const char* op = "residual_block_backward";
  check_block(op, x_in, w1_in, b1, w2_in, b2);
  for (auto [t, name] : {std::pair{&dy, "dy"}, {&h_in, "h"}, {&y_in, "y"}}) {
    rules::check_grad(op, *t, name,
                      rules::SymShape(x_in.sym_sizes().begin(), x_in.sym_sizes().end()));
    check_device(op, x_in, "x", {{t, name}});
    check_same_dtype(op, x_in, "x", *t, name);
  }
  const at::MemoryFormat fmt = conv_format(x_in);
  const bool want_b1 = mask[2] && has(b1), want_b2 = mask[4] && has(b2);
  if (x_in.numel() == 0) {
    return {mask[0] ? zeros_like_in(x_in, fmt) : Tensor(),
            mask[1] ? zeros_like_in(w1_in, fmt) : Tensor(),
            want_b1 ? zeros_like_in(*b1, at::MemoryFormat::Contiguous) : Tensor(),
            mask[3] ? zeros_like_in(w2_in, fmt) : Tensor(),
            want_b2 ? zeros_like_in(*b2, at::MemoryFormat::Contiguous) : Tensor()};
  }
  static auto act_bwd = op_handle<ActBwdSig>("dnngraph::activation_backward");
  static auto conv_bwd = op_handle<ConvBwdSig>("dnngraph::conv2d_bias_act_train_backward");
  auto in = [&](const Tensor& t) { return rules::engine_operand(t.contiguous(fmt)); };
  const Tensor x = in(x_in), w1 = in(w1_in), w2 = in(w2_in), h = in(h_in), y = in(y_in);
  const Tensor dz2 = in(act_bwd.call(dy, y, "relu"));
  // conv2's parameters, from dZ2 and h.
  auto conv_grads = [&](const Tensor& dz, const Tensor& input, const Tensor& w, const OptTensor& b,
                        bool data, bool weight, bool bias) {
    return conv_bwd.call(dz, input, w, b, kOnes, same_padding(w), kOnes, 1, "none", std::nullopt,
                         {data, weight, bias});
  };
  Tensor dw2, db2;
  if (mask[3] || want_b2)
    std::tie(std::ignore, dw2, db2) = conv_grads(dz2, h, w2, b2, false, mask[3], want_b2);
  if (!mask[0] && !mask[1] && !want_b1) return {Tensor(), Tensor(), Tensor(), dw2, db2};
  // dZ1 (with db1 when a graph takes it).
  Tensor dz1 = at::empty(h.sizes(), h.options().memory_format(fmt));
  Tensor db1 = want_b1 ? at::empty({w1.size(0)}, b1->options()) : Tensor();
  bool db1_done = false, dz1_done = false;
  if (!unfused_backward()) {
    if (db1.defined()) {
      // The sum in fp32, [1, C, 1, 1] in channels_last strides: the form cuDNN 9.19 fuses into
      // the dgrad's epilogue (a bf16 or fp16 sum gets no plan).
      const Tensor sum =
          at::empty({1, w1.size(0), 1, 1},
                    h.options().dtype(at::kFloat).memory_format(at::MemoryFormat::ChannelsLast));
      dz1_done = db1_done = dgrad_drelu(op, dz2, w2, h, dz1, sum);
      if (db1_done) db1.copy_(sum.view({-1}));
    }
    if (!dz1_done) dz1_done = dgrad_drelu(op, dz2, w2, h, dz1, Tensor());
  }
  if (!dz1_done) {
    const Tensor dh = std::get<0>(conv_grads(dz2, h, w2, std::nullopt, true, false, false));
    dz1 = in(act_bwd.call(dh, h, "relu"));
  }
  Tensor dw1;
  if (mask[1] || (want_b1 && !db1_done)) {
    Tensor db1_rest;
    std::tie(std::ignore, dw1, db1_rest) =
        conv_grads(dz1, x, w1, b1, false, mask[1], want_b1 && !db1_done);
    if (!db1_done) db1 = db1_rest;
  }
  Tensor dx;
  if (mask[0]) {
    dx = at::empty(x.sizes(), x.options().memory_format(fmt));
    if (unfused_backward() || !dgrad_add(op, dz1, w1, dz2, dx))
      dx = std::get<0>(conv_grads(dz1, x, w1, std::nullopt, true, false, false)).add_(dz2);
  }
  return {dx, dw1, db1, dw2, db2};
}

// ---------------------------------------------------------------- Meta

std::tuple<Tensor, Tensor> residual_block_train_meta(const Tensor& x, const Tensor& w1,
                                                     const OptTensor& b1, const Tensor& w2,
                                                     const OptTensor& b2) {
  rules::residual_block("residual_block", x, w1, b1, w2, b2);
  auto options = x.options().memory_format(conv_format(x));
  return {at::empty_symint(x.sym_sizes(), options), at::empty_symint(x.sym_sizes(), options)};
}
Tensor residual_block_meta(const Tensor& x, const Tensor& w1, const OptTensor& b1, const Tensor& w2,
                           const OptTensor& b2) {
  return std::get<0>(residual_block_train_meta(x, w1, b1, w2, b2));
}
Grads residual_block_backward_meta(const Tensor& dy, const Tensor& x, const Tensor& w1,
                                   const OptTensor& b1, const Tensor& w2, const OptTensor& b2,
                                   const Tensor& h, const Tensor& y, std::array<bool, 5> mask) {
  const char* op = "residual_block_backward";
  rules::residual_block(op, x, w1, b1, w2, b2);
  for (auto [t, name] : {std::pair{&dy, "dy"}, {&h, "h"}, {&y, "y"}})
    rules::check_grad(op, *t, name, rules::SymShape(x.sym_sizes().begin(), x.sym_sizes().end()));
  const at::MemoryFormat fmt = conv_format(x);
  auto like = [&](const Tensor& t, at::MemoryFormat f) {
    return at::empty_symint(t.sym_sizes(), t.options().memory_format(f));
  };
  return {mask[0] ? like(x, fmt) : Tensor(), mask[1] ? like(w1, fmt) : Tensor(),
          mask[2] && has(b1) ? like(*b1, at::MemoryFormat::Contiguous) : Tensor(),
          mask[3] ? like(w2, fmt) : Tensor(),
          mask[4] && has(b2) ? like(*b2, at::MemoryFormat::Contiguous) : Tensor()};
}

// ---------------------------------------------------------------- autograd

using TrainSig = std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const OptTensor&,
                                            const Tensor&, const OptTensor&);
using BlockSig = Tensor(const Tensor&, const Tensor&, const OptTensor&, const Tensor&,
                        const OptTensor&);
using BwdSig = Grads(const Tensor&, const Tensor&, const Tensor&, const OptTensor&, const Tensor&,
                     const OptTensor&, const Tensor&, const Tensor&, std::array<bool, 5>);

class BlockFn : public torch::autograd::Function<BlockFn> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& x, const Tensor& w1,
                               const OptTensor& b1, const Tensor& w2, const OptTensor& b2) {
    static auto op = op_handle<TrainSig>("dnngraph::residual_block_train");
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [y, h] = op.call(x, w1, b1, w2, b2);
    ctx->save_for_backward({x, w1, value_or_undefined(b1), w2, value_or_undefined(b2), h, y});
    return {y};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static auto op = op_handle<BwdSig>("dnngraph::residual_block_backward");
    variable_list r(5);
    if (!grads[0].defined()) return r;
    auto s = ctx->get_saved_variables();
    // needs_input_grad counts the tensor inputs given: an absent bias has no index.
    std::array<bool, 5> mask{};
    for (size_t i = 0, edge = 0; i < mask.size(); ++i)
      if (s[i].defined()) mask[i] = ctx->needs_input_grad(edge++);
    auto [dx, dw1, db1, dw2, db2] =
        op.call(grads[0], s[0], s[1], opt(s[2]), s[3], opt(s[4]), s[5], s[6], mask);
    r[0] = dx, r[1] = dw1, r[2] = db1, r[3] = dw2, r[4] = db2;
    return r;
  }
};

Tensor residual_block_autograd(const Tensor& x, const Tensor& w1, const OptTensor& b1,
                               const Tensor& w2, const OptTensor& b2) {
  rules::refuse_forward_ad("residual_block", {{&x, "x"},
                                              {&w1, "w1"},
                                              {has(b1) ? &*b1 : nullptr, "b1"},
                                              {&w2, "w2"},
                                              {has(b2) ? &*b2 : nullptr, "b2"}});
  if (!wants_grad(x, w1, b1, w2, b2)) {
    static auto op = op_handle<BlockSig>("dnngraph::residual_block");
    at::AutoDispatchBelowADInplaceOrView guard;
    return op.call(x, w1, b1, w2, b2);
  }
  return BlockFn::apply(x, w1, b1, w2, b2)[0];
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(dnngraph, m) {
  m.def("residual_block(Tensor x, Tensor w1, Tensor? b1, Tensor w2, Tensor? b2) -> Tensor");
  m.def(
      "residual_block_train(Tensor x, Tensor w1, Tensor? b1, Tensor w2, Tensor? b2) -> (Tensor, "
      "Tensor)");
  m.def(
      "residual_block_backward(Tensor dy, Tensor x, Tensor w1, Tensor? b1, Tensor w2, Tensor? b2, "
      "Tensor h, Tensor y, bool[5] mask) -> (Tensor, Tensor, Tensor, Tensor, Tensor)");
}

// The same kernels serve CPU (reference engine) and CUDA (cuDNN).
namespace {
void impl_devices(torch::Library& m) {
  m.impl("residual_block", &residual_block);
  m.impl("residual_block_train", &residual_block_train);
  m.impl("residual_block_backward", &residual_block_backward);
}
}  // namespace
TORCH_LIBRARY_IMPL(dnngraph, CPU, m) { impl_devices(m); }
TORCH_LIBRARY_IMPL(dnngraph, CUDA, m) { impl_devices(m); }
TORCH_LIBRARY_IMPL(dnngraph, Meta, m) {
  m.impl("residual_block", rules::meta_kernel(&residual_block_meta));
  m.impl("residual_block_train", rules::meta_kernel(&residual_block_train_meta));
  m.impl("residual_block_backward", rules::meta_kernel(&residual_block_backward_meta));
}
TORCH_LIBRARY_IMPL(dnngraph, Autograd, m) { m.impl("residual_block", &residual_block_autograd); }

}  // namespace dnngraph::torch_ops
