// Canonical order of the tensors of a graph, shared by the JSON writer, the fingerprint and DOT
// so that all three number tensors the same way.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "dnngraph/ir/graph.hpp"

namespace dnngraph::ir::detail {

struct TensorIndex {
  std::vector<Tensor> list;                               // position = index
  std::unordered_map<const TensorAttrs*, int64_t> index;  // tensor -> position

  int64_t of(const Tensor& t) const {
    if (!t) return -1;
    auto it = index.find(t.get());
    return it == index.end() ? -1 : it->second;
  }
  // Appends t unless it is null or already listed; true when it was appended.
  bool add(const Tensor& t) {
    if (!t || !index.emplace(t.get(), static_cast<int64_t>(list.size())).second) return false;
    list.push_back(t);
    return true;
  }
};

// g.tensors() in order (nulls and repeats skipped), then tensors that are reachable only
// through node ports (possible after mutable_nodes() edits), in node order. Every port tensor
// therefore has an index.
inline TensorIndex index_tensors(const Graph& g) {
  TensorIndex ti;
  for (const Tensor& t : g.tensors()) ti.add(t);
  for (const Node& n : g.nodes()) {
    for (const Port& p : n.inputs) ti.add(p.tensor);
    for (const Port& p : n.outputs) ti.add(p.tensor);
  }
  return ti;
}

}  // namespace dnngraph::ir::detail
