// Normalizations (layer/RMS/batch/instance/adaptive layer), forward and backward.
// Scalars such as epsilon and momentum take a tensor or a Python float (a pass-by-value constant).
#include "common.hpp"

namespace dnngraph::py {

namespace {
using Scalar = std::optional<TensorOrScalar>;
using OptT = ir::Tensor;  // nullable tensor argument
constexpr DataType kNotSet = DataType::NotSet;

using NormFwd = std::array<ir::Tensor, 3> (ir::Graph::*)(ir::Tensor, ir::Tensor, ir::Tensor,
                                                         ir::Tensor, NormForwardPhase,
                                                         ir::OpOptions);
using NormBwd = std::array<ir::Tensor, 3> (ir::Graph::*)(ir::Tensor, ir::Tensor, ir::Tensor,
                                                         ir::Tensor, ir::Tensor, ir::OpOptions);

// layernorm, instancenorm, adalayernorm: (phase, input, scale, bias, epsilon) -> (Y, mean,
// inv_variance). Only layernorm's bias may be None.
template <bool BiasOptional>
void def_norm_with_mean(nb::class_<PyGraph>& cls, const char* name, NormFwd f, const char* doc) {
  auto bias = [] {
    if constexpr (BiasOptional)
      return nb::arg("bias").none();
    else
      return nb::arg("bias");
  }();
  cls.def(
      name,
      [f](PyGraph& g, NormForwardPhase phase, ir::Tensor input, ir::Tensor scale, OptT bias,
          TensorOrScalar epsilon, DataType compute, std::string op_name) {
        return as_tuple((g.graph.*f)(input, scale, bias, as_tensor(g, epsilon), phase,
                                     op_options(compute, std::move(op_name))));
      },
      nb::arg("norm_forward_phase"), nb::arg("input"), nb::arg("scale"), bias, nb::arg("epsilon"),
      nb::arg("compute_data_type") = kNotSet, nb::arg("name") = "", doc);
}

// The backward of the norms above and of batchnorm: (grad, input, scale, mean, inv_variance)
// -> (dX, dscale, dbias).
void def_norm_backward_with_mean(nb::class_<PyGraph>& cls, const char* name, NormBwd f) {
  cls.def(
      name,
      [f](PyGraph& g, ir::Tensor grad, ir::Tensor input, ir::Tensor scale, ir::Tensor mean,
          ir::Tensor inv_variance, DataType compute, std::string op_name) {
        return as_tuple((g.graph.*f)(grad, input, scale, mean, inv_variance,
                                     op_options(compute, std::move(op_name))));
      },
      nb::arg("grad"), nb::arg("input"), nb::arg("scale"), nb::arg("mean"), nb::arg("inv_variance"),
      nb::arg("compute_data_type") = kNotSet, nb::arg("name") = "", "Returns (dX, dscale, dbias).");
}
}  // namespace

void bind_op_norm_forward(nb::class_<PyGraph>& cls) {
  def_norm_with_mean</*BiasOptional=*/true>(
      cls, "layernorm", &ir::Graph::layernorm,
      "Returns (Y, mean, inv_variance); mean and inv_variance are None in INFERENCE.");
  def_norm_with_mean<false>(
      cls, "instancenorm", &ir::Graph::instancenorm,
      "Instance norm: statistics per sample and channel over the spatial dims; scale and bias "
      "[1,C,1,..]. Returns (Y, mean, inv_variance) ([N,C,1,..]); the last two are None in "
      "INFERENCE.");
  def_norm_with_mean<false>(
      cls, "adalayernorm", &ir::Graph::adalayernorm,
      "Adaptive layer norm: scale and bias per sample ([N|1, ...]); the dims 1.. where scale is "
      "not 1 are normalized (X [B,S,D], scale [B,1,D] -> statistics [B,S,1]). Returns (Y, mean, "
      "inv_variance); the last two are None in INFERENCE.");
  cls.def(
      "rmsnorm",
      [](PyGraph& g, NormForwardPhase phase, ir::Tensor input, ir::Tensor scale,
         TensorOrScalar epsilon, OptT bias, DataType compute, std::string name) {
        return as_tuple(g.graph.rmsnorm(input, scale, bias, as_tensor(g, epsilon), phase,
                                        op_options(compute, std::move(name))));
      },
      nb::arg("norm_forward_phase"), nb::arg("input"), nb::arg("scale"), nb::arg("epsilon"),
      nb::arg("bias").none() = nb::none(), nb::arg("compute_data_type") = kNotSet,
      nb::arg("name") = "", "Returns (Y, inv_variance); inv_variance is None in INFERENCE.");
  cls.def(
      "batchnorm",
      [](PyGraph& g, ir::Tensor input, ir::Tensor scale, ir::Tensor bias, TensorOrScalar epsilon,
         OptT in_running_mean, OptT in_running_var, Scalar momentum, DataType compute,
         std::string name) {
        return as_tuple(g.graph.batchnorm(input, scale, bias, in_running_mean, in_running_var,
                                          as_tensor(g, epsilon), as_tensor(g, momentum),
                                          op_options(compute, std::move(name))));
      },
      nb::arg("input"), nb::arg("scale"), nb::arg("bias"), nb::arg("epsilon"),
      nb::arg("in_running_mean").none() = nb::none(), nb::arg("in_running_var").none() = nb::none(),
      nb::arg("momentum").none() = nb::none(), nb::arg("compute_data_type") = kNotSet,
      nb::arg("name") = "",
      "Training batchnorm. Returns (Y, mean, inv_variance, next_running_mean, "
      "next_running_var); the last two are None without running statistics.");
  cls.def(
      "batchnorm_inference",
      [](PyGraph& g, ir::Tensor input, ir::Tensor mean, ir::Tensor inv_variance, ir::Tensor scale,
         ir::Tensor bias, DataType compute, std::string name) {
        return g.graph.batchnorm_inference(input, mean, inv_variance, scale, bias,
                                           op_options(compute, std::move(name)));
      },
      nb::arg("input"), nb::arg("mean"), nb::arg("inv_variance"), nb::arg("scale"), nb::arg("bias"),
      nb::arg("compute_data_type") = kNotSet, nb::arg("name") = "",
      "Y = (input - mean) * inv_variance * scale + bias per channel (dim 1).");

  // The frontend's call forms (dnngraph._compat).
  for (const char* n : {"rmsnorm", "layernorm", "instancenorm", "adalayernorm"})
    frontend_form(cls, n, {"input", "scale", "bias", "epsilon"});
  frontend_form(
      cls, "batchnorm",
      {"input", "scale", "bias", "in_running_mean", "in_running_var", "epsilon", "momentum"});
  frontend_form(cls, "batchnorm_inference", {"input", "mean", "inv_variance", "scale", "bias"});
}

void bind_op_norm_backward(nb::class_<PyGraph>& cls) {
  def_norm_backward_with_mean(cls, "layernorm_backward", &ir::Graph::layernorm_backward);
  cls.def(
      "rmsnorm_backward",
      [](PyGraph& g, ir::Tensor grad, ir::Tensor input, ir::Tensor scale, ir::Tensor inv_variance,
         bool has_dbias, DataType compute, std::string name) {
        return as_tuple(g.graph.rmsnorm_backward(grad, input, scale, inv_variance, has_dbias,
                                                 op_options(compute, std::move(name))));
      },
      nb::arg("grad"), nb::arg("input"), nb::arg("scale"), nb::arg("inv_variance"),
      nb::arg("has_dbias") = false, nb::arg("compute_data_type") = kNotSet, nb::arg("name") = "",
      "Returns (dX, dscale, dbias); dbias is None unless has_dbias.");
  def_norm_backward_with_mean(cls, "batchnorm_backward", &ir::Graph::batchnorm_backward);

  def_norm_backward_with_mean(cls, "instancenorm_backward", &ir::Graph::instancenorm_backward);
  def_norm_backward_with_mean(cls, "adalayernorm_backward", &ir::Graph::adalayernorm_backward);

  // The frontend's call forms (dnngraph._compat).
  frontend_form(cls, "rmsnorm_backward", {"grad", "input", "scale", "inv_variance"});
  for (const char* n : {"layernorm_backward", "instancenorm_backward", "adalayernorm_backward",
                        "batchnorm_backward"})
    frontend_form(cls, n, {"grad", "input", "scale", "mean", "inv_variance"});
}

}  // namespace dnngraph::py
