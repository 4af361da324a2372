// transpose: the cuDNN frontend's graph.transpose(input, permutation).
#include "common.hpp"

namespace dnngraph::py {

void bind_op_transpose(nb::class_<PyGraph>& cls) {
  cls.def(
      "transpose",
      [](PyGraph& g, ir::Tensor input, std::vector<int64_t> permutation, DataType compute,
         std::string name) {
        return g.graph.transpose(input, {std::move(permutation)},
                                 op_options(compute, std::move(name)));
      },
      nb::arg("input"), nb::arg("permutation"), nb::arg("compute_data_type") = DataType::NotSet,
      nb::arg("name") = "",
      "Y's dim i is input's dim permutation[i] (numpy.transpose(input, permutation)); Y keeps "
      "input's data type and, by default, its memory order.");
  frontend_form(cls, "transpose", {"input", "permutation"});
}

}  // namespace dnngraph::py
