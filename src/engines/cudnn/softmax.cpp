// Softmax -> max / sub / exp / sum / div (and log + add for the log-sum-exp stats). This is the
// form cuDNN's fused attention engines recognise, so sdpa.cpp reuses it.
#include "engines/cudnn/lowering.hpp"

namespace dnngraph::cudnn {

Status add_softmax(LowerContext& cx, const std::string& what, const std::vector<int64_t>& dim,
                   cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y,
                   cudnnBackendDescriptor_t stats) {
  const DataType f32 = DataType::Float;
  std::vector<int64_t> row = dim;
  row.back() = 1;
  auto vt = [&](const char* n, const std::vector<int64_t>& d) {
    return cx.virtual_tensor(what + "::" + n, d, f32);
  };
  auto mx = vt("max", row), sub = vt("sub", dim), ex = vt("exp", dim), sum = vt("sum", row);
  for (auto* r : {&mx, &sub, &ex, &sum})
    if (!*r) return r->status();
  DNNGRAPH_TRY(add_reduction(cx, what + " max", CUDNN_REDUCE_TENSOR_MAX, f32, x, mx.value()));
  DNNGRAPH_TRY(add_pointwise(cx, what + " sub", CUDNN_POINTWISE_SUB, f32, x, mx.value(), nullptr,
                             sub.value()));
  DNNGRAPH_TRY(add_pointwise(cx, what + " exp", CUDNN_POINTWISE_EXP, f32, sub.value(), nullptr,
                             nullptr, ex.value()));
  DNNGRAPH_TRY(
      add_reduction(cx, what + " sum", CUDNN_REDUCE_TENSOR_ADD, f32, ex.value(), sum.value()));
  if (stats) {
    auto lg = vt("log", row);
    if (!lg) return lg.status();
    DNNGRAPH_TRY(add_pointwise(cx, what + " log", CUDNN_POINTWISE_LOG, f32, sum.value(), nullptr,
                               nullptr, lg.value()));
    DNNGRAPH_TRY(add_pointwise(cx, what + " stats", CUDNN_POINTWISE_ADD, f32, mx.value(),
                               lg.value(), nullptr, stats));
  }
  return add_pointwise(cx, what + " div", CUDNN_POINTWISE_DIV, f32, ex.value(), sum.value(),
                       nullptr, y);
}

Status lower_softmax(LowerContext& cx, const ir::Node& n) {
  const std::string what = detail::cat("softmax '", n.name, "'");
  ir::Tensor x = n.input(Role::X), y = n.output(Role::Y), stats = n.output(Role::STATS);
  auto tx = cx.tensor(x), ty = cx.tensor(y);
  if (!tx) return tx.status();
  if (!ty) return ty.status();
  cudnnBackendDescriptor_t ts = nullptr;
  if (stats) {
    auto r = cx.tensor(stats);
    if (!r) return r.status();
    ts = r.value();
  }
  return add_softmax(cx, what, cx.view(x).dim, tx.value(), ty.value(), ts);
}

}  // namespace dnngraph::cudnn
