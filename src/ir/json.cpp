// Reading the JSON description of a graph (format: docs/json-format.md; writing:
// json_write.cpp). Only these two files include nlohmann/json, so the rest of the library and
// its users never see it. Reading is strict about types, names and references (a typo must
// not silently become a default) but lets hand-written files leave fields out; they then take
// the defaults of the C++ structs.
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

const char* kind_of(const Json& v) {
  if (v.is_number_float()) return "a non-integer number";
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return "an integer too large for 64 bits";
  if (v.is_number()) return "an integer";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_null()) return "null";
  if (v.is_array()) return "an array";
  return "an object";
}

bool as_int64(const Json& v, int64_t& out) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    out = static_cast<int64_t>(u);
    return true;
  }
  if (v.is_number_integer()) {
    out = v.get<int64_t>();
    return true;
  }
  return false;
}

bool as_double(const Json& v, double& out) {
  if (v.is_number()) {
    out = v.get<double>();
    return true;
  }
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (s == "nan")
      out = std::numeric_limits<double>::quiet_NaN();
    else if (s == "inf")
      out = std::numeric_limits<double>::infinity();
    else if (s == "-inf")
      out = -std::numeric_limits<double>::infinity();
    else
      return false;
    return true;
  }
  return false;
}

// The fields of one JSON object, read with errors that say where: "tensor 2 'X': field 'dim':
// expected an array of integers, found a string".
class Fields {
 public:
  Fields(const Json& obj, std::string where) : obj_(&obj), where_(std::move(where)) {}

  const std::string& where() const { return where_; }
  const Json* get(const char* key) const {
    auto it = obj_->find(key);
    return it == obj_->end() ? nullptr : &*it;
  }
  bool has(const char* key) const { return get(key) != nullptr; }

  Status only(std::initializer_list<std::string_view> allowed) const {
    return only(std::span<const std::string_view>(allowed.begin(), allowed.size()));
  }
  Status only(std::span<const std::string_view> allowed) const {
    for (auto it = obj_->begin(); it != obj_->end(); ++it) {
      bool ok = false;
      for (std::string_view a : allowed) ok = ok || a == it.key();
      if (!ok)
        return make_error(ErrorCode::InvalidGraph, where_, ": unknown field '", it.key(), "'");
    }
    return Status::ok();
  }
  Status missing(const char* key) const {
    return make_error(ErrorCode::InvalidGraph, where_, ": missing field '", key, "'");
  }
  Status wrong(const char* key, const char* expected, const Json& v) const {
    return make_error(ErrorCode::InvalidGraph, where_, ": field '", key, "': expected ", expected,
                      ", found ", kind_of(v));
  }

  Status int64(const char* key, int64_t& out) const {
    const Json* v = get(key);
    if (v && !as_int64(*v, out)) return wrong(key, "a 64-bit integer", *v);
    return Status::ok();
  }
  Status boolean(const char* key, bool& out) const {
    const Json* v = get(key);
    if (!v) return Status::ok();
    if (!v->is_boolean()) return wrong(key, "true or false", *v);
    out = v->get<bool>();
    return Status::ok();
  }
  Status string(const char* key, std::string& out) const {
    const Json* v = get(key);
    if (!v) return Status::ok();
    if (!v->is_string()) return wrong(key, "a string", *v);
    out = v->get<std::string>();
    return Status::ok();
  }
  Status ints(const char* key, std::vector<int64_t>& out) const {
    const Json* v = get(key);
    if (!v) return Status::ok();
    if (!v->is_array()) return wrong(key, "an array of integers", *v);
    out.clear();
    for (const Json& e : *v) {
      int64_t x = 0;
      if (!as_int64(e, x)) {
        return make_error(ErrorCode::InvalidGraph, where_, ": field '", key, "' element ",
                          out.size(), ": expected a 64-bit integer, found ", kind_of(e));
      }
      out.push_back(x);
    }
    return Status::ok();
  }
  Status real(const char* key, double& out) const {
    const Json* v = get(key);
    if (v && !as_double(*v, out)) return wrong(key, "a number (or \"nan\", \"inf\", \"-inf\")", *v);
    return Status::ok();
  }
  Status opt_real(const char* key, std::optional<double>& out) const {
    const Json* v = get(key);
    if (!v || v->is_null()) return (out.reset(), Status::ok());
    double d = 0;
    if (!as_double(*v, d)) return wrong(key, "a number or null", *v);
    out = d;
    return Status::ok();
  }
  Status opt_int64(const char* key, std::optional<int64_t>& out) const {
    const Json* v = get(key);
    if (!v || v->is_null()) return (out.reset(), Status::ok());
    int64_t x = 0;
    if (!as_int64(*v, x)) return wrong(key, "a 64-bit integer or null", *v);
    out = x;
    return Status::ok();
  }
  // An enumeration written by name; `from_name` is e.g. data_type_from_name.
  template <class E, class F>
  Status name(const char* key, E& out, F from_name, const char* what) const {
    const Json* v = get(key);
    if (!v) return Status::ok();
    if (!v->is_string()) return wrong(key, "a string", *v);
    const auto& s = v->get_ref<const std::string&>();
    auto e = from_name(s);
    if (!e) {
      return make_error(ErrorCode::InvalidGraph, where_, ": field '", key, "': unknown ", what,
                        " '", s, "'");
    }
    out = *e;
    return Status::ok();
  }
  Status dtype(const char* key, DataType& out) const {
    return name(key, out, data_type_from_name, "data type");
  }
  // One attribute field, by its type (see ops.hpp).
  Status field(const char* key, bool& out) const { return boolean(key, out); }
  Status field(const char* key, int64_t& out) const { return int64(key, out); }
  Status field(const char* key, double& out) const { return real(key, out); }
  Status field(const char* key, std::vector<int64_t>& out) const { return ints(key, out); }
  Status field(const char* key, std::optional<double>& out) const { return opt_real(key, out); }
  Status field(const char* key, std::optional<int64_t>& out) const { return opt_int64(key, out); }
  template <class E>
  requires std::is_enum_v<E> Status field(const char* key, E& out)
  const { return name(key, out, attr::EnumNames<E>::parse, attr::EnumNames<E>::what); }

 private:
  const Json* obj_;
  std::string where_;
};

template <class A>
struct HasRetiredFields : std::false_type {};
template <class A>
requires requires { A::kRetiredFields; }
struct HasRetiredFields<A> : std::true_type {};

// The attribute struct A from its JSON object: every field of A is known (others are refused,
// but for fields A retired, which are ignored); a Required field must be there.
template <class A>
Status read_fields(const Fields& f, A& a) {
  std::vector<std::string_view> known;
  for_each_field(
      a, [&](const char* key, auto&, FieldUse = FieldUse::Optional) { known.push_back(key); });
  if constexpr (HasRetiredFields<A>::value)
    known.insert(known.end(), A::kRetiredFields.begin(), A::kRetiredFields.end());
  DNNGRAPH_TRY(f.only(known));
  Status status;
  for_each_field(a, [&](const char* key, auto& field, FieldUse use = FieldUse::Optional) {
    if (!status.is_ok()) return;
    if (use == FieldUse::Required && !f.has(key))
      status = f.missing(key);
    else
      status = f.field(key, field);
  });
  return status;
}

// Attributes of the family `kind`; `j` is the node's "attrs" object (or an empty one).
Status read_attrs(OpKind kind, const Fields& f, OpAttrs& out) {
  switch (kind) {
#define DNNGRAPH_OP_READ(k, name, Attrs, in, out_) \
  case OpKind::k:                                  \
    return read_fields(f, out.emplace<Attrs>());
    DNNGRAPH_OPS(DNNGRAPH_OP_READ)
#undef DNNGRAPH_OP_READ
  }
  return make_error(ErrorCode::Internal, f.where(), ": unhandled op kind");
}

Status read_value(const Fields& t, std::optional<Scalar>& out) {
  const Json* v = t.get("value");
  if (!v || v->is_null()) return Status::ok();
  if (!v->is_object()) return t.wrong("value", "an object or null", *v);
  Fields f(*v, t.where() + " value");
  DNNGRAPH_TRY(f.only({"data_type", "float", "int"}));
  if (!f.has("data_type")) return f.missing("data_type");
  Scalar s;
  DNNGRAPH_TRY(f.dtype("data_type", s.type));
  DNNGRAPH_TRY(f.real("float", s.f));
  DNNGRAPH_TRY(f.int64("int", s.i));
  out = s;
  return Status::ok();
}

Status read_tensor(const Json& j, size_t idx, TensorAttrs& t) {
  std::string where = "tensor " + std::to_string(idx);
  if (!j.is_object()) {
    return make_error(ErrorCode::InvalidGraph, where, ": expected an object, found ", kind_of(j));
  }
  Fields f(j, where);
  DNNGRAPH_TRY(f.string("name", t.name));
  if (!t.name.empty()) f = Fields(j, where + " '" + t.name + "'");
  DNNGRAPH_TRY(f.only({"name", "uid", "uid_assigned", "dim", "stride", "data_type", "virtual",
                       "output", "pass_by_value", "value", "ragged_offset_multiplier"}));
  DNNGRAPH_TRY(f.int64("ragged_offset_multiplier", t.ragged_offset_multiplier));
  DNNGRAPH_TRY(f.int64("uid", t.uid));
  t.uid_assigned = f.has("uid");  // a hand-written uid is an assigned one, as set_uid() does
  DNNGRAPH_TRY(f.boolean("uid_assigned", t.uid_assigned));
  DNNGRAPH_TRY(f.ints("dim", t.dim));
  DNNGRAPH_TRY(f.ints("stride", t.stride));
  DNNGRAPH_TRY(f.dtype("data_type", t.data_type));
  DNNGRAPH_TRY(f.boolean("virtual", t.is_virtual));
  DNNGRAPH_TRY(f.boolean("output", t.is_output));
  DNNGRAPH_TRY(read_value(f, t.value));
  if (t.value) {
    // Fields left out take what set_value() would give them.
    t.is_pass_by_value = true;
    if (!f.has("data_type")) t.data_type = t.value->type;
    if (!f.has("dim")) t.dim = {1};
    if (!f.has("stride")) t.stride = {1};
  }
  return f.boolean("pass_by_value", t.is_pass_by_value);
}

// Tensors are referenced by index into "tensors" (what the writer uses) or by unique name.
class TensorRefs {
 public:
  explicit TensorRefs(const std::vector<Tensor>& list) : list_(list) {
    for (size_t i = 0; i < list.size(); ++i) {
      auto [it, fresh] = by_name_.emplace(list[i]->name, static_cast<int64_t>(i));
      if (!fresh) it->second = -1;  // ambiguous
    }
  }
  Status resolve(const Json& v, const std::string& where, Tensor& out) const {
    int64_t idx = 0;
    if (v.is_null()) {
      out = nullptr;
      return Status::ok();
    }
    if (as_int64(v, idx)) {
      if (idx < 0 || idx >= static_cast<int64_t>(list_.size())) {
        return make_error(ErrorCode::InvalidGraph, where, ": refers to tensor ", idx,
                          " but there are only ", list_.size(), " tensors");
      }
    } else if (v.is_string()) {
      const auto& s = v.get_ref<const std::string&>();
      auto it = by_name_.find(s);
      if (it == by_name_.end())
        return make_error(ErrorCode::InvalidGraph, where, ": refers to unknown tensor '", s, "'");
      if (it->second < 0) {
        return make_error(ErrorCode::InvalidGraph, where, ": tensor name '", s,
                          "' is ambiguous (several tensors have it); refer to it by index");
      }
      idx = it->second;
    } else {
      return make_error(ErrorCode::InvalidGraph, where,
                        ": expected a tensor index, a tensor name or null, found ", kind_of(v));
    }
    out = list_[static_cast<size_t>(idx)];
    return Status::ok();
  }

  const std::vector<Tensor>& list() const { return list_; }

 private:
  const std::vector<Tensor>& list_;
  std::unordered_map<std::string, int64_t> by_name_;
};

Status read_ports(const Fields& f, const char* key, const TensorRefs& refs,
                  std::vector<Port>& out) {
  const Json* v = f.get(key);
  if (!v) return Status::ok();
  if (!v->is_object()) return f.wrong(key, "an object of role: tensor", *v);
  for (auto it = v->begin(); it != v->end(); ++it) {
    std::optional<Role> role = role_from_name(it.key());
    if (!role)
      return make_error(ErrorCode::InvalidGraph, f.where(), ": ", key, ": unknown port '", it.key(),
                        "'; port names are upper case as in the op tables of ",
                        "docs/json-format.md (e.g. X, W, Y, IN_0, INV_VARIANCE)");
    Port p{*role, nullptr};
    DNNGRAPH_TRY(refs.resolve(*it, f.where() + ": " + key + " '" + it.key() + "'", p.tensor));
    out.push_back(std::move(p));
  }
  return Status::ok();
}

Status read_subgraphs(const Fields& f, const TensorRefs& refs, Node& n);

Status read_node(const Json& j, size_t idx, const TensorRefs& refs, Node& n) {
  std::string where = "node " + std::to_string(idx);
  if (!j.is_object()) {
    return make_error(ErrorCode::InvalidGraph, where, ": expected an object, found ", kind_of(j));
  }
  Fields f(j, where);
  DNNGRAPH_TRY(f.string("name", n.name));
  if (!n.name.empty()) f = Fields(j, where + " '" + n.name + "'");
  DNNGRAPH_TRY(f.only({"name", "kind", "compute_data_type", "attrs", "inputs", "outputs",
                       "subgraph_tensors", "subgraphs"}));
  const Json* kind_json = f.get("kind");
  if (!kind_json) return f.missing("kind");
  if (!kind_json->is_string()) return f.wrong("kind", "an op name", *kind_json);
  const auto& kind_name = kind_json->get_ref<const std::string&>();
  auto kind = op_kind_from_name(kind_name);
  if (!kind)
    return make_error(ErrorCode::InvalidGraph, f.where(), ": unknown op '", kind_name, "'");
  if (!f.has("name")) n.name = kind_name + std::to_string(idx);
  f = Fields(j, where + " '" + n.name + "' (" + kind_name + ")");
  DNNGRAPH_TRY(f.dtype("compute_data_type", n.compute_data_type));

  static const Json kEmpty = Json::object();
  const Json* attrs = f.get("attrs");
  if (attrs && !attrs->is_object()) return f.wrong("attrs", "an object", *attrs);
  DNNGRAPH_TRY(read_attrs(*kind, Fields(attrs ? *attrs : kEmpty, f.where() + " attrs"), n.attrs));
  DNNGRAPH_TRY(read_ports(f, "inputs", refs, n.inputs));
  DNNGRAPH_TRY(read_ports(f, "outputs", refs, n.outputs));
  return read_subgraphs(f, refs, n);
}

Status read_subgraphs(const Fields& f, const TensorRefs& refs, Node& n) {
  const Json* subs = f.get("subgraphs");
  const Json* own = f.get("subgraph_tensors");
  if (!subs)
    return own ? f.wrong("subgraph_tensors", "no such list without subgraphs", *own) : Status::ok();
  if (!subs->is_array()) return f.wrong("subgraphs", "an array", *subs);
  if (own && !own->is_array()) return f.wrong("subgraph_tensors", "an array", *own);
  std::vector<Tensor> list = refs.list();
  for (size_t i = 0; own && i < own->size(); ++i) {
    auto t = std::make_shared<TensorAttrs>();
    DNNGRAPH_TRY(read_tensor((*own)[i], list.size(), *t));
    list.push_back(std::move(t));
  }
  const TensorRefs local(list);
  for (size_t i = 0; i < subs->size(); ++i) {
    const Json& sj = (*subs)[i];
    const std::string where = ::dnngraph::detail::cat(f.where(), " subgraph ", i);
    if (!sj.is_object())
      return make_error(ErrorCode::InvalidGraph, where, ": expected an object, found ",
                        kind_of(sj));
    Fields sf(sj, where);
    DNNGRAPH_TRY(sf.only({"name", "input", "output", "nodes"}));
    Subgraph sg;
    DNNGRAPH_TRY(sf.string("name", sg.name));
    for (auto [key, slot] :
         {std::pair<const char*, Tensor*>{"input", &sg.input}, {"output", &sg.output}}) {
      const Json* v = sf.get(key);
      if (!v) return sf.missing(key);
      DNNGRAPH_TRY(local.resolve(*v, where + ": " + key, *slot));
    }
    const Json* nodes = sf.get("nodes");
    if (!nodes) return sf.missing("nodes");
    if (!nodes->is_array()) return sf.wrong("nodes", "an array", *nodes);
    for (size_t k = 0; k < nodes->size(); ++k) {
      Node m;
      DNNGRAPH_TRY(read_node((*nodes)[k], k, local, m));
      sg.nodes.push_back(std::move(m));
    }
    n.subgraphs.push_back(std::move(sg));
  }
  return Status::ok();
}

Status load(std::string_view text, Graph& out) {
  Json doc;
  try {
    doc = Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {
    return make_error(ErrorCode::InvalidArgument, "not valid JSON: ", e.what());
  }
  if (!doc.is_object()) {
    return make_error(ErrorCode::InvalidArgument,
                      "expected a JSON object with \"dnngraph_version\", found ", kind_of(doc));
  }
  Fields top(doc, "graph");
  const Json* version = top.get("dnngraph_version");
  if (!version) {
    return make_error(ErrorCode::InvalidArgument,
                      "missing field 'dnngraph_version': not a dnngraph graph description");
  }
  int64_t v = 0;
  if (!as_int64(*version, v)) {
    return make_error(ErrorCode::InvalidArgument,
                      "field 'dnngraph_version': expected an integer, found ", kind_of(*version));
  }
  if (v != kJsonVersion) {
    return make_error(ErrorCode::InvalidArgument, "unsupported dnngraph_version ", v,
                      " (this build reads version ", kJsonVersion, ")");
  }

  Graph g;
  DNNGRAPH_TRY(top.only({"dnngraph_version", "name", "io_data_type", "intermediate_data_type",
                         "compute_data_type", "dynamic_shape", "sm_count", "tensors", "nodes"}));
  std::string name;
  DataType io = g.io_data_type(), inter = g.intermediate_data_type(), comp = g.compute_data_type();
  bool dynamic = g.dynamic_shape_enabled();
  DNNGRAPH_TRY(top.string("name", name));
  DNNGRAPH_TRY(top.dtype("io_data_type", io));
  DNNGRAPH_TRY(top.dtype("intermediate_data_type", inter));
  DNNGRAPH_TRY(top.dtype("compute_data_type", comp));
  DNNGRAPH_TRY(top.boolean("dynamic_shape", dynamic));
  // Optional (files written before it, and graphs without a target, have none); validate()
  // checks the value, here only that it is an int32.
  int64_t sm_count = g.sm_count();
  DNNGRAPH_TRY(top.int64("sm_count", sm_count));
  if (sm_count < std::numeric_limits<int32_t>::min() ||
      sm_count > std::numeric_limits<int32_t>::max())
    return make_error(ErrorCode::InvalidGraph, top.where(), ": field 'sm_count': expected a ",
                      "32-bit integer (a number of SMs, or -1 for every SM), found ", sm_count);
  g.set_name(std::move(name))
      .set_io_data_type(io)
      .set_intermediate_data_type(inter)
      .set_compute_data_type(comp)
      .set_dynamic_shape_enabled(dynamic)
      .set_sm_count(static_cast<int32_t>(sm_count));

  const Json* tensors = top.get("tensors");
  if (!tensors) return top.missing("tensors");
  if (!tensors->is_array()) return top.wrong("tensors", "an array", *tensors);
  std::vector<Tensor> list;
  for (size_t i = 0; i < tensors->size(); ++i) {
    TensorAttrs a;
    DNNGRAPH_TRY(read_tensor((*tensors)[i], i, a));
    Tensor t = g.tensor(a);
    t->name = a.name;  // Graph::tensor() names unnamed tensors; keep the description exact
    list.push_back(std::move(t));
  }

  const Json* nodes = top.get("nodes");
  if (!nodes) return top.missing("nodes");
  if (!nodes->is_array()) return top.wrong("nodes", "an array", *nodes);
  TensorRefs refs(list);
  for (size_t i = 0; i < nodes->size(); ++i) {
    Node n;
    DNNGRAPH_TRY(read_node((*nodes)[i], i, refs, n));
    g.add_node(std::move(n));
  }
  out = std::move(g);
  return Status::ok();
}

// Error messages must stay on one line (CLIs print them as is).
Status one_line(Status s) {
  if (s.is_ok() || s.message().find_first_of("\r\n") == std::string::npos) return s;
  std::string m = s.message();
  for (char& c : m)
    if (c == '\n' || c == '\r') c = ' ';
  return Status(s.code(), std::move(m));
}

}  // namespace

Status from_json(std::string_view text, Graph& out) {
  try {
    return one_line(load(text, out));
  } catch (const std::exception& e) {
    return one_line(
        make_error(ErrorCode::InvalidArgument, "cannot read the JSON description: ", e.what()));
  } catch (...) {
    return make_error(ErrorCode::Internal, "cannot read the JSON description: unknown error");
  }
}

}  // namespace dnngraph::ir
