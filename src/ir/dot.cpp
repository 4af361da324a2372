// Graphviz DOT of a graph: tensors are ellipses (dashed when virtual, doubled when outputs),
// ops are boxes with their kind and key attributes, edges carry the port role.
// Ids are t<index>/n<index>, so names only ever appear inside escaped labels.
#include <cmath>
#include <sstream>
#include <string>

#include "dnngraph/ir/dot.hpp"
#include "ir/attr_fields.hpp"
#include "ir/serialize_index.hpp"

namespace dnngraph::ir {
namespace {

// Escapes a string for a double-quoted DOT label; "\n" (backslash n) is added by callers.
std::string escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';  // control characters (newlines included) would break the label
    } else {
      out += c;
    }
  }
  return out;
}

std::string ints(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

std::string num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// The node's attributes that differ from their defaults, then its compute type (escaped by
// the caller).
std::string key_attrs(const Node& n) {
  std::string s = attr::attrs_text(n.attrs);
  if (n.compute_data_type != DataType::NotSet)
    s += (s.empty() ? "" : " ") + std::string("compute=") +
         std::string(data_type_name(n.compute_data_type));
  return s;
}

std::string tensor_label(const TensorAttrs& t) {
  std::string s =
      escape(t.name) + "\\n" + ints(t.dim) + " " + std::string(data_type_name(t.data_type));
  if (t.value) {
    s += "\\n= " + (is_integral(t.value->type) ? std::to_string(t.value->i) : num(t.value->f));
  }
  if (t.uid_assigned) s += "\\nuid " + std::to_string(t.uid);
  return s;
}

}  // namespace

std::string to_dot(const Graph& g) {
  const detail::TensorIndex ti = detail::index_tensors(g);
  std::ostringstream os;
  os << "digraph \"" << escape(g.name().empty() ? "dnngraph" : g.name()) << "\" {\n";
  os << "  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n"
     << "  edge [fontname=\"Helvetica\", fontsize=9];\n";
  for (size_t i = 0; i < ti.list.size(); ++i) {
    const TensorAttrs& t = *ti.list[i];
    std::string style = t.is_virtual ? "dashed" : "solid";
    if (t.is_pass_by_value) style += ",filled";
    os << "  t" << i << " [shape=ellipse, style=\"" << style << "\"";
    if (t.is_pass_by_value) os << ", fillcolor=\"lightyellow\"";
    if (t.is_output) os << ", peripheries=2";
    os << ", label=\"" << tensor_label(t) << "\"];\n";
  }
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    os << "  n" << i << " [shape=box, style=\"rounded,filled\", fillcolor=\"lightblue\", label=\""
       << op_kind_name(n.kind()) << " '" << escape(n.name) << "'";
    std::string attrs = key_attrs(n);
    if (!attrs.empty()) os << "\\n" << escape(attrs);
    os << "\"];\n";
    for (const Port& p : n.inputs) {
      int64_t t = ti.of(p.tensor);
      if (t >= 0)
        os << "  t" << t << " -> n" << i << " [label=\"" << escape(std::string(role_name(p.role)))
           << "\"];\n";
    }
    for (const Port& p : n.outputs) {
      int64_t t = ti.of(p.tensor);
      if (t >= 0)
        os << "  n" << i << " -> t" << t << " [label=\"" << escape(std::string(role_name(p.role)))
           << "\"];\n";
    }
  }
  os << "}\n";
  return os.str();
}

}  // namespace dnngraph::ir
