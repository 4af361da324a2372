#include "engines/reference/checks.hpp"

#include <sstream>

namespace dnngraph::reference {

std::string dims_str(const std::vector<int64_t>& d) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < d.size(); ++i) os << (i ? "," : "") << d[i];
  os << "]";
  return os.str();
}

Status check_layout(const std::string& op, const std::string& what, const ir::TensorAttrs& t) {
  if (t.data_type == DataType::NotSet)
    return make_error(ErrorCode::InvalidGraph, op, ": ", what, " has no data type");
  if (!t.value && t.stride.size() != t.dim.size())
    return make_error(ErrorCode::InvalidGraph, op, ": ", what, " has ", t.dim.size(), " dims but ",
                      t.stride.size(), " strides");
  return Status::ok();
}

Status check_port_layouts(const ir::Node& n, const std::string& op) {
  for (const auto* ports : {&n.inputs, &n.outputs})
    for (const ir::Port& p : *ports)
      DNNGRAPH_TRY(check_layout(
          op, std::string(ir::role_name(p.role)) + " '" + p.tensor->name + "'", *p.tensor));
  return Status::ok();
}

}  // namespace dnngraph::reference
