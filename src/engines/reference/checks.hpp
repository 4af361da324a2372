// Helpers for the check_* functions of the reference families: the pieces of their error
// messages and the layout checks that every family needs before it gathers a tensor.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dnngraph/ir/ops.hpp"
#include "dnngraph/status.hpp"

namespace dnngraph::reference {

// "[1,2,3]"
std::string dims_str(const std::vector<int64_t>& d);

// t has a data type and, unless it is a pass-by-value scalar, one stride per dim (else the
// gather would read outside the buffer). Messages read "<op>: <what> has no data type", with
// `what` naming the tensor, e.g. "X 'x'".
Status check_layout(const std::string& op, const std::string& what, const ir::TensorAttrs& t);

// check_layout for every input and output of n, each named "<ROLE> '<name>'".
Status check_port_layouts(const ir::Node& n, const std::string& op);

}  // namespace dnngraph::reference
