// The op table of ops.hpp made concrete: port lists, names and lookups, and the role names.
#include <iterator>
#include <ostream>

#include "dnngraph/ir/ops.hpp"

namespace dnngraph::ir {
namespace {

#define DNNGRAPH_UNPAREN(...) __VA_ARGS__

// One pair of port arrays per family (Role's enumerators in scope, so the table names them bare).
struct Ports {
  using enum Role;
#define DNNGRAPH_OP_PORTS(kind, name, Attrs, in, out)        \
  static constexpr Role kind##_in[] = {DNNGRAPH_UNPAREN in}; \
  static constexpr Role kind##_out[] = {DNNGRAPH_UNPAREN out};
  DNNGRAPH_OPS(DNNGRAPH_OP_PORTS)
#undef DNNGRAPH_OP_PORTS
};

constexpr OpInfo kTable[] = {
#define DNNGRAPH_OP_INFO(kind, name, Attrs, in, out) \
  {OpKind::kind, #name, Ports::kind##_in, Ports::kind##_out},
    DNNGRAPH_OPS(DNNGRAPH_OP_INFO)
#undef DNNGRAPH_OP_INFO
};
static_assert(std::size(kTable) == std::variant_size_v<OpAttrs>,
              "every op family has one table line and one alternative of OpAttrs");

// The table's order is OpKind's order and OpAttrs' order.
template <size_t... I>
constexpr bool table_in_order(std::index_sequence<I...>) {
  return ((kTable[I].kind == static_cast<OpKind>(I)) && ...);
}
static_assert(table_in_order(std::make_index_sequence<std::size(kTable)>()));
#define DNNGRAPH_OP_CHECK(kind, name, Attrs, in, out) \
  static_assert(op_kind_of<Attrs>() == OpKind::kind);
DNNGRAPH_OPS(DNNGRAPH_OP_CHECK)
#undef DNNGRAPH_OP_CHECK

constexpr std::string_view kRoleNames[] = {
#define DNNGRAPH_ROLE_NAME(r) #r,
    DNNGRAPH_ROLES(DNNGRAPH_ROLE_NAME)
#undef DNNGRAPH_ROLE_NAME
};

}  // namespace

std::span<const OpInfo> op_table() { return kTable; }
const OpInfo& op_info(OpKind k) { return kTable[static_cast<size_t>(k)]; }
std::string_view op_kind_name(OpKind k) { return op_info(k).name; }
std::optional<OpKind> op_kind_from_name(std::string_view s) {
  for (const OpInfo& info : kTable)
    if (info.name == s) return info.kind;
  return std::nullopt;
}

std::string_view norm_kind_name(NormKind k) {
  static constexpr std::string_view kNames[] = {"LAYER_NORM", "RMS_NORM", "BATCH_NORM",
                                                "INSTANCE_NORM", "ADA_LAYER_NORM"};
  const int i = static_cast<int>(k);
  return i >= 0 && i < static_cast<int>(std::size(kNames)) ? kNames[i] : "UNKNOWN";
}
std::optional<NormKind> norm_kind_from_name(std::string_view s) {
  for (NormKind k : {NormKind::LayerNorm, NormKind::RmsNorm, NormKind::BatchNorm,
                     NormKind::InstanceNorm, NormKind::AdaLayerNorm})
    if (norm_kind_name(k) == s) return k;
  return std::nullopt;
}

std::string_view role_name(Role r) { return kRoleNames[static_cast<size_t>(r)]; }
std::optional<Role> role_from_name(std::string_view s) {
  for (size_t i = 0; i < std::size(kRoleNames); ++i)
    if (kRoleNames[i] == s) return static_cast<Role>(i);
  return std::nullopt;
}
std::ostream& operator<<(std::ostream& os, Role r) { return os << role_name(r); }

}  // namespace dnngraph::ir
