// serialize / deserialize of built graphs.
#include <nanobind/stl/string_view.h>

#include <mutex>

#include "common.hpp"

namespace dnngraph::py {

namespace {

void deserialize_into(PyGraph& self, const HandlePtr& handle, nb::bytes blob) {
  std::unique_lock<std::shared_mutex> lock(self.mu, std::defer_lock);
  lock_released_gil(lock);
  std::string_view bytes(blob.c_str(), blob.size());
  // The graph's tensors are replaced: drop the uid cache that points at the old ones.
  self.by_uid.clear();
  throw_if_error(self.graph.deserialize(handle, bytes));
  self.handle = handle;
}

}  // namespace

void bind_serialize(nb::class_<PyGraph>& cls) {
  cls.def(
      "serialize",
      [](const PyGraph& self) {
        std::string s = unwrap(self.graph.serialize());
        return nb::bytes(s.data(), s.size());
      },
      "The built graph as bytes (graph description, engine, selected plan); see deserialize.");
  cls.def(
      "deserialize",
      [](PyGraph& self, const PyHandle& handle, nb::bytes blob) {
        deserialize_into(self, handle.get(), blob);
      },
      nb::arg("handle"), nb::arg("blob"),
      "Restores a serialized graph on `handle`, ready to execute (no heuristics, no rebuild "
      "where the engine stored its plan). Execute it with uid-keyed packs.");
  cls.def(
      "deserialize",
      [](PyGraph& self, nb::bytes blob) { deserialize_into(self, self.ensure_handle(), blob); },
      nb::arg("blob"), "deserialize(blob) on the graph's own handle.");
}

}  // namespace dnngraph::py
