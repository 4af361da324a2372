// The tutorial's three graphs (sections 2, 4 and 5) as graph builders, shared by the samples
// and the GPU benchmarks (bench/gpu) so that both run exactly the same graphs.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "dnngraph/dnngraph.hpp"

namespace seed {

using dnngraph::DataType;
using dnngraph::Graph;
namespace ir = dnngraph::ir;

// Packed strides of an NCHW-ordered dims vector laid out as NHWC.
inline std::vector<int64_t> nhwc(const std::vector<int64_t>& d) {
  return ir::packed_strides(d, {0, 2, 3, 1});
}

inline ir::Tensor input(Graph& g, const char* name, std::vector<int64_t> dim,
                        std::vector<int64_t> stride, DataType t) {
  return g.tensor(ir::TensorAttrs()
                      .set_name(name)
                      .set_dim(std::move(dim))
                      .set_stride(std::move(stride))
                      .set_data_type(t));
}

// Section 2: conv 3x3 pad 1 -> + bias -> relu, NHWC bf16.
inline std::function<void(Graph&)> conv_bias_relu(int64_t n, int64_t c, int64_t hw, int64_t k) {
  return [=](Graph& g) {
    const DataType t = DataType::BFloat16;
    g.set_name("conv_bias_relu").set_io_data_type(t);
    auto x = input(g, "X", {n, c, hw, hw}, nhwc({n, c, hw, hw}), t);
    auto w = input(g, "W", {k, c, 3, 3}, nhwc({k, c, 3, 3}), t);
    auto b = input(g, "B", {1, k, 1, 1}, nhwc({1, k, 1, 1}), t);
    ir::ConvFpropAttrs a;
    a.set_padding({1, 1}).set_stride({1, 1}).set_dilation({1, 1});
    auto y = g.relu(g.bias(g.conv_fprop(x, w, a), b));
    y->set_output(true)
        .set_name("Y")
        .set_data_type(t)
        .set_dim({n, k, hw, hw})
        .set_stride(nhwc({n, k, hw, hw}));
  };
}

// Section 4: batched matmul -> * alpha -> + bias -> gelu, with the AMAX of the result.
// alpha_constant set: alpha is a constant of the graph; unset: a pass-by-value tensor named
// "alpha" whose host value comes with the variant pack at execute time.
inline std::function<void(Graph&)> matmul_epilogue(int64_t b, int64_t m, int64_t k, int64_t n,
                                                   std::optional<double> alpha_constant = {}) {
  return [=](Graph& g) {
    const DataType t = DataType::BFloat16;
    g.set_name("matmul_epilogue").set_io_data_type(t);
    auto a = input(g, "A", {b, m, k}, ir::packed_strides({b, m, k}), t);
    auto bb = input(g, "B", {b, k, n}, ir::packed_strides({b, k, n}), t);
    auto bias = input(g, "bias", {1, 1, n}, ir::packed_strides({1, 1, n}), t);
    ir::Tensor alpha;
    if (alpha_constant) {
      alpha = g.scalar(ir::Scalar::of_float(*alpha_constant), "alpha");
    } else {
      alpha = input(g, "alpha", {1, 1, 1}, {1, 1, 1}, DataType::Float);
      alpha->set_is_pass_by_value(true);
    }
    auto y = g.gelu(g.bias(g.scale(g.matmul(a, bb), alpha), bias));
    y->set_output(true).set_name("Y").set_data_type(t).set_dim({b, m, n}).set_stride(
        ir::packed_strides({b, m, n}));
    auto amax = g.reduction(y, {dnngraph::ReductionMode::Amax});
    amax->set_output(true)
        .set_name("AMAX")
        .set_data_type(DataType::Float)
        .set_dim({1, 1, 1})
        .set_stride({1, 1, 1});
  };
}

// Section 5: causal scaled dot-product attention (inference), bf16, scale 1/sqrt(d).
inline std::function<void(Graph&)> sdpa_causal(int64_t b, int64_t h, int64_t s, int64_t d) {
  return [=](Graph& g) {
    const DataType t = DataType::BFloat16;
    g.set_name("sdpa_causal").set_io_data_type(t);
    const std::vector<int64_t> dim{b, h, s, d};
    auto q = input(g, "Q", dim, ir::packed_strides(dim), t);
    auto k = input(g, "K", dim, ir::packed_strides(dim), t);
    auto v = input(g, "V", dim, ir::packed_strides(dim), t);
    ir::SdpaAttrs a;
    a.is_inference = true;
    a.causal = true;
    a.right_bound = 0;
    a.attn_scale = 1.0 / std::sqrt(static_cast<double>(d));
    auto out = g.sdpa(q, k, v, a);
    out[0]->set_output(true).set_name("O").set_data_type(t).set_dim(dim).set_stride(
        ir::packed_strides(dim));
  };
}

}  // namespace seed
