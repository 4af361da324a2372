// genstats -> OPERATION_GEN_STATS (mode SUM_SQSUM), as the cuDNN frontend builds it: the math
// precision is X's data type. cuDNN runs it fused behind a convolution (the ConvBN pattern); a
// graph its engines cannot run is refused by the engine search with cuDNN's reason.
#include "engines/cudnn/lowering.hpp"

namespace dnngraph::cudnn {

Status lower_genstats(LowerContext& cx, const ir::Node& n) {
  const std::string what = detail::cat("genstats '", n.name, "'");
  ir::Tensor x = n.input(Role::X);
  auto tx = cx.tensor(x);
  auto ts = cx.tensor(n.output(Role::SUM));
  auto tq = cx.tensor(n.output(Role::SQ_SUM));
  for (auto* r : {&tx, &ts, &tq})
    if (!*r) return r->status();
  auto od = Descriptor::create(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR, what);
  if (!od) return od.status();
  DNNGRAPH_TRY(od->set(CUDNN_ATTR_OPERATION_GENSTATS_XDESC, tx.value()));
  DNNGRAPH_TRY(od->set(CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE,
                       CUDNN_GENSTATS_SUM_SQSUM));
  DNNGRAPH_TRY(od->set(CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_TYPE_DATA_TYPE,
                       to_cudnn(x->data_type)));
  DNNGRAPH_TRY(od->set(CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, ts.value()));
  DNNGRAPH_TRY(od->set(CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, tq.value()));
  return cx.add_op(std::move(od.value()));
}

}  // namespace dnngraph::cudnn
