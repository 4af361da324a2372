// reduction: the cuDNN frontend's graph.reduction(input, mode, compute_data_type, name).
#include "common.hpp"

namespace dnngraph::py {

void bind_op_reduction(nb::class_<PyGraph>& cls) {
  constexpr DataType kNotSet = DataType::NotSet;
  cls.def(
      "reduction",
      [](PyGraph& g, ir::Tensor input, ReductionMode mode, DataType compute, std::string name) {
        return g.graph.reduction(input, {mode}, op_options(compute, std::move(name)));
      },
      nb::arg("input"), nb::arg("mode"), nb::arg("compute_data_type") = kNotSet,
      nb::arg("name") = "",
      "Reduces over every dim where the output's dim is 1 (default: all ones; set_dim to keep "
      "dims).");
  frontend_form(cls, "reduction", {"input", "group_offset"});
}

}  // namespace dnngraph::py
