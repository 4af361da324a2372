// The graph's JSON description (docs/json-format.md).
#pragma once

#include <string>
#include <string_view>

#include "dnngraph/ir/graph.hpp"
#include "dnngraph/status.hpp"

namespace dnngraph::ir {

// Current version of the JSON description ("dnngraph_version" field).
inline constexpr int kJsonVersion = 1;

// Exact description of the graph as written by the user plus what validate() inferred.
std::string to_json(const Graph& g, int indent = 2);
// Loads a description; rejects unknown versions and malformed input with a clear error.
Status from_json(std::string_view text, Graph& out);

}  // namespace dnngraph::ir
