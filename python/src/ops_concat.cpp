// concatenate: the cuDNN frontend's graph.concatenate(inputs, axis, in_place_index, name).
#include "common.hpp"

namespace dnngraph::py {

void bind_op_concatenate(nb::class_<PyGraph>& cls) {
  cls.def(
      "concatenate",
      [](PyGraph& g, std::vector<ir::Tensor> inputs, int64_t axis,
         std::optional<int64_t> in_place_index, std::string name) {
        if (inputs.empty() || inputs.size() > ir::kConcatMaxInputs)
          throw nb::value_error(("concatenate: " + std::to_string(inputs.size()) +
                                 " inputs; it joins 1 to " + std::to_string(ir::kConcatMaxInputs) +
                                 " tensors (join more in two steps)")
                                    .c_str());
        ir::ConcatAttrs a;
        a.axis = axis;
        a.in_place_index = in_place_index;
        return g.graph.concatenate(inputs, a, op_options(DataType::NotSet, std::move(name)));
      },
      nb::arg("inputs"), nb::arg("axis"), nb::arg("in_place_index") = nb::none(),
      nb::arg("name") = "",
      "The inputs joined along axis (numpy.concatenate); they agree on every other dim and on "
      "the data type. in_place_index names an input that already lives in its part of the "
      "output's memory.");
  frontend_form(cls, "concatenate", {"inputs", "axis", "in_place_index", "name"});
}

}  // namespace dnngraph::py
