// moe_grouped_matmul -> OPERATION_MOE_GROUPED_MATMUL (cuDNN >= 9.15) in mode NONE, with the
// attributes the frontend sets for that mode: the mode, the math precision (the node's compute
// type) and the TOKEN / WEIGHT / FIRST_TOKEN_OFFSET / OUTPUT tensors. cuDNN 9.19 reads the
// offsets as one start per expert (the last expert runs to the end of the tokens); it does not
// check them, so a bad offset is the caller's to avoid (the reference engine checks them).
// Seen on an H200 with cuDNN 9.19 (tests/gpu/moe_test.cpp, 2026-12-02): bf16 [1,512,256] x
// [4,256,256] with weights [K*N, 1, K], half with empty experts and INT64 offsets, and B*E = 6
// groups on 3 experts all matched the reference engine. GATHER and SCATTER are not lowered:
// cuDNN 9.19 hit an illegal memory access on GATHER and had no engine for SCATTER there.
#include "engines/cudnn/loader.hpp"
#include "engines/cudnn/lowering.hpp"

namespace dnngraph::cudnn {

Status lower_moe_grouped_matmul(LowerContext& cx, const ir::Node& n) {
  const std::string what = detail::cat("moe_grouped_matmul '", n.name, "'");
  if (load_info().version < 91500)
    return make_error(ErrorCode::NotSupported, what,
                      ": cuDNN's MoE grouped matmul operation needs cuDNN 9.15 or later; the "
                      "loaded cuDNN is version ",
                      load_info().version, " (use the reference engine or a newer cuDNN)");
  const ir::Tensor token = n.input(Role::TOKEN), weight = n.input(Role::WEIGHT),
                   offset = n.input(Role::FIRST_TOKEN_OFFSET), out = n.output(Role::OUTPUT);
  for (const ir::Tensor& t : {token, weight, offset, out})
    if (cx.view(t).dim.size() != 3)
      return make_error(ErrorCode::NotSupported, what, ": tensor '", t->name,
                        "' would reach cuDNN with rank ", cx.view(t).dim.size(),
                        " (the graph has tensors of higher rank); cuDNN's MoE grouped matmul "
                        "takes rank-3 tensors only: build the MoE matmul in a graph of rank-3 "
                        "tensors");
  DNNGRAPH_ASSIGN_OR_RETURN(auto tt, cx.tensor(token));
  DNNGRAPH_ASSIGN_OR_RETURN(auto tw, cx.tensor(weight));
  DNNGRAPH_ASSIGN_OR_RETURN(auto to, cx.tensor(offset));
  DNNGRAPH_ASSIGN_OR_RETURN(auto ty, cx.tensor(out));
  DNNGRAPH_ASSIGN_OR_RETURN(
      auto op, Descriptor::create(CUDNN_BACKEND_OPERATION_MOE_GROUPED_MATMUL_DESCRIPTOR, what));
  const cudnnMoeGroupedMatmulMode_t mode = CUDNN_MOE_GROUPED_MATMUL_MODE_NONE;
  DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_MODE,
                      CUDNN_TYPE_MOE_GROUPED_MATMUL_MODE, mode));
  DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_MATH_PREC, CUDNN_TYPE_DATA_TYPE,
                      to_cudnn(cx.compute_type(n))));
  DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_TOKEN_DESC, tt));
  DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_WEIGHT_DESC, tw));
  DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_FIRST_TOKEN_OFFSET_DESC, to));
  DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_OUTPUT_DESC, ty));
  return cx.add_op(std::move(op));
}

}  // namespace dnngraph::cudnn
