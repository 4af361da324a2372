// Shape rules of matmul: C[..., M, N] = A[..., M, K] x B[..., K, N]. A and B have the same
// rank (>= 2); each batch dim is equal or 1 on one side (it broadcasts).
#include "ir/ops/common.hpp"

namespace dnngraph::ir {

Status infer_matmul(Node& n, const InferContext& ctx) {
  DNNGRAPH_PORT(a, required_input(n, Role::A));
  DNNGRAPH_PORT(b, required_input(n, Role::B));
  DNNGRAPH_PORT(c, required_output(n, Role::C));
  if (n.as<MatmulAttrs>().padding_value)
    return make_error(ErrorCode::NotSupported, op_label(n),
                      ": padding_value is reserved and must be unset");
  DNNGRAPH_TRY(check_rank(n, Role::A, a, 2, SIZE_MAX));
  const size_t r = a->dim.size();
  if (b->dim.size() != r)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(Role::A, a),
                      " has rank ", r, " (dims ", dims_str(a->dim), ") but ",
                      port_label(Role::B, b), " has rank ", b->dim.size(), " (dims ",
                      dims_str(b->dim), "); both need the same rank");
  if (a->dim[r - 1] != b->dim[r - 2])
    return make_error(ErrorCode::InvalidGraph, op_label(n),
                      ": inner dims differ: ", port_label(Role::A, a), " has K=", a->dim[r - 1],
                      " (dim ", r - 1, ") but ", port_label(Role::B, b), " has K=", b->dim[r - 2],
                      " (dim ", r - 2, ")");
  std::vector<int64_t> dims(r);
  for (size_t i = 0; i + 2 < r; ++i) {
    const int64_t da = a->dim[i], db = b->dim[i];
    if (da != db && da != 1 && db != 1)
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": batch dim ", i,
                        " differs: ", port_label(Role::A, a), " has ", da, " but ",
                        port_label(Role::B, b), " has ", db, " (they must match or one be 1)");
    dims[i] = da == 1 ? db : da;
  }
  dims[r - 2] = a->dim[r - 2];
  dims[r - 1] = b->dim[r - 1];
  // C is row-major by default whatever A's layout: A is often a transposed view, and a
  // transposed result is rarely what the caller wants.
  return infer_output(n, Role::C, c, dims, nullptr, ctx, a->data_type);
}

}  // namespace dnngraph::ir
