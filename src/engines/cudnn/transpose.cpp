// transpose on the cuDNN engine: the backend's transpose operation arrived in cuDNN 9.22 (the
// frontend refuses it below that version); the headers this engine is built against (9.19)
// have none, so a graph with a transpose is refused here and runs on the reference engine.
#include "engines/cudnn/lowering.hpp"

namespace dnngraph::cudnn {

Status lower_transpose(LowerContext&, const ir::Node& n) {
  return make_error(ErrorCode::NotSupported, "transpose '", n.name,
                    "': the cuDNN engine has no transpose operation (cuDNN's arrived in 9.22; "
                    "this engine is built against an older cuDNN API); run this graph on the "
                    "CPU reference engine, or give the transposed view to the graph as a strided "
                    "input tensor instead");
}

}  // namespace dnngraph::cudnn
