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

// One convolution method: (first, second, keywords) -> call(graph, first, second, attributes,
// options), the attributes' spatial rank read from `first`; and its frontend call form.
template <class A, class Call>
void def_conv(nb::class_<PyGraph>& cls, const char* name, const char* first, const char* second,
              Call call, const char* doc) {
  auto [pad, str, dil, pre, post, cdt, op_name] = conv_args();
  cls.def(
      name,
      [name, call](PyGraph& self, ir::Tensor a, ir::Tensor b, Dims padding, Dims stride,
                   Dims dilation, Dims pre, Dims post, DataType compute, std::string n) {
        auto attrs = conv_attrs<A>(a, padding, pre, post, stride, dilation, name);
        return call(self.graph, a, b, std::move(attrs), op_options(compute, std::move(n)));
      },
      nb::arg(first), nb::arg(second), pad, str, dil, pre, post, cdt, op_name, doc);
  frontend_form(cls, name, {first, second});
}

}  // namespace

void bind_op_conv_fprop(nb::class_<PyGraph>& cls) {
  def_conv<ir::ConvFpropAttrs>(
      cls, "conv_fprop", "image", "weight",
      [](ir::Graph& g, ir::Tensor image, ir::Tensor weight, ir::ConvFpropAttrs a, ir::OpOptions o) {
        return g.conv_fprop(image, weight, std::move(a), std::move(o));
      },
      "Y = conv(X, W): forward convolution (cross-correlation). Returns Y.");
}

void bind_op_conv_dgrad(nb::class_<PyGraph>& cls) {
  def_conv<ir::ConvDgradAttrs>(
      cls, "conv_dgrad", "loss", "filter",
      [](ir::Graph& g, ir::Tensor loss, ir::Tensor filter, ir::ConvDgradAttrs a, ir::OpOptions o) {
        return g.conv_dgrad(loss, filter, std::move(a), std::move(o));
      },
      "DX = gradient of the convolution w.r.t. its input. Set DX's dims with set_dim.");
}

void bind_op_conv_wgrad(nb::class_<PyGraph>& cls) {
  def_conv<ir::ConvWgradAttrs>(
      cls, "conv_wgrad", "image", "loss",
      [](ir::Graph& g, ir::Tensor image, ir::Tensor loss, ir::ConvWgradAttrs a, ir::OpOptions o) {
        return g.conv_wgrad(loss, image, std::move(a), std::move(o));
      },
      "DW = gradient of the convolution w.r.t. its filter. Set DW's dims with set_dim.");
}

}  // namespace dnngraph::py
