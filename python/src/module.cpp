// dnngraph._dnngraph: the native part of the dnngraph Python package. The package's
// __init__.py re-exports it; see docs/python.md.
#include "common.hpp"

NB_MODULE(_dnngraph, m) {
  using namespace dnngraph::py;
  m.doc() = "dnngraph: deep-learning computations described as graphs (native module)";
  bind_errors(m);
  bind_enums(m);
  bind_handle(m);
  bind_device_properties(m);
  bind_tensor(m);
  nb::class_<PyGraph> graph(m, "pygraph",
                            "A graph of tensors and operations with its build pipeline:\n"
                            "validate -> build_operation_graph -> create_execution_plans ->\n"
                            "check_support -> build_plans -> execute.");
  bind_graph(m, graph);
#define DNNGRAPH_OP_BIND_CALL(kind, name, Attrs, in, out) bind_op_##name(graph);
  DNNGRAPH_OPS(DNNGRAPH_OP_BIND_CALL)
#undef DNNGRAPH_OP_BIND_CALL
  bind_execute(m, graph);
  bind_serialize(graph);
  bind_log(m);
  bind_tune(graph);
  bind_partition(m);
  // Used by __init__.py at exit, where torch keeps graphs alive that nanobind would report.
  m.def("_set_leak_warnings", [](bool on) { nb::set_leak_warnings(on); });
}
