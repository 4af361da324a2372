// softmax along the last dim, with optional log-sum-exp statistics.
#include "common.hpp"

namespace dnngraph::py {

void bind_op_softmax(nb::class_<PyGraph>& cls) {
  constexpr DataType kNotSet = DataType::NotSet;
  cls.def(
      "softmax",
      [](PyGraph& g, ir::Tensor input, bool generate_stats, DataType compute, std::string name) {
        return as_tuple(
            g.graph.softmax(input, generate_stats, op_options(compute, std::move(name))));
      },
      nb::arg("input"), nb::arg("generate_stats") = false, nb::arg("compute_data_type") = kNotSet,
      nb::arg("name") = "",
      "Softmax along the last dim. Returns (Y, stats); stats (log-sum-exp) is None unless "
      "generate_stats.");
}

}  // namespace dnngraph::py
