// genstats: the cuDNN frontend's graph.genstats(input) -> (SUM, SQ_SUM), per channel.
#include "common.hpp"

namespace dnngraph::py {

void bind_op_genstats(nb::class_<PyGraph>& cls) {
  cls.def(
      "genstats",
      [](PyGraph& g, ir::Tensor input, DataType compute, std::string name) {
        return as_tuple(g.graph.genstats(input, op_options(compute, std::move(name))));
      },
      nb::arg("input"), nb::arg("compute_data_type") = DataType::NotSet, nb::arg("name") = "",
      "Per-channel statistics: returns (SUM, SQ_SUM), the sum and the sum of squares of input "
      "over every dim but dim 1 (dims [1,C,1,..]).");
  frontend_form(cls, "genstats", {"input"});
}

}  // namespace dnngraph::py
