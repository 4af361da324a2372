// The op table and the field declarations drive every writer: these tests fail when a field is
// missing from JSON (write or read), the fingerprint, dot or to_table, for every op family,
// by iterating the declared fields generically (no field is named here).
#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "dnngraph/ir/dot.hpp"
#include "dnngraph/ir/fingerprint.hpp"
#include "dnngraph/ir/graph.hpp"
#include "dnngraph/ir/json.hpp"

namespace dnngraph::ir {
namespace {

template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};

// A value of the field's type that differs from `v` (and from the type's default).
template <class T>
T other(const T& v) {
  if constexpr (IsOptional<T>::value) {
    using V = typename T::value_type;
    return v ? T(other(*v)) : T(other(V{}));
  } else if constexpr (std::is_same_v<T, bool>) {
    return !v;
  } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
    std::vector<int64_t> w = v;
    w.push_back(static_cast<int64_t>(w.size()) + 3);
    return w;
  } else if constexpr (std::is_enum_v<T>) {
    return static_cast<T>(static_cast<int>(v) == 1 ? 0 : 1);
  } else {
    return v + static_cast<T>(3);  // int64_t, double
  }
}

template <class A>
size_t field_count() {
  size_t n = 0;
  const A a{};
  for_each_field(a, [&](const char*, const auto&, FieldUse = FieldUse::Optional) { ++n; });
  return n;
}

// A with field k (or every field, k = npos) changed; `key` receives the field's name.
template <class A>
A changed(size_t k, std::string* key = nullptr) {
  A a{};
  size_t i = 0;
  for_each_field(a, [&](const char* name, auto& f, FieldUse = FieldUse::Optional) {
    if (k == std::string::npos || i == k) {
      f = other(f);
      if (key) *key = name;
    }
    ++i;
  });
  return a;
}

// A graph of one (unvalidated) node holding `a`.
void one_node(Graph& g, const OpAttrs& a) {
  Node n;
  n.name = "n";
  n.attrs = a;
  g.add_node(std::move(n));
}

template <class A>
void check_family() {
  const std::string family(op_kind_name(op_kind_of<A>()));
  SCOPED_TRACE(family);
  Graph base;
  one_node(base, A{});
  const size_t count = field_count<A>();
  for (size_t k = 0; k <= count; ++k) {
    std::string key = "every field";
    const A a = changed<A>(k == count ? std::string::npos : k, &key);
    if (k == count) key = "every field";
    SCOPED_TRACE(key);
    if (count == 0) break;
    ASSERT_FALSE(a == A{});
    Graph g;
    one_node(g, a);
    // JSON: the changed field is written and read back.
    Graph loaded;
    const Status s = from_json(to_json(g), loaded);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    ASSERT_EQ(loaded.nodes().size(), 1u);
    const A* back = std::get_if<A>(&loaded.nodes()[0].attrs);
    ASSERT_NE(back, nullptr);
    EXPECT_TRUE(*back == a) << "JSON round trip lost " << key;
    // Fingerprint, dot and table all see it.
    EXPECT_NE(fingerprint(g), fingerprint(base)) << key << " is not in the fingerprint";
    EXPECT_NE(to_dot(g), to_dot(base)) << key << " is not in the dot output";
    EXPECT_NE(g.to_table(), base.to_table()) << key << " is not in to_table";
  }
}

template <size_t... I>
void check_all(std::index_sequence<I...>) {
  (check_family<std::variant_alternative_t<I, OpAttrs>>(), ...);
}

TEST(OpTable, EveryFieldReachesEveryWriter) {
  check_all(std::make_index_sequence<std::variant_size_v<OpAttrs>>());
}

TEST(OpTable, NamesKindsAndPortsAreConsistent) {
  std::set<std::string_view> names;
  ASSERT_EQ(op_table().size(), std::variant_size_v<OpAttrs>);
  for (const OpInfo& info : op_table()) {
    EXPECT_TRUE(names.insert(info.name).second) << info.name << " twice";
    EXPECT_EQ(op_kind_name(info.kind), info.name);
    ASSERT_TRUE(op_kind_from_name(info.name).has_value()) << info.name;
    EXPECT_EQ(*op_kind_from_name(info.name), info.kind);
    EXPECT_FALSE(info.inputs.empty()) << info.name;
    EXPECT_FALSE(info.outputs.empty()) << info.name;
    for (auto ports : {info.inputs, info.outputs})
      for (Role r : ports) EXPECT_EQ(role_from_name(role_name(r)), r);
  }
  // The last family is found too (the lookup is not bounded by a hard-coded entry).
  EXPECT_EQ(op_kind_from_name(op_table().back().name), op_table().back().kind);
  EXPECT_FALSE(op_kind_from_name("convolution").has_value());
  EXPECT_FALSE(role_from_name("x").has_value());
}

TEST(OpTable, RetiredSdpaBackwardFieldIsReadAndIgnored) {
  // Files written before sdpa_backward dropped is_inference still load.
  const std::string text = R"({"dnngraph_version": 1, "tensors": [], "nodes": [
      {"name": "b", "kind": "sdpa_backward", "attrs": {"is_inference": true, "causal": true}}]})";
  Graph g;
  const Status s = from_json(text, g);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_TRUE(g.nodes()[0].as<SdpaBwdAttrs>().causal);
  EXPECT_EQ(to_json(g).find("is_inference"), std::string::npos);
}

}  // namespace
}  // namespace dnngraph::ir
