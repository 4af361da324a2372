// Stable 128-bit fingerprint of a graph: XXH3-128 over a canonical byte encoding.
//
// The encoding is defined here field by field, in a fixed order, with fixed-width
// little-endian integers, doubles as their IEEE-754 bit pattern (NaNs made canonical), strings
// and lists prefixed by their length, optionals by a presence byte, and enums by their numeric
// value. It never goes through JSON or any container of unspecified order, so the same graph
// hashes to the same value in every process and on every machine. Tensors are referenced by
// their index in the canonical tensor order (serialize_index.hpp). Change kEncodingVersion
// whenever the encoding changes.
#include <xxhash.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "dnngraph/ir/fingerprint.hpp"
#include "ir/serialize_index.hpp"
#include "ir/subgraph.hpp"

namespace dnngraph::ir {
namespace {

// 2: sdpa_backward without is_inference; 3: the graph's SM count target
constexpr uint32_t kEncodingVersion = 3;

class Encoder {
 public:
  void u8(uint8_t v) { buf_.push_back(static_cast<char>(v)); }
  void boolean(bool v) { u8(v ? 1 : 0); }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) u8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) u8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void f64(double v) {
    if (std::isnan(v)) v = std::numeric_limits<double>::quiet_NaN();  // one NaN pattern
    u64(std::bit_cast<uint64_t>(v));
  }
  void str(std::string_view s) {
    u64(s.size());
    buf_.append(s.data(), s.size());
  }
  template <class E>
  void enumeration(E e) {
    u32(static_cast<uint32_t>(e));
  }
  void ints(const std::vector<int64_t>& v) {
    u64(v.size());
    for (int64_t x : v) i64(x);
  }
  void opt(const std::optional<double>& v) {
    boolean(v.has_value());
    if (v) f64(*v);
  }
  void opt(const std::optional<int64_t>& v) {
    boolean(v.has_value());
    if (v) i64(*v);
  }
  // An attribute field (types: ops.hpp).
  void field(bool v) { boolean(v); }
  void field(int64_t v) { i64(v); }
  void field(double v) { f64(v); }
  void field(const std::vector<int64_t>& v) { ints(v); }
  void field(const std::optional<double>& v) { opt(v); }
  void field(const std::optional<int64_t>& v) { opt(v); }
  template <class E>
  requires std::is_enum_v<E>
  void field(E v) { enumeration(v); }
  // A tag before each section, so that fields of different sections cannot shift into each
  // other and collide.
  void tag(char a, char b) {
    u8(static_cast<uint8_t>(a));
    u8(static_cast<uint8_t>(b));
  }
  const std::string& bytes() const { return buf_; }

 private:
  std::string buf_;
};

void encode_tensor(Encoder& e, const TensorAttrs& t, const FingerprintOptions& opts) {
  e.tag('T', 'n');
  if (opts.include_names) e.str(t.name);
  e.u64(t.dim.size());
  e.u64(t.stride.size());
  if (opts.include_shapes) {
    for (int64_t d : t.dim) e.i64(d);
    for (int64_t s : t.stride) e.i64(s);
  }
  e.enumeration(t.data_type);
  e.boolean(t.uid_assigned);
  e.i64(t.uid);
  e.boolean(t.is_virtual);
  e.boolean(t.is_output);
  e.boolean(t.is_pass_by_value);
  // Only when set, so the keys of graphs without ragged tensors are unchanged. (The ragged
  // offset tensor itself is a port of the reading node.)
  if (t.ragged_offset_multiplier != 1) {
    e.tag('T', 'r');
    e.i64(t.ragged_offset_multiplier);
  }
  e.boolean(t.value.has_value());
  if (t.value) {
    e.enumeration(t.value->type);
    e.f64(t.value->f);
    e.i64(t.value->i);
  }
}

// Every field of the node's attribute struct, in declaration order, by its type.
void encode_attrs(Encoder& e, const OpAttrs& attrs) {
  e.tag('A', 't');
  std::visit(
      [&](const auto& a) {
        for_each_field(a, [&](const char*, const auto& field, FieldUse = FieldUse::Optional) {
          e.field(field);
        });
      },
      attrs);
}

void encode_ports(Encoder& e, const std::vector<Port>& ports, const detail::TensorIndex& ti) {
  e.u64(ports.size());
  for (const Port& p : ports) {
    e.str(role_name(p.role));
    e.i64(ti.of(p.tensor));  // -1 for a null tensor
  }
}

void encode_node(Encoder& e, const Node& n, const detail::TensorIndex& ti,
                 const FingerprintOptions& opts) {
  e.tag('N', 'd');
  if (opts.include_names) e.str(n.name);
  e.enumeration(n.kind());
  e.enumeration(n.compute_data_type);
  encode_attrs(e, n.attrs);
  encode_ports(e, n.inputs, ti);
  encode_ports(e, n.outputs, ti);
  // Score modifiers (plan caches must not mix graphs that differ only in them); nothing is
  // written for a node without subgraphs, so other graphs keep their fingerprints.
  if (n.subgraphs.empty()) return;
  e.tag('S', 'g');
  detail::TensorIndex local = ti;
  std::vector<Tensor> own;
  for (const Tensor& t : subgraph_tensors(n))
    if (local.add(t)) own.push_back(t);
  e.u64(own.size());
  for (const Tensor& t : own) encode_tensor(e, *t, opts);
  e.u64(n.subgraphs.size());
  for (const Subgraph& sg : n.subgraphs) {
    e.str(sg.name);
    e.i64(local.of(sg.input));
    e.i64(local.of(sg.output));
    e.u64(sg.nodes.size());
    for (const Node& m : sg.nodes) encode_node(e, m, local, opts);
  }
}

}  // namespace

std::string Fingerprint::hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(32, '0');
  for (int i = 0; i < 16; ++i) {
    s[static_cast<size_t>(15 - i)] = kDigits[(hi >> (4 * i)) & 0xf];
    s[static_cast<size_t>(31 - i)] = kDigits[(lo >> (4 * i)) & 0xf];
  }
  return s;
}

Fingerprint fingerprint(const Graph& g, FingerprintOptions opts) {
  const detail::TensorIndex ti = detail::index_tensors(g);
  Encoder e;
  e.str("dnngraph-fingerprint");
  e.u32(kEncodingVersion);
  e.boolean(opts.include_shapes);
  e.boolean(opts.include_names);

  e.tag('G', 'r');
  if (opts.include_names) e.str(g.name());
  e.enumeration(g.io_data_type());
  e.enumeration(g.intermediate_data_type());
  e.enumeration(g.compute_data_type());
  e.boolean(g.dynamic_shape_enabled());
  e.i64(g.sm_count());  // plans for another SM count target are other plans

  e.u64(ti.list.size());
  for (const Tensor& t : ti.list) encode_tensor(e, *t, opts);

  e.u64(g.nodes().size());
  for (const Node& n : g.nodes()) encode_node(e, n, ti, opts);

  const std::string& b = e.bytes();
  XXH128_hash_t h = XXH3_128bits(b.data(), b.size());
  return Fingerprint{h.high64, h.low64};
}

}  // namespace dnngraph::ir
