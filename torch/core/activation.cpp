// The activations every op shares: their names, their graph form, and their ATen forms
// (forward and derivative) for the parts that run on ATen.
#include <ATen/ATen.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/gelu_backward.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/silu_backward.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/threshold_backward.h>
#include <c10/util/Exception.h>

#include <array>
#include <string_view>
#include <utility>
#include <vector>

#include "core/runtime.hpp"

namespace dnngraph::torch_ops {

// ---------------------------------------------------------------- activations

Act parse_act(const char* op, std::string_view n) {
  static const std::array<std::pair<std::string_view, Act>, 8> names{{
      {"none", Act::None},
      {"relu", Act::Relu},
      {"gelu", Act::Gelu},
      {"gelu_tanh", Act::GeluTanh},
      {"silu", Act::Silu},
      {"swish", Act::Silu},
      {"tanh", Act::Tanh},
      {"sigmoid", Act::Sigmoid},
  }};
  for (const auto& [name, a] : names)
    if (name == n) return a;
  TORCH_CHECK_VALUE(false, "dnngraph::", op, ": unknown activation '", std::string(n),
                    "'; expected none, relu, gelu, gelu_tanh, silu, tanh or sigmoid");
}

ir::Tensor apply_act(ir::Graph& g, Act act, ir::Tensor x) {
  switch (act) {
    case Act::None:
      return x;
    case Act::Relu:
      return g.relu(x);
    case Act::Gelu:
      return g.gelu(x);
    case Act::GeluTanh:
      return g.unary(PointwiseMode::GeluApproxTanh, x);
    case Act::Silu:
      return g.unary(PointwiseMode::Silu, x);
    case Act::Tanh:
      return g.unary(PointwiseMode::Tanh, x);
    case Act::Sigmoid:
      return g.unary(PointwiseMode::Sigmoid, x);
  }
  return x;
}

at::Tensor aten_act(Act act, const at::Tensor& x) {
  switch (act) {
    case Act::None:
      return x;
    case Act::Relu:
      return at::relu(x);
    case Act::Gelu:
      return at::gelu(x);
    case Act::GeluTanh:
      return at::gelu(x, "tanh");
    case Act::Silu:
      return at::silu(x);
    case Act::Tanh:
      return at::tanh(x);
    case Act::Sigmoid:
      return at::sigmoid(x);
  }
  return x;
}

at::Tensor aten_act_backward(Act act, const at::Tensor& dy, const at::Tensor& z) {
  switch (act) {
    case Act::None:
      return dy;
    case Act::Relu:
      return at::threshold_backward(dy, z, 0);
    case Act::Gelu:
      return at::gelu_backward(dy, z);
    case Act::GeluTanh:
      return at::gelu_backward(dy, z, "tanh");
    case Act::Silu:
      return at::silu_backward(dy, z);
    case Act::Tanh: {
      at::Tensor t = at::tanh(z);
      return dy * (1 - t * t);
    }
    case Act::Sigmoid: {
      at::Tensor s = at::sigmoid(z);
      return dy * s * (1 - s);
    }
  }
  return dy;
}

void aten_act_backward_out(Act act, at::Tensor& out, const at::Tensor& dy, const at::Tensor& z) {
  switch (act) {
    case Act::None:
      out.copy_(dy);
      return;
    case Act::Relu:
      at::threshold_backward_out(out, dy, z, 0);
      return;
    case Act::Gelu:
      at::gelu_backward_out(out, dy, z);
      return;
    case Act::GeluTanh:
      at::gelu_backward_out(out, dy, z, "tanh");
      return;
    case Act::Silu:
      at::silu_backward_out(out, dy, z);
      return;
    case Act::Tanh:
      at::tanh_backward_out(out, dy, at::tanh(z));
      return;
    case Act::Sigmoid:
      at::sigmoid_backward_out(out, dy, at::sigmoid(z));
      return;
  }
}

void sum_to_out(at::Tensor& out, const at::Tensor& x) {
  const int64_t lead = x.dim() - out.dim();
  std::vector<int64_t> shape(static_cast<size_t>(lead), 1), dims;
  shape.insert(shape.end(), out.sizes().begin(), out.sizes().end());
  for (int64_t i = 0; i < x.dim(); ++i)
    if (shape[static_cast<size_t>(i)] == 1 && x.size(i) != 1) dims.push_back(i);
  at::Tensor o = out.view(shape);
  at::sum_out(o, x, dims, /*keepdim=*/true);
}

}  // namespace dnngraph::torch_ops
