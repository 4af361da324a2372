// Shape rules of softmax along the last dim: Y like X; STATS (log-sum-exp) has X's dims with
// the last one 1, in FLOAT unless set.
#include "ir/ops/common.hpp"

namespace dnngraph::ir {

Status infer_softmax(Node& n, const InferContext& ctx) {
  DNNGRAPH_PORT(x, required_input(n, Role::X));
  DNNGRAPH_PORT(y, required_output(n, Role::Y));
  DNNGRAPH_TRY(check_rank(n, Role::X, x, 1, SIZE_MAX));
  DNNGRAPH_TRY(infer_output(n, Role::Y, y, x->dim, x, ctx, x->data_type));
  if (Tensor stats = n.output(Role::STATS)) {
    std::vector<int64_t> dims = x->dim;
    dims.back() = 1;
    DNNGRAPH_TRY(
        infer_output(n, Role::STATS, stats, dims, x, ctx, DataType::Float, DataType::Float));
  }
  return Status::ok();
}

}  // namespace dnngraph::ir
