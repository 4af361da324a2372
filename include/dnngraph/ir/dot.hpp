// The graph as Graphviz DOT.
#pragma once

#include <string>

#include "dnngraph/ir/graph.hpp"

namespace dnngraph::ir {

std::string to_dot(const Graph& g);

}  // namespace dnngraph::ir
