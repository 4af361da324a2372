// dnngraph.partition(graph, handle) and dnngraph.Partition (dnngraph/partition.hpp).
#include "dnngraph/partition.hpp"

#include "common.hpp"
#include "dnngraph/ir/json.hpp"

namespace dnngraph::py {
namespace {

// One partition as Python sees it: op names as the graph names them, their indices, and the
// partition as a standalone graph in the JSON graph format (made when partition() ran, so that
// later edits of the graph do not change it).
struct PyPartition {
  std::vector<std::string> ops;
  std::vector<int64_t> op_indices;
  bool supported = false;
  std::string reason;
  std::string json;
  bool built = false;
};

// The indices of the ops named in `anchors` (validated graph); an unknown name is an error.
Result<std::optional<std::vector<size_t>>> anchor_indices(
    const Graph& g, const std::optional<std::vector<std::string>>& anchors) {
  if (!anchors) return std::optional<std::vector<size_t>>{};
  std::vector<size_t> out;
  for (const std::string& name : *anchors) {
    size_t i = 0;
    while (i < g.nodes().size() && g.nodes()[i].name != name) ++i;
    if (i == g.nodes().size())
      return make_error(ErrorCode::InvalidArgument, "graph '", g.name(),
                        "': partition(): anchors names op '", name,
                        "', which the graph does not have; give the names of its ops");
    out.push_back(i);
  }
  return std::optional<std::vector<size_t>>(std::move(out));
}

std::vector<PyPartition> partition_py(PyGraph& self, const PyHandle* handle,
                                      const std::optional<std::vector<std::string>>& anchors) {
  HandlePtr h = handle ? handle->get() : self.ensure_handle();
  std::vector<PyPartition> out;
  Status s = Status::ok();
  {
    nb::gil_scoped_release release;
    std::unique_lock<std::shared_mutex> lock(self.mu);
    self.graph.invalidate();  // tensors may have been edited since the last validate
    s = self.graph.validate();
    PartitionOptions options;
    if (s.is_ok()) {
      auto idx = anchor_indices(self.graph, anchors);
      if (idx.is_ok())
        options.anchors = std::move(idx).value();
      else
        s = idx.status();
    }
    auto parts = s.is_ok() ? partition(self.graph, h, options) : Result<std::vector<Partition>>(s);
    if (!parts.is_ok()) s = parts.status();
    for (size_t k = 0; s.is_ok() && k < parts->size(); ++k) {
      const Partition& p = (*parts)[k];
      PyPartition py{{}, {}, p.supported, p.reason, {}, p.built};
      for (size_t i : p.ops) {
        py.ops.push_back(self.graph.nodes()[i].name);
        py.op_indices.push_back(static_cast<int64_t>(i));
      }
      auto sub = partition_graph(self.graph, p);
      if (!sub.is_ok()) {
        s = sub.status();
        break;
      }
      py.json = ir::to_json(**sub);
      out.push_back(std::move(py));
    }
  }
  throw_if_error(s);
  return out;
}

}  // namespace

void bind_partition(nb::module_& m) {
  nb::class_<PyPartition>(m, "Partition",
                          "A group of a graph's ops that one engine runs as one graph "
                          "(supported), or one op it cannot run (not supported, with the reason).")
      .def_ro("ops", &PyPartition::ops, "The ops' names, in topological order.")
      .def_ro("op_indices", &PyPartition::op_indices,
              "The ops' indices in the graph's op list (topological, as validate() sorts it).")
      .def_ro("supported", &PyPartition::supported)
      .def_ro("built", &PyPartition::built,
              "A plan was built for it (what can run). False when refused, and when supported "
              "but holding none of the anchors given to partition() (not built).")
      .def_ro("reason", &PyPartition::reason,
              "Empty when supported and built; else why the engine refused the op (naming it), "
              "or why it was not built.")
      .def(
          "subgraph_json", [](const PyPartition& p) { return p.json; },
          "The partition as a standalone graph in the JSON graph format: the same tensors "
          "(names, uids, dims, strides, types), those read from outside the partition as "
          "non-virtual inputs, those read outside it (or non-virtual in the graph) as outputs.")
      .def("__repr__", [](const PyPartition& p) {
        std::string ops;
        for (const std::string& o : p.ops) ops += (ops.empty() ? "" : ", ") + o;
        return "Partition(" + std::string(p.supported ? "supported" : "unsupported") + ", ops=[" +
               ops + "]" + (p.reason.empty() ? "" : ", reason=" + p.reason) + ")";
      });
  m.def("partition", &partition_py, nb::arg("graph"), nb::arg("handle") = nb::none(),
        nb::arg("anchors") = nb::none(),
        "Splits the graph (validated first) into the largest groups of connected ops that the "
        "engine of `handle` (default: the graph's handle) can build as one graph, and the ops it "
        "refuses alone, with the engine's reason; in an order that runs them. The engine's "
        "answers are cached per fingerprint of the candidate graph. `anchors` (op names): only "
        "groups holding one of them are built; the others come back supported, not built.");
}

}  // namespace dnngraph::py
