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

}  // namespace

void bind_op_conv_fprop(nb::class_<PyGraph>& cls) {
  auto [pad, str, dil, pre, post, cdt, name] = conv_args();

  cls.def(
      "conv_fprop",
      [](PyGraph& self, ir::Tensor image, ir::Tensor weight, Dims padding, Dims stride,
         Dims dilation, Dims pre, Dims post, DataType compute, std::string name) {
        auto a = conv_attrs<ir::ConvFpropAttrs>(image, padding, pre, post, stride, dilation,
                                                "conv_fprop");
        return self.graph.conv_fprop(image, weight, std::move(a),
                                     op_options(compute, std::move(name)));
      },
      nb::arg("image"), nb::arg("weight"), pad, str, dil, pre, post, cdt, name,
      "Y = conv(X, W): forward convolution (cross-correlation). Returns Y.");
  frontend_form(cls, "conv_fprop", {"image", "weight"});
}

void bind_op_conv_dgrad(nb::class_<PyGraph>& cls) {
  auto [pad, str, dil, pre, post, cdt, name] = conv_args();
  cls.def(
      "conv_dgrad",
      [](PyGraph& self, ir::Tensor loss, ir::Tensor filter, Dims padding, Dims stride,
         Dims dilation, Dims pre, Dims post, DataType compute, std::string name) {
        auto a = conv_attrs<ir::ConvDgradAttrs>(loss, padding, pre, post, stride, dilation,
                                                "conv_dgrad");
        return self.graph.conv_dgrad(loss, filter, std::move(a),
                                     op_options(compute, std::move(name)));
      },
      nb::arg("loss"), nb::arg("filter"), pad, str, dil, pre, post, cdt, name,
      "DX = gradient of the convolution w.r.t. its input. Set DX's dims with set_dim.");
  frontend_form(cls, "conv_dgrad", {"loss", "filter"});
}

void bind_op_conv_wgrad(nb::class_<PyGraph>& cls) {
  auto [pad, str, dil, pre, post, cdt, name] = conv_args();
  cls.def(
      "conv_wgrad",
      [](PyGraph& self, ir::Tensor image, ir::Tensor loss, Dims padding, Dims stride, Dims dilation,
         Dims pre, Dims post, DataType compute, std::string name) {
        auto a = conv_attrs<ir::ConvWgradAttrs>(image, padding, pre, post, stride, dilation,
                                                "conv_wgrad");
        return self.graph.conv_wgrad(loss, image, std::move(a),
                                     op_options(compute, std::move(name)));
      },
      nb::arg("image"), nb::arg("loss"), pad, str, dil, pre, post, cdt, name,
      "DW = gradient of the convolution w.r.t. its filter. Set DW's dims with set_dim.");
  frontend_form(cls, "conv_wgrad", {"image", "loss"});
}

}  // namespace dnngraph::py
