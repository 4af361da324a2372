// Convolutions: fprop, dgrad and wgrad.
#include "common.hpp"

namespace dnngraph::py {

namespace {

using Dims = std::optional<std::vector<int64_t>>;

// Fills a ConvAttrs from the keyword arguments. Missing values default to padding 0, stride 1
// and dilation 1 per spatial dim when the spatial rank is known from `ref`'s dims.
template <class A>
A conv_attrs(const ir::Tensor& ref, const Dims& padding, const Dims& pre, const Dims& post,
             const Dims& stride, const Dims& dilation, const char* op) {
  if (padding && (pre || post))
    throw nb::value_error(
        (std::string(op) + ": give either padding or pre_padding/post_padding, not both").c_str());
  A a;
  const size_t spatial = ref && ref->dim.size() > 2 ? ref->dim.size() - 2 : 0;
  auto or_default = [&](const Dims& v, int64_t d) {
    return v ? *v : std::vector<int64_t>(spatial, d);
  };
  if (padding) {
    a.set_padding(*padding);
  } else {
    a.set_pre_padding(or_default(pre, 0));
    a.set_post_padding(or_default(post, 0));
  }
  a.set_stride(or_default(stride, 1));
  a.set_dilation(or_default(dilation, 1));
  return a;
}

// The keywords after the two tensors, shared by the three directions.
auto conv_args() {
  return std::make_tuple(
      nb::arg("padding").none() = nb::none(), nb::arg("stride").none() = nb::none(),
      nb::arg("dilation").none() = nb::none(), nb::arg("pre_padding").none() = nb::none(),
      nb::arg("post_padding").none() = nb::none(), nb::arg("compute_data_type") = DataType::NotSet,
      nb::arg("name") = "");
}

// One convolution method: Python (first, second, keywords) -> the Graph builder `op` on
// (first, second), or on (second, first) when `swapped`, with the attributes (their spatial
// rank read from `first`) and options; and its frontend call form.
template <class A>
void def_conv(nb::class_<PyGraph>& cls, const char* name, const char* first, const char* second,
              ir::Tensor (ir::Graph::*op)(ir::Tensor, ir::Tensor, A, ir::OpOptions), bool swapped,
              const char* doc) {
  auto [pad, str, dil, pre, post, cdt, op_name] = conv_args();
  cls.def(
      name,
      [name, op, swapped](PyGraph& self, ir::Tensor a, ir::Tensor b, Dims padding, Dims stride,
                          Dims dilation, Dims pre, Dims post, DataType compute, std::string n) {
        A attrs = conv_attrs<A>(a, padding, pre, post, stride, dilation, name);
        if (swapped) std::swap(a, b);
        return (self.graph.*op)(a, b, std::move(attrs), op_options(compute, std::move(n)));
      },
      nb::arg(first), nb::arg(second), pad, str, dil, pre, post, cdt, op_name, doc);
  frontend_form(cls, name, {first, second});
}

}  // namespace

void bind_op_conv_fprop(nb::class_<PyGraph>& cls) {
  def_conv(cls, "conv_fprop", "image", "weight", &ir::Graph::conv_fprop, false,
           "Y = conv(X, W): forward convolution (cross-correlation). Returns Y.");
}

void bind_op_conv_dgrad(nb::class_<PyGraph>& cls) {
  def_conv(cls, "conv_dgrad", "loss", "filter", &ir::Graph::conv_dgrad, false,
           "DX = gradient of the convolution w.r.t. its input. Set DX's dims with set_dim.");
}

// The frontend's conv_wgrad takes (image, loss); the Graph's takes (DY, X).
void bind_op_conv_wgrad(nb::class_<PyGraph>& cls) {
  def_conv(cls, "conv_wgrad", "image", "loss", &ir::Graph::conv_wgrad, true,
           "DW = gradient of the convolution w.r.t. its filter. Set DW's dims with set_dim.");
}

}  // namespace dnngraph::py
