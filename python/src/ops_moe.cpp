// moe_grouped_matmul: the cuDNN frontend's graph.moe_grouped_matmul in its NONE mode (tokens
// already grouped by expert). The frontend's other keywords (mode, token_index, token_ks,
// top_k, top_k_scores) are taken, and refused unless NONE, by dnngraph/_compat/ops.py.
#include "common.hpp"

namespace dnngraph::py {

void bind_op_moe_grouped_matmul(nb::class_<PyGraph>& cls) {
  cls.def(
      "moe_grouped_matmul",
      [](PyGraph& g, ir::Tensor token, ir::Tensor weight, ir::Tensor first_token_offset,
         DataType compute, std::string name) {
        return g.graph.moe_grouped_matmul(token, weight, first_token_offset, {},
                                          op_options(compute, std::move(name)));
      },
      nb::arg("token"), nb::arg("weight"), nb::arg("first_token_offset"),
      nb::arg("compute_data_type") = DataType::NotSet, nb::arg("name") = "",
      "Mixture-of-experts grouped matmul (mode NONE): token [1,S,K], weight [E,K,N] and "
      "first_token_offset [G,1,1] (INT32 or INT64, G = B*E: the first token row of each group, "
      "starting at 0, non-decreasing, at most S; the last group runs to S) -> output [1,S,N], "
      "output[0,r] = token[0,r] @ weight[g % E] for the rows r of group g.");
  frontend_form(cls, "moe_grouped_matmul",
                {"token", "weight", "first_token_offset", "token_index", "token_ks", "mode",
                 "compute_data_type", "top_k", "name", "top_k_scores"});
}

}  // namespace dnngraph::py
