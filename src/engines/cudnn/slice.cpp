// Slice on the cuDNN engine. The cuDNN headers this engine is built against have no slice
// operation, and this engine binds every tensor it lowers to its own buffer (a slice would
// need its output to be a strided view into its input, at an offset). So a graph with a
// slice is refused here, with the reason, and runs on the reference engine.
#include "engines/cudnn/lowering.hpp"

namespace dnngraph::cudnn {

Status lower_slice(LowerContext&, const ir::Node& n) {
  return make_error(ErrorCode::NotSupported, "slice '", n.name,
                    "': the cuDNN engine has no slice operation (this cuDNN API has none, and the ",
                    "engine does not alias an op's output into its input); run this graph on the ",
                    "CPU reference engine, or pass the sliced region to the graph as a strided ",
                    "input tensor instead");
}

}  // namespace dnngraph::cudnn
