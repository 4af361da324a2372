// Shape rules of convolution (fprop, dgrad, wgrad; 1-D, 2-D and 3-D).
//   X [N, C, spatial...], W [K, C/groups, filter...], Y [N, K, out...] with
//   out = (in + pre + post - dilation*(filter-1) - 1) / stride + 1.
// dgrad and wgrad cannot infer their output uniquely (the division by the stride loses
// information), so the user sets DX / DW dims and we check them against the formula.
#include "ir/ops/common.hpp"

namespace dnngraph::ir {
namespace {

// Fills empty padding/stride/dilation with defaults and checks their sizes and values.
Status normalize_attrs(const Node& n, ConvAttrs& a, size_t spatial) {
  struct Field {
    std::vector<int64_t>* v;
    const char* name;
    int64_t def;
    int64_t min;
  };
  Field fields[] = {{&a.pre_padding, "pre_padding", 0, 0},
                    {&a.post_padding, "post_padding", 0, 0},
                    {&a.stride, "stride", 1, 1},
                    {&a.dilation, "dilation", 1, 1}};
  for (auto& f : fields) {
    if (f.v->empty()) f.v->assign(spatial, f.def);
    if (f.v->size() != spatial)
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", f.name, " has ", f.v->size(),
                        " values ", dims_str(*f.v), " but the convolution has ", spatial,
                        " spatial dims");
    for (int64_t x : *f.v)
      if (x < f.min)
        return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", f.name, " ", dims_str(*f.v),
                          " has a value below ", f.min);
  }
  return Status::ok();
}

// Checks X (activation, role x_role) against W (filter, role w_role) and returns Y's dims.
Result<std::vector<int64_t>> conv_output_dims(const Node& n, ConvAttrs& a, Role x_role,
                                              const Tensor& x, Role w_role, const Tensor& w) {
  DNNGRAPH_TRY(check_rank(n, x_role, x, 3, 5));
  if (w->dim.size() != x->dim.size())
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(w_role, w),
                      " has rank ", w->dim.size(), " (dims ", dims_str(w->dim), ") but ",
                      port_label(x_role, x), " has rank ", x->dim.size(), " (dims ",
                      dims_str(x->dim), ")");
  const size_t spatial = x->dim.size() - 2;
  DNNGRAPH_TRY(normalize_attrs(n, a, spatial));

  const int64_t c = x->dim[1], wc = w->dim[1], k = w->dim[0];
  if (c % wc != 0)
    return make_error(ErrorCode::InvalidGraph, op_label(n),
                      ": channel mismatch: ", port_label(x_role, x), " has C=", c,
                      " (dim 1) which is not a multiple of ", port_label(w_role, w),
                      " C/groups=", wc, " (dim 1)");
  const int64_t groups = c / wc;
  if (k % groups != 0)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(w_role, w),
                      " has K=", k, " (dim 0) which is not a multiple of the group count ", groups,
                      " (C=", c, " of ", port_label(x_role, x), " / ", wc, ")");
  if (a.group_count && *a.group_count != groups)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": group_count is ", *a.group_count,
                      " but the shapes give ", groups, " (C=", c, " of ", port_label(x_role, x),
                      " / C/groups=", wc, " of ", port_label(w_role, w), ")");

  std::vector<int64_t> y = {x->dim[0], k};
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t in = x->dim[i + 2], f = w->dim[i + 2];
    int64_t padded = 0, reach = 0, span = 0;
    if (__builtin_add_overflow(in, a.pre_padding[i], &padded) ||
        __builtin_add_overflow(padded, a.post_padding[i], &padded) ||
        __builtin_mul_overflow(a.dilation[i], f - 1, &reach) ||
        __builtin_sub_overflow(padded, reach, &span) || __builtin_sub_overflow(span, 1, &span))
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": spatial dim ", i, ": padding ",
                        a.pre_padding[i], "+", a.post_padding[i], " and dilation ", a.dilation[i],
                        " with ", port_label(w_role, w), " size ", f, " and ",
                        port_label(x_role, x), " size ", in,
                        " overflow int64; use values that fit the tensors");
    if (span < 0)
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": spatial dim ", i, ": filter ",
                        port_label(w_role, w), " size ", f, " (dilation ", a.dilation[i],
                        ") is larger than ", port_label(x_role, x), " size ", in, " plus padding ",
                        a.pre_padding[i], "+", a.post_padding[i]);
    y.push_back(span / a.stride[i] + 1);
  }
  return y;
}

}  // namespace

Status infer_conv_fprop(Node& n, const InferContext& ctx) {
  DNNGRAPH_PORT(x, required_input(n, Role::X));
  DNNGRAPH_PORT(w, required_input(n, Role::W));
  DNNGRAPH_PORT(y, required_output(n, Role::Y));
  auto dims = conv_output_dims(n, n.as<ConvFpropAttrs>(), Role::X, x, Role::W, w);
  DNNGRAPH_TRY(dims.status());
  return infer_output(n, Role::Y, y, *dims, x, ctx, x->data_type);
}

namespace {

// dgrad/wgrad: the user-set output must exist and reproduce the given DY through the formula.
Status check_dy(const Node& n, const Tensor& dy, const std::vector<int64_t>& expected,
                std::string_view from) {
  if (dy->dim == expected) return Status::ok();
  return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(Role::DY, dy),
                    " has dims ", dims_str(dy->dim), " but ", from, " give ", dims_str(expected),
                    " through the convolution formula");
}

Status require_set_dims(const Node& n, Role role, const Tensor& t, const char* hint) {
  if (!t->dim.empty()) return Status::ok();
  return make_error(ErrorCode::InvalidGraph, op_label(n), ": output ", port_label(role, t),
                    " has no dims; set them (", hint,
                    "): they cannot be inferred uniquely from DY");
}

// The gradient `out_role` of conv_dgrad (DX, from DY and W) or conv_wgrad (DW, from DY and X):
// its dims are the user's, checked against DY through the forward's output dims.
template <class Attrs>
Status infer_conv_grad(Node& n, const InferContext& ctx, Role in_role, Role out_role,
                       const char* hint) {
  DNNGRAPH_PORT(dy, required_input(n, Role::DY));
  DNNGRAPH_PORT(in, required_input(n, in_role));
  DNNGRAPH_PORT(out, required_output(n, out_role));
  DNNGRAPH_TRY(require_set_dims(n, out_role, out, hint));
  DNNGRAPH_TRY(check_rank(n, Role::DY, dy, 3, 5));
  const bool dgrad = out_role == Role::DX;  // else wgrad: the filter is the output
  const Role x_role = dgrad ? out_role : in_role, w_role = dgrad ? in_role : out_role;
  const Tensor& x = dgrad ? out : in;
  const Tensor& w = dgrad ? in : out;
  auto dims = conv_output_dims(n, n.as<Attrs>(), x_role, x, w_role, w);
  DNNGRAPH_TRY(dims.status());
  DNNGRAPH_TRY(
      check_dy(n, dy, *dims, detail::cat(port_label(x_role, x), " and ", port_label(w_role, w))));
  // DX follows DY's layout; the filter follows the activation layout (NHWC X -> KRSC DW).
  return infer_output(n, out_role, out, out->dim, dgrad ? dy : x, ctx, dy->data_type);
}

}  // namespace

Status infer_conv_dgrad(Node& n, const InferContext& ctx) {
  return infer_conv_grad<ConvDgradAttrs>(n, ctx, Role::W, Role::DX, "the forward input's dims");
}

Status infer_conv_wgrad(Node& n, const InferContext& ctx) {
  return infer_conv_grad<ConvWgradAttrs>(n, ctx, Role::X, Role::DW, "the filter's dims");
}

}  // namespace dnngraph::ir
