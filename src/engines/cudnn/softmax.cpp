// Softmax -> max / sub / exp / sum / div (and log + add for the log-sum-exp stats). This is the
// form cuDNN's fused attention engines recognise, so sdpa.cpp reuses it.
#include "engines/cudnn/lowering.hpp"

namespace dnngraph::cudnn {

Status add_softmax(LowerContext& cx, const std::string& what, const std::vector<int64_t>& dim,
                   cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y,
                   cudnnBackendDescriptor_t stats, cudnnBackendDescriptor_t max_out,
                   cudnnBackendDescriptor_t sum_out) {
  const DataType f32 = DataType::Float;
  std::vector<int64_t> row = dim;
  row.back() = 1;
  auto vt = [&](const char* n, const std::vector<int64_t>& d) {
    return cx.virtual_tensor(what + "::" + n, d, f32);
  };
  cudnnBackendDescriptor_t mx = max_out, sum = sum_out;
  if (!mx) {
    DNNGRAPH_ASSIGN_OR_RETURN(mx, vt("max", row));
  }
  DNNGRAPH_ASSIGN_OR_RETURN(auto sub, vt("sub", dim));
  DNNGRAPH_ASSIGN_OR_RETURN(auto ex, vt("exp", dim));
  if (!sum) {
    DNNGRAPH_ASSIGN_OR_RETURN(sum, vt("sum", row));
  }
  DNNGRAPH_TRY(add_reduction(cx, what + " max", CUDNN_REDUCE_TENSOR_MAX, f32, x, mx));
  DNNGRAPH_TRY(add_pointwise(cx, what + " sub", CUDNN_POINTWISE_SUB, f32, x, mx, nullptr, sub));
  DNNGRAPH_TRY(
      add_pointwise(cx, what + " exp", CUDNN_POINTWISE_EXP, f32, sub, nullptr, nullptr, ex));
  DNNGRAPH_TRY(add_reduction(cx, what + " sum", CUDNN_REDUCE_TENSOR_ADD, f32, ex, sum));
  if (stats) {
    DNNGRAPH_ASSIGN_OR_RETURN(auto lg, vt("log", row));
    DNNGRAPH_TRY(
        add_pointwise(cx, what + " log", CUDNN_POINTWISE_LOG, f32, sum, nullptr, nullptr, lg));
    DNNGRAPH_TRY(
        add_pointwise(cx, what + " stats", CUDNN_POINTWISE_ADD, f32, mx, lg, nullptr, stats));
  }
  return add_pointwise(cx, what + " div", CUDNN_POINTWISE_DIV, f32, ex, sum, nullptr, y);
}

Status lower_softmax(LowerContext& cx, const ir::Node& n) {
  const std::string what = detail::cat("softmax '", n.name, "'");
  ir::Tensor x = n.input(Role::X), y = n.output(Role::Y), stats = n.output(Role::STATS);
  DNNGRAPH_ASSIGN_OR_RETURN(auto tx, cx.tensor(x));
  DNNGRAPH_ASSIGN_OR_RETURN(auto ty, cx.tensor(y));
  cudnnBackendDescriptor_t ts = nullptr;
  if (stats) {
    DNNGRAPH_ASSIGN_OR_RETURN(ts, cx.tensor(stats));
  }
  return add_softmax(cx, what, cx.view(x).dim, tx, ty, ts);
}

}  // namespace dnngraph::cudnn
