// Shared by the builder methods (graph_builder.cpp, sdpa_fp8_builder.cpp, ops/<op>.cpp).
#pragma once

#include <initializer_list>

#include "dnngraph/ir/ops.hpp"

namespace dnngraph::ir {

// Binds `tensors` to the first input ports of n's op table entry, in the table's order
// (op_info(n.kind()).inputs); null tensors are left out.
void bind_leading_inputs(Node& n, std::initializer_list<Tensor> tensors);

}  // namespace dnngraph::ir
