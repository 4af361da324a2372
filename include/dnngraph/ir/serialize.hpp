// JSON description of a graph and its stable fingerprint.
#pragma once

#include <cstdint>
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

struct FingerprintOptions {
  bool include_shapes = true;  // false: dims and strides left out (dynamic-shape graphs)
  bool include_names = false;  // names do not change the computation
};

// 128-bit stable hash: the same graph gives the same value on every machine and process.
struct Fingerprint {
  uint64_t hi = 0, lo = 0;
  std::string hex() const;  // 32 hex digits
  bool operator==(const Fingerprint&) const = default;
};
Fingerprint fingerprint(const Graph& g, FingerprintOptions opts = {});

// Graphviz DOT of the graph.
std::string to_dot(const Graph& g);

}  // namespace dnngraph::ir
