// A graph's stable 128-bit fingerprint (cache keys).
#pragma once

#include <cstdint>
#include <string>

#include "dnngraph/ir/graph.hpp"

namespace dnngraph::ir {

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

}  // namespace dnngraph::ir
