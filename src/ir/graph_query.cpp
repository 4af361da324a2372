// Read-only queries of ir::Graph: io tensors, lookups, and the readable table used by the CLI
// (`dnngraph validate`) and Python's __repr__.
#include <algorithm>
#include <sstream>

#include "dnngraph/ir/graph.hpp"
#include "ir/attr_fields.hpp"
#include "ir/ops/common.hpp"

namespace dnngraph::ir {

namespace {

std::vector<Tensor> io_of(const std::vector<Tensor>& tensors) {
  std::vector<Tensor> out;
  for (const Tensor& t : tensors)
    if (!t->is_virtual) out.push_back(t);
  std::stable_sort(out.begin(), out.end(), [](const Tensor& a, const Tensor& b) {
    if (a->uid_assigned != b->uid_assigned) return a->uid_assigned;  // assigned first
    return a->uid < b->uid;
  });
  return out;
}

Tensor by_uid(const std::vector<Tensor>& tensors, int64_t uid) {
  for (const Tensor& t : tensors)
    if (t->uid_assigned && t->uid == uid) return t;
  return nullptr;
}

Tensor by_name(const std::vector<Tensor>& tensors, std::string_view name) {
  for (const Tensor& t : tensors)
    if (t->name == name) return t;
  return nullptr;
}

}  // namespace

std::vector<Tensor> Graph::io_tensors() const { return io_of(tensors_); }
Tensor Graph::find_tensor_by_uid(int64_t uid) const { return by_uid(tensors_, uid); }
Tensor Graph::find_tensor_by_name(std::string_view name) const { return by_name(tensors_, name); }
std::vector<Tensor> ValidatedGraph::io_tensors() const { return io_of(tensors_); }
Tensor ValidatedGraph::find_tensor_by_uid(int64_t uid) const { return by_uid(tensors_, uid); }
Tensor ValidatedGraph::find_tensor_by_name(std::string_view name) const {
  return by_name(tensors_, name);
}

namespace {

// Left-aligned columns, two spaces apart, each as wide as its widest cell.
std::string render(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows) {
    if (width.size() < r.size()) width.resize(r.size(), 0);
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line = " ";
    for (size_t c = 0; c < r.size(); ++c) {
      line += " " + r[c];
      if (c + 1 < r.size()) line += std::string(width[c] - r[c].size() + 1, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string ports_str(const std::vector<Port>& ports) {
  std::string s;
  for (const Port& p : ports)
    s += (s.empty() ? "" : " ") + std::string(role_name(p.role)) + "='" +
         (p.tensor ? p.tensor->name : "<null>") + "'";
  return s;
}

std::string value_str(const Scalar& v) {
  std::ostringstream os;
  if (is_integral(v.type))
    os << v.i;
  else
    os << v.f;
  return os.str();
}

}  // namespace

std::string Graph::to_table() const {
  std::ostringstream os;
  os << "graph '" << name_ << "': " << nodes_.size() << " nodes, " << tensors_.size()
     << " tensors; io " << data_type_name(io_) << ", intermediate " << data_type_name(intermediate_)
     << ", compute " << data_type_name(compute_) << "; "
     << (validated_ ? "validated" : "not validated") << "\n";

  os << "nodes:\n";
  std::vector<std::vector<std::string>> rows = {
      {"#", "op", "name", "compute", "attrs", "inputs", "outputs"}};
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    rows.push_back({std::to_string(i), std::string(op_kind_name(n.kind())), n.name,
                    std::string(data_type_name(n.compute_data_type)), attr::attrs_text(n.attrs),
                    ports_str(n.inputs), ports_str(n.outputs)});
  }
  os << render(rows);

  os << "tensors:\n";
  rows = {{"uid", "name", "dims", "strides", "dtype", "kind"}};
  for (const Tensor& t : tensors_) {
    std::string kind = t->is_virtual ? "virtual" : t->is_output ? "output" : "input";
    if (t->is_pass_by_value) kind += t->value ? ",by_value=" + value_str(*t->value) : ",by_value";
    rows.push_back({t->uid_assigned ? std::to_string(t->uid) : "-", t->name, dims_str(t->dim),
                    dims_str(t->stride), std::string(data_type_name(t->data_type)), kind});
  }
  os << render(rows);
  return os.str();
}

}  // namespace dnngraph::ir
