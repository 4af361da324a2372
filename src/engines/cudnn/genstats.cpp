// genstats -> OPERATION_GEN_STATS (mode SUM_SQSUM), as the cuDNN frontend builds it: the math
// precision is X's data type. cuDNN runs it fused behind a convolution (the ConvBN pattern); a
// graph its engines cannot run is refused by the engine search with cuDNN's reason.
#include "engines/cudnn/lowering.hpp"

namespace dnngraph::cudnn {

Status lower_genstats(LowerContext& cx, const ir::Node& n) {
  const std::string what = detail::cat("genstats '", n.name, "'");
  ir::Tensor x = n.input(Role::X);
  DNNGRAPH_ASSIGN_OR_RETURN(auto tx, cx.tensor(x));
  DNNGRAPH_ASSIGN_OR_RETURN(auto ts, cx.tensor(n.output(Role::SUM)));
  DNNGRAPH_ASSIGN_OR_RETURN(auto tq, cx.tensor(n.output(Role::SQ_SUM)));
  DNNGRAPH_ASSIGN_OR_RETURN(auto od,
                            Descriptor::create(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR, what));
  DNNGRAPH_TRY(od.set(CUDNN_ATTR_OPERATION_GENSTATS_XDESC, tx));
  DNNGRAPH_TRY(od.set(CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE,
                      CUDNN_GENSTATS_SUM_SQSUM));
  DNNGRAPH_TRY(od.set(CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_TYPE_DATA_TYPE,
                      to_cudnn(x->data_type)));
  DNNGRAPH_TRY(od.set(CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, ts));
  DNNGRAPH_TRY(od.set(CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, tq));
  return cx.add_op(std::move(od));
}

}  // namespace dnngraph::cudnn
