// reshape -> OPERATION_RESHAPE (X and Y descriptors), as the frontend builds a VIEW_ONLY
// reshape. The LOGICAL mode is an attribute that arrived in cuDNN 9.22 (the frontend refuses
// it below that version); the headers this engine is built against (9.19) have none, so a
// LOGICAL reshape is refused here and runs on the CPU reference engine.
// Not yet run on a GPU (docs/compatibility.md).
#include "engines/cudnn/lowering.hpp"

namespace dnngraph::cudnn {

Status lower_reshape(LowerContext& cx, const ir::Node& n) {
  const std::string what = detail::cat("reshape '", n.name, "'");
  if (n.as<ir::ReshapeAttrs>().logical)
    return make_error(ErrorCode::NotSupported, what,
                      ": reshape_mode LOGICAL needs cuDNN's reshape mode attribute (cuDNN 9.22 "
                      "or newer; this engine is built against an older cuDNN API); use "
                      "VIEW_ONLY on packed row-major tensors (the same result), or run this "
                      "graph on the CPU reference engine");
  DNNGRAPH_ASSIGN_OR_RETURN(auto tx, cx.tensor(n.input(Role::X)));
  DNNGRAPH_ASSIGN_OR_RETURN(auto ty, cx.tensor(n.output(Role::Y)));
  DNNGRAPH_ASSIGN_OR_RETURN(auto op,
                            Descriptor::create(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, what));
  DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, tx));
  DNNGRAPH_TRY(op.set(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, ty));
  return cx.add_op(std::move(op));
}

}  // namespace dnngraph::cudnn
