// Shape rules of moe_grouped_matmul (the cuDNN frontend's NONE mode): TOKEN [1,S,K], WEIGHT
// [E,K,N] and FIRST_TOKEN_OFFSET [G,1,1] (INT32 or INT64, one start row per group; G = B*E,
// group g uses expert g % E) -> OUTPUT [1,S,N], row-major unless set. The offsets' values (start at
// 0, never decrease, at most S) are data, checked by the engines at execute time.
#include "ir/ops/common.hpp"

namespace dnngraph::ir {

Status infer_moe_grouped_matmul(Node& n, const InferContext& ctx) {
  DNNGRAPH_PORT(token, required_input(n, Role::TOKEN));
  DNNGRAPH_PORT(weight, required_input(n, Role::WEIGHT));
  DNNGRAPH_PORT(offset, required_input(n, Role::FIRST_TOKEN_OFFSET));
  DNNGRAPH_PORT(out, required_output(n, Role::OUTPUT));
  DNNGRAPH_TRY(check_rank(n, Role::TOKEN, token, 3, 3));
  DNNGRAPH_TRY(check_rank(n, Role::WEIGHT, weight, 3, 3));
  if (token->dim[0] != 1)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(Role::TOKEN, token),
                      " has dims ", dims_str(token->dim),
                      "; expected [1,S,K] (all tokens in dim 1, grouped by expert)");
  const int64_t experts = weight->dim[0], k = token->dim[2];
  if (weight->dim[1] != k)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(Role::WEIGHT, weight),
                      " has dims ", dims_str(weight->dim), " but ", port_label(Role::TOKEN, token),
                      " has K=", k, " (dims ", dims_str(token->dim), "); expected WEIGHT [E,", k,
                      ",N]");
  DNNGRAPH_TRY(check_rank(n, Role::FIRST_TOKEN_OFFSET, offset, 3, 3));
  const int64_t groups = offset->dim[0];
  if (offset->dim[1] != 1 || offset->dim[2] != 1 || groups < 1 || groups % experts != 0)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": ",
                      port_label(Role::FIRST_TOKEN_OFFSET, offset), " has dims ",
                      dims_str(offset->dim), "; expected [G,1,1] with G a multiple of E=", experts,
                      " (from ", port_label(Role::WEIGHT, weight),
                      "): the first row of each group, group g using expert g % E (cuDNN 9.19 "
                      "takes the starts only; the last group runs to the end of the tokens)");
  if (offset->data_type != DataType::Int32 && offset->data_type != DataType::Int64)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": ",
                      port_label(Role::FIRST_TOKEN_OFFSET, offset),
                      " must be INT32 or INT64 but is ", data_type_name(offset->data_type),
                      "; set its data type (set_data_type)");
  if (offset->is_pass_by_value)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": ",
                      port_label(Role::FIRST_TOKEN_OFFSET, offset),
                      " must be in memory, not pass-by-value");
  for (auto [role, t] : {std::pair{Role::TOKEN, token}, std::pair{Role::WEIGHT, weight}})
    if (t->data_type != DataType::NotSet && !is_floating(t->data_type) &&
        t->data_type != DataType::Int8)
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(role, t),
                        " has data type ", data_type_name(t->data_type),
                        "; expected a floating-point type (or INT8)");
  return infer_output(n, Role::OUTPUT, out, {1, token->dim[1], weight->dim[2]}, nullptr, ctx,
                      token->data_type);
}

}  // namespace dnngraph::ir
