// Internal: what validate(), the snapshot, JSON and the fingerprint need to know about the
// pointwise subgraphs an op carries (Node::subgraphs; today SDPA's score modifiers).
#pragma once

#include <unordered_map>
#include <vector>

#include "dnngraph/ir/ops.hpp"
#include "dnngraph/status.hpp"
#include "ir/ops/op_family.hpp"

namespace dnngraph::ir {

// The tensors that belong to n's subgraphs (each subgraph's input, then its nodes' ports that
// are not bound to n's own ports), in that order, without repeats.
std::vector<Tensor> subgraph_tensors(const Node& n);

// Whether a node of one of n's subgraphs reads t.
bool subgraphs_read(const Node& n, const Tensor& t);

// Gives n's subgraphs private copies of their own tensors (the snapshot: copies never alias
// the builder graph). `copy` maps the graph's tensors to their copies and is extended.
void copy_subgraph_tensors(Node& n, std::unordered_map<const TensorAttrs*, Tensor>& copy);

// sdpa / sdpa_backward: checks n's score modifiers against the node's options and infers their
// tensors; the score (and its gradient) is `score_dims` FLOAT. Allowed subgraph names:
// "score_mod", and "score_mod_bprop" when `backward`.
Status infer_score_mods(Node& n, const SdpaOptions& a, bool backward,
                        const std::vector<int64_t>& score_dims, const InferContext& ctx);

}  // namespace dnngraph::ir
