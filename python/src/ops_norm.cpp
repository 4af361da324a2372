// Reductions, normalizations (layer/RMS/batch/instance/adaptive layer, forward and backward) and
// softmax.
// Scalars such as epsilon and momentum take a tensor or a Python float (a pass-by-value constant).
#include "common.hpp"

namespace dnngraph::py {

namespace {
using Scalar = std::optional<TensorOrScalar>;
using OptT = ir::Tensor;  // nullable tensor argument
constexpr DataType kNotSet = DataType::NotSet;
}  // namespace

void bind_ops_norm(nb::class_<PyGraph>& cls) {
  cls.def(
      "reduction",
      [](PyGraph& g, ir::Tensor input, ReductionMode mode, DataType compute, std::string name) {
        return g.graph.reduction(input, {mode}, op_options(compute, std::move(name)));
      },
      nb::arg("input"), nb::arg("mode"), nb::arg("compute_data_type") = kNotSet,
      nb::arg("name") = "",
      "Reduces over every dim where the output's dim is 1 (default: all ones; set_dim to keep "
      "dims).");

  cls.def(
      "layernorm",
      [](PyGraph& g, NormForwardPhase phase, ir::Tensor input, ir::Tensor scale, OptT bias,
         TensorOrScalar epsilon, DataType compute, std::string name) {
        return as_tuple(g.graph.layernorm(input, scale, bias, as_tensor(g, epsilon), phase,
                                          op_options(compute, std::move(name))));
      },
      nb::arg("norm_forward_phase"), nb::arg("input"), nb::arg("scale"), nb::arg("bias").none(),
      nb::arg("epsilon"), nb::arg("compute_data_type") = kNotSet, nb::arg("name") = "",
      "Returns (Y, mean, inv_variance); mean and inv_variance are None in INFERENCE.");
  cls.def(
      "instancenorm",
      [](PyGraph& g, NormForwardPhase phase, ir::Tensor input, ir::Tensor scale, ir::Tensor bias,
         TensorOrScalar epsilon, DataType compute, std::string name) {
        return as_tuple(g.graph.instancenorm(input, scale, bias, as_tensor(g, epsilon), phase,
                                             op_options(compute, std::move(name))));
      },
      nb::arg("norm_forward_phase"), nb::arg("input"), nb::arg("scale"), nb::arg("bias"),
      nb::arg("epsilon"), nb::arg("compute_data_type") = kNotSet, nb::arg("name") = "",
      "Instance norm: statistics per sample and channel over the spatial dims; scale and bias "
      "[1,C,1,..]. Returns (Y, mean, inv_variance) ([N,C,1,..]); the last two are None in "
      "INFERENCE.");
  cls.def(
      "adalayernorm",
      [](PyGraph& g, NormForwardPhase phase, ir::Tensor input, ir::Tensor scale, ir::Tensor bias,
         TensorOrScalar epsilon, DataType compute, std::string name) {
        return as_tuple(g.graph.adalayernorm(input, scale, bias, as_tensor(g, epsilon), phase,
                                             op_options(compute, std::move(name))));
      },
      nb::arg("norm_forward_phase"), nb::arg("input"), nb::arg("scale"), nb::arg("bias"),
      nb::arg("epsilon"), nb::arg("compute_data_type") = kNotSet, nb::arg("name") = "",
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

  cls.def(
      "layernorm_backward",
      [](PyGraph& g, ir::Tensor grad, ir::Tensor input, ir::Tensor scale, ir::Tensor mean,
         ir::Tensor inv_variance, DataType compute, std::string name) {
        return as_tuple(g.graph.layernorm_backward(grad, input, scale, mean, inv_variance,
                                                   op_options(compute, std::move(name))));
      },
      nb::arg("grad"), nb::arg("input"), nb::arg("scale"), nb::arg("mean"), nb::arg("inv_variance"),
      nb::arg("compute_data_type") = kNotSet, nb::arg("name") = "", "Returns (dX, dscale, dbias).");
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
  cls.def(
      "batchnorm_backward",
      [](PyGraph& g, ir::Tensor grad, ir::Tensor input, ir::Tensor scale, ir::Tensor mean,
         ir::Tensor inv_variance, DataType compute, std::string name) {
        return as_tuple(g.graph.batchnorm_backward(grad, input, scale, mean, inv_variance,
                                                   op_options(compute, std::move(name))));
      },
      nb::arg("grad"), nb::arg("input"), nb::arg("scale"), nb::arg("mean"), nb::arg("inv_variance"),
      nb::arg("compute_data_type") = kNotSet, nb::arg("name") = "", "Returns (dX, dscale, dbias).");

  cls.def(
      "instancenorm_backward",
      [](PyGraph& g, ir::Tensor grad, ir::Tensor input, ir::Tensor scale, ir::Tensor mean,
         ir::Tensor inv_variance, DataType compute, std::string name) {
        return as_tuple(g.graph.instancenorm_backward(grad, input, scale, mean, inv_variance,
                                                      op_options(compute, std::move(name))));
      },
      nb::arg("grad"), nb::arg("input"), nb::arg("scale"), nb::arg("mean"), nb::arg("inv_variance"),
      nb::arg("compute_data_type") = kNotSet, nb::arg("name") = "", "Returns (dX, dscale, dbias).");
  cls.def(
      "adalayernorm_backward",
      [](PyGraph& g, ir::Tensor grad, ir::Tensor input, ir::Tensor scale, ir::Tensor mean,
         ir::Tensor inv_variance, DataType compute, std::string name) {
        return as_tuple(g.graph.adalayernorm_backward(grad, input, scale, mean, inv_variance,
                                                      op_options(compute, std::move(name))));
      },
      nb::arg("grad"), nb::arg("input"), nb::arg("scale"), nb::arg("mean"), nb::arg("inv_variance"),
      nb::arg("compute_data_type") = kNotSet, nb::arg("name") = "", "Returns (dX, dscale, dbias).");

  cls.def(
      "softmax",
      [](PyGraph& g, ir::Tensor input, bool generate_stats, DataType compute, std::string name) {
        return as_tuple(
            g.graph.softmax(input, generate_stats, op_options(compute, std::move(name))));
      },
      nb::arg("input"), nb::arg("generate_stats") = false, nb::arg("compute_data_type") = kNotSet,
      nb::arg("name") = "",
      "Softmax along the last dim. Returns (Y, stats); stats (log-sum-exp) is None unless "
      "generate_stats.");
}

}  // namespace dnngraph::py
