// matmul: the cuDNN frontend's graph.matmul(A, B, compute_data_type, name).
#include "common.hpp"

namespace dnngraph::py {

void bind_op_matmul(nb::class_<PyGraph>& cls) {
  cls.def(
      "matmul",
      [](PyGraph& self, ir::Tensor A, ir::Tensor B, DataType compute, std::string name) {
        return self.graph.matmul(A, B, {}, op_options(compute, std::move(name)));
      },
      nb::arg("A"), nb::arg("B"), nb::arg("compute_data_type") = DataType::NotSet,
      nb::arg("name") = "", "C[..., M, N] = A[..., M, K] @ B[..., K, N] (batch dims broadcast).");
  frontend_form(cls, "matmul", {"A", "B", "compute_data_type", "padding", "name"});
}

}  // namespace dnngraph::py
