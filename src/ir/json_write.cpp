// Writing the JSON description of a graph (format: docs/json-format.md; reading: json.cpp).
// Only json.cpp and this file include nlohmann/json, so the rest of the library and its users
// never see it. Writing is exact: every field of the graph, its tensors and its nodes is
// written, so that from_json(to_json(g)) rebuilds an equal graph.
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include <nlohmann/json.hpp>

#include "dnngraph/ir/json.hpp"
#include "ir/attr_fields.hpp"
#include "ir/serialize_index.hpp"
#include "ir/subgraph.hpp"

namespace dnngraph::ir {
namespace {

// Ordered: objects keep the field order we write, and port order survives a round trip.
using Json = nlohmann::ordered_json;

// JSON has no NaN or infinity: they are written as strings so every double round-trips.
Json double_json(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}
Json dtype_json(DataType t) { return std::string(data_type_name(t)); }

// One attribute field: optionals only when set (absent = unset when reading), enumerations by
// name, everything else as is.
template <class T>
void put_field(Json& j, const char* key, const T& v) {
  if constexpr (attr::is_optional<T>::value) {
    if (v) put_field(j, key, *v);
  } else if constexpr (std::is_enum_v<T>) {
    j[key] = std::string(attr::EnumNames<T>::name(v));
  } else if constexpr (std::is_same_v<T, double>) {
    j[key] = double_json(v);
  } else {
    j[key] = v;
  }
}

Json attrs_json(const OpAttrs& attrs) {
  Json j = Json::object();
  std::visit(
      [&](const auto& a) {
        for_each_field(a, [&](const char* key, const auto& field, FieldUse = FieldUse::Optional) {
          put_field(j, key, field);
        });
      },
      attrs);
  return j;
}

Json tensor_json(const TensorAttrs& t) {
  Json j = Json::object();
  j["name"] = t.name;
  j["uid"] = t.uid;
  j["uid_assigned"] = t.uid_assigned;
  j["dim"] = t.dim;
  j["stride"] = t.stride;
  j["data_type"] = dtype_json(t.data_type);
  j["virtual"] = t.is_virtual;
  j["output"] = t.is_output;
  j["pass_by_value"] = t.is_pass_by_value;
  // Written only when set, so files without ragged tensors stay as they were.
  if (t.ragged_offset_multiplier != 1) j["ragged_offset_multiplier"] = t.ragged_offset_multiplier;
  if (t.value) {
    Json v = Json::object();
    v["data_type"] = dtype_json(t.value->type);
    v["float"] = double_json(t.value->f);
    v["int"] = t.value->i;
    j["value"] = std::move(v);
  } else {
    j["value"] = nullptr;
  }
  return j;
}

Json ports_json(const std::vector<Port>& ports, const detail::TensorIndex& ti) {
  Json j = Json::object();
  for (const Port& p : ports) {
    int64_t idx = ti.of(p.tensor);
    j[std::string(role_name(p.role))] = idx < 0 ? Json(nullptr) : Json(idx);
  }
  return j;
}

// A node; its subgraphs (score modifiers) list their own tensors in "subgraph_tensors" and refer
// to tensors by index into the graph's "tensors" followed by those.
Json node_json(const Node& n, const detail::TensorIndex& ti) {
  Json j = Json::object();
  j["name"] = n.name;
  j["kind"] = std::string(op_kind_name(n.kind()));
  j["compute_data_type"] = dtype_json(n.compute_data_type);
  j["attrs"] = attrs_json(n.attrs);
  j["inputs"] = ports_json(n.inputs, ti);
  j["outputs"] = ports_json(n.outputs, ti);
  if (n.subgraphs.empty()) return j;
  detail::TensorIndex local = ti;
  Json own = Json::array();
  for (const Tensor& t : subgraph_tensors(n))
    if (local.add(t)) own.push_back(tensor_json(*t));
  j["subgraph_tensors"] = std::move(own);
  Json subs = Json::array();
  for (const Subgraph& sg : n.subgraphs) {
    Json sj = Json::object();
    sj["name"] = sg.name;
    sj["input"] = local.of(sg.input);
    sj["output"] = local.of(sg.output);
    Json sn = Json::array();
    for (const Node& m : sg.nodes) sn.push_back(node_json(m, local));
    sj["nodes"] = std::move(sn);
    subs.push_back(std::move(sj));
  }
  j["subgraphs"] = std::move(subs);
  return j;
}

// Names may hold any bytes: invalid UTF-8 is replaced rather than thrown on.
std::string scalar_text(const Json& v) {
  return v.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// A container of scalars on one line, as people write it: [4, 128, 64] or {"A": 0, "B": 1}.
std::string flat_line(const Json& v) {
  std::string out = v.is_array() ? "[" : "{";
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it != v.begin()) out += ", ";
    if (v.is_object()) out += scalar_text(Json(it.key())) + ": ";
    out += scalar_text(*it);
  }
  return out + (v.is_array() ? "]" : "}");
}

// Pretty printing with containers of scalars (dims, strides, ports) kept on one line when
// short, which nlohmann's indented dump cannot do. Our documents are four levels deep at most.
void pretty(const Json& v, int indent, int depth, std::string& out) {
  if (!(v.is_array() || v.is_object()) || v.empty()) {
    out += scalar_text(v);
    return;
  }
  bool flat = true;
  for (const Json& e : v) flat = flat && !e.is_array() && !e.is_object();
  if (flat) {
    std::string line = flat_line(v);
    if (line.size() <= 80) {
      out += line;
      return;
    }
  }
  const std::string pad(static_cast<size_t>(indent * (depth + 1)), ' ');
  out += v.is_array() ? "[" : "{";
  for (auto it = v.begin(); it != v.end(); ++it) {
    out += (it == v.begin() ? "\n" : ",\n") + pad;
    if (v.is_object()) out += scalar_text(Json(it.key())) + ": ";
    pretty(*it, indent, depth + 1, out);
  }
  out += "\n" + std::string(static_cast<size_t>(indent * depth), ' ');
  out += v.is_array() ? "]" : "}";
}

}  // namespace

std::string to_json(const Graph& g, int indent) {
  const detail::TensorIndex ti = detail::index_tensors(g);
  Json doc = Json::object();
  doc["dnngraph_version"] = kJsonVersion;
  doc["name"] = g.name();
  doc["io_data_type"] = dtype_json(g.io_data_type());
  doc["intermediate_data_type"] = dtype_json(g.intermediate_data_type());
  doc["compute_data_type"] = dtype_json(g.compute_data_type());
  doc["dynamic_shape"] = g.dynamic_shape_enabled();
  if (g.sm_count() != Graph::kAllSms) doc["sm_count"] = g.sm_count();  // only when set
  Json tensors = Json::array();
  for (const Tensor& t : ti.list) tensors.push_back(tensor_json(*t));
  doc["tensors"] = std::move(tensors);
  Json nodes = Json::array();
  for (const Node& n : g.nodes()) nodes.push_back(node_json(n, ti));
  doc["nodes"] = std::move(nodes);
  if (indent < 0) return scalar_text(doc);
  std::string out;
  pretty(doc, indent, 0, out);
  return out;
}

}  // namespace dnngraph::ir
