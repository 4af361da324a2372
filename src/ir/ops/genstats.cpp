// Shape rules of genstats (the cuDNN frontend's per-channel statistics): SUM and SQ_SUM are
// the sum and the sum of squares of X over every dim but the channel dim (dim 1), dims
// [1,C,1,...,1]. Their data type is the graph's (io for outputs, intermediate for virtual
// tensors), else FLOAT.
#include "ir/ops/common.hpp"

namespace dnngraph::ir {

Status infer_genstats(Node& n, const InferContext& ctx) {
  DNNGRAPH_PORT(x, required_input(n, Role::X));
  DNNGRAPH_PORT(sum, required_output(n, Role::SUM));
  DNNGRAPH_PORT(sq_sum, required_output(n, Role::SQ_SUM));
  DNNGRAPH_TRY(check_rank(n, Role::X, x, 2, SIZE_MAX));
  std::vector<int64_t> dims(x->dim.size(), 1);
  dims[1] = x->dim[1];
  DNNGRAPH_TRY(infer_output(n, Role::SUM, sum, dims, nullptr, ctx, DataType::Float));
  return infer_output(n, Role::SQ_SUM, sq_sum, dims, nullptr, ctx, DataType::Float);
}

}  // namespace dnngraph::ir
