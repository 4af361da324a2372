// Graph partitions: a graph split into the largest groups of connected ops that the engine of a
// handle can run as one graph, plus the ops it cannot run at all (docs/torch.md, "Graph
// partitions"). The torch.compile backend cuts the ATen graphs it is given this way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dnngraph/engines/handle.hpp"
#include "dnngraph/graph.hpp"
#include "dnngraph/status.hpp"

namespace dnngraph {

struct Partition {
  // Indices into the graph's op list (Graph::nodes(), topologically sorted by validate()),
  // ascending.
  std::vector<std::size_t> ops;
  bool supported = false;
  // Empty when supported and built; otherwise why the engine refused the op (its own words,
  // naming the op), or why a supported partition was not built (PartitionOptions::anchors).
  std::string reason;
  // A plan was built for it. False for a partition refused, and for one the engine accepts at
  // check_support that holds none of PartitionOptions::anchors (not built, so not claimable).
  bool built = false;
};

struct PartitionOptions {
  // Indices of ops (as in Partition::ops). Given: only a partition holding one of them is built
  // (none, when empty); the others are returned supported but not built, and a group without a
  // plan is not split further. A caller that will run only such partitions (the torch.compile
  // backend claims only those with a GEMM, convolution, norm or attention) saves the others'
  // builds, which for cuDNN's runtime-compiled pointwise graphs take hundreds of milliseconds
  // each. Not given: every supported partition is built.
  std::optional<std::vector<std::size_t>> anchors;
};

// Splits a validated graph (validate() first: it sorts the ops) for the engine that runs on h's
// device. A connected component (ops linked by the tensors one makes and another reads) that the
// engine builds as one graph is one partition, asked once. The ops of any other component are
// walked in topological order; an op joins the groups whose outputs it reads
// when the union stays convex (no path leaves it and comes back) and the engine can build the
// union as one graph; else it starts a group of its own if the engine takes it alone, and is
// an unsupported partition of one op otherwise. "Can build" is the pipeline's answer up to
// check_support (validate with the engine's prechecks, build_operation_graph,
// create_execution_plans with heuristics A then FALLBACK, check_support). Each partition settled
// on is then built (a plan, kept by the plan cache); one that gets no plan is split into its
// ops, each claimed alone if a plan builds for it, unsupported with the reason otherwise. The
// answers are cached for the process per device, engines and fingerprint of the candidate graph
// with its uids renumbered (so the same ops on other tensors, the next layer, ask no more).
// Partitions come in an order that runs them: every partition after those whose outputs it
// reads.
Result<std::vector<Partition>> partition(const Graph& g, const HandlePtr& h,
                                         const PartitionOptions& options = {});

// The partition `p` of g as a standalone graph: copies of its ops and tensors (same names, uids,
// dims, strides and data types), where a tensor read from outside the partition becomes a
// non-virtual input and one read outside it (or non-virtual in g) a non-virtual output. The
// result is validated; ir::to_json() writes it.
Result<std::unique_ptr<Graph>> partition_graph(const Graph& g, const Partition& p);

// The support cache of partition(): {entries, hits, misses} since the last clear.
std::vector<int64_t> partition_cache_stats();
void clear_partition_cache();

}  // namespace dnngraph
