// Internal: what the generic attribute writers (JSON, fingerprint, dot, to_table, Python) need
// to know about a field's type beyond ops.hpp: the names of the enumerations an attribute may
// hold, and one readable text per field value.
#pragma once

#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "dnngraph/ir/ops.hpp"

namespace dnngraph::ir::attr {

// EnumNames<E>: name(e), parse(text) and `what` ("pointwise mode") for error messages.
template <class E>
struct EnumNames;
template <>
struct EnumNames<PointwiseMode> {
  static constexpr const char* what = "pointwise mode";
  static std::string_view name(PointwiseMode e) { return pointwise_mode_name(e); }
  static std::optional<PointwiseMode> parse(std::string_view s) {
    return pointwise_mode_from_name(s);
  }
};
template <>
struct EnumNames<ReductionMode> {
  static constexpr const char* what = "reduction mode";
  static std::string_view name(ReductionMode e) { return reduction_mode_name(e); }
  static std::optional<ReductionMode> parse(std::string_view s) {
    return reduction_mode_from_name(s);
  }
};
template <>
struct EnumNames<NormKind> {
  static constexpr const char* what = "norm";
  static std::string_view name(NormKind e) { return norm_kind_name(e); }
  static std::optional<NormKind> parse(std::string_view s) { return norm_kind_from_name(s); }
};
template <>
struct EnumNames<NormForwardPhase> {
  static constexpr const char* what = "norm phase";
  static std::string_view name(NormForwardPhase e) { return norm_phase_name(e); }
  static std::optional<NormForwardPhase> parse(std::string_view s) {
    return norm_phase_from_name(s);
  }
};
template <>
struct EnumNames<DiagonalAlignment> {
  static constexpr const char* what = "diagonal alignment";
  static std::string_view name(DiagonalAlignment e) { return diagonal_alignment_name(e); }
  static std::optional<DiagonalAlignment> parse(std::string_view s) {
    return diagonal_alignment_from_name(s);
  }
};

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

// A field's value as people read it: [1,2], 0.5, true, CAUSAL; "" for an unset optional.
template <class T>
std::string field_text(const T& v) {
  if constexpr (is_optional<T>::value) {
    return v ? field_text(*v) : std::string();
  } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    return s + "]";
  } else if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else if constexpr (std::is_enum_v<T>) {
    return std::string(EnumNames<T>::name(v));
  } else {
    std::ostringstream os;
    os << v;
    return os.str();
  }
}

// "key=value" for each field that differs from the struct's default, space separated
// ("key" alone for a bool that became true). Used by dot and to_table.
template <class A>
std::string fields_text(const A& a) {
  std::vector<std::string> mine, dflt;
  auto collect = [](std::vector<std::string>& out) {
    return [&out](const char* key, const auto& f, FieldUse = FieldUse::Optional) {
      out.push_back(std::string(key) + "\n" + field_text(f));
    };
  };
  const A defaults{};
  for_each_field(a, collect(mine));
  for_each_field(defaults, collect(dflt));
  std::string s;
  for (size_t i = 0; i < mine.size(); ++i) {
    if (mine[i] == dflt[i]) continue;
    const size_t cut = mine[i].find('\n');
    std::string key = mine[i].substr(0, cut), value = mine[i].substr(cut + 1);
    s += (s.empty() ? "" : " ") +
         (value == "true" ? key : key + "=" + (value.empty() ? "unset" : value));
  }
  return s;
}

inline std::string attrs_text(const OpAttrs& attrs) {
  return std::visit([](const auto& a) { return fields_text(a); }, attrs);
}

}  // namespace dnngraph::ir::attr
