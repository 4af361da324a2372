// reshape: the cuDNN frontend's graph.reshape(input, reshape_mode, name); the caller sets the
// returned tensor's dims (or passes out_dims).
#include "common.hpp"

namespace dnngraph::py {

void bind_op_reshape(nb::class_<PyGraph>& cls) {
  cls.def(
      "reshape",
      [](PyGraph& g, ir::Tensor input, bool logical, std::optional<std::vector<int64_t>> out_dims,
         std::string name) {
        ir::Tensor y =
            g.graph.reshape(input, {logical}, op_options(DataType::NotSet, std::move(name)));
        if (out_dims) y->set_dim(*out_dims);
        return y;
      },
      nb::arg("input"), nb::arg("logical") = false, nb::arg("out_dims") = nb::none(),
      nb::arg("name") = "",
      "input with other dims: set the result's dims (set_dim, or out_dims). logical=False "
      "(the frontend's VIEW_ONLY) reads input's memory with the result's dims and strides (both "
      "packed); logical=True lists the elements in row-major order. The result's strides "
      "default to packed channels-last (dim 1 innermost) from rank 2 up, as in the frontend.");
  frontend_form(cls, "reshape", {"input", "reshape_mode", "name"});
}

}  // namespace dnngraph::py
