// Names of the enumerations, used by JSON, messages and the Python enums.
#include "dnngraph/types.hpp"

#include <array>
#include <string_view>

#include "dnngraph/status.hpp"
#include "dnngraph/version.hpp"

namespace dnngraph {
namespace {

// The name of enum value e, or "UNKNOWN" for a value outside the list (a cast integer or a
// tampered description: validate() reports it, and messages must not read out of bounds).
template <class E, size_t N>
std::string_view name_of(const std::array<std::string_view, N>& names, E e) {
  const int i = static_cast<int>(e);
  return i >= 0 && static_cast<size_t>(i) < N ? names[static_cast<size_t>(i)] : "UNKNOWN";
}

template <class E, size_t N>
std::optional<E> find_name(const std::array<std::string_view, N>& names, std::string_view s) {
  for (size_t i = 0; i < N; ++i)
    if (names[i] == s) return static_cast<E>(i);
  return std::nullopt;
}

constexpr std::array<std::string_view, 14> kDataTypeNames = {
    "NOT_SET", "FLOAT", "DOUBLE", "HALF",  "BFLOAT16", "FP8_E4M3", "FP8_E5M2",
    "INT8",    "UINT8", "INT32",  "INT64", "BOOLEAN",  "FP8_E8M0", "FP4_E2M1"};
constexpr std::array<int64_t, 14> kDataTypeBits = {0, 32, 64, 16, 16, 8, 8, 8, 8, 32, 64, 1, 8, 4};
// Neither: NOT_SET and BOOLEAN.
enum class TypeKind { Neither, Floating, Integral };
constexpr std::array<TypeKind, 14> kDataTypeKinds = {
    TypeKind::Neither,  TypeKind::Floating, TypeKind::Floating, TypeKind::Floating,
    TypeKind::Floating, TypeKind::Floating, TypeKind::Floating, TypeKind::Integral,
    TypeKind::Integral, TypeKind::Integral, TypeKind::Integral, TypeKind::Neither,
    TypeKind::Floating, TypeKind::Floating};

// The entry of type t in a table in DataType order, `outside` for a value outside it.
template <class T>
T entry(const std::array<T, 14>& table, DataType t, T outside) {
  const int i = static_cast<int>(t);
  return i >= 0 && static_cast<size_t>(i) < table.size() ? table[static_cast<size_t>(i)] : outside;
}

TypeKind kind_of(DataType t) { return entry(kDataTypeKinds, t, TypeKind::Neither); }

constexpr std::array<std::string_view, kPointwiseModeCount> kPointwiseNames = {
    "ADD",
    "SUB",
    "MUL",
    "DIV",
    "MAX",
    "MIN",
    "POW",
    "ABS",
    "NEG",
    "EXP",
    "LOG",
    "SQRT",
    "RSQRT",
    "RECIPROCAL",
    "TANH",
    "SIGMOID",
    "RELU",
    "GELU",
    "GELU_APPROX_TANH",
    "SILU",
    "ELU",
    "SOFTPLUS",
    "ERF",
    "SIN",
    "COS",
    "FLOOR",
    "CEIL",
    "IDENTITY",
    "CMP_EQ",
    "CMP_NEQ",
    "CMP_GT",
    "CMP_GE",
    "CMP_LT",
    "CMP_LE",
    "LOGICAL_AND",
    "LOGICAL_OR",
    "LOGICAL_NOT",
    "BINARY_SELECT",
    "RELU_BWD",
    "GELU_BWD",
    "GELU_APPROX_TANH_BWD",
    "SIGMOID_BWD",
    "TANH_BWD",
    "SILU_BWD",
    "ELU_BWD",
    "SOFTPLUS_BWD",
    "GEN_INDEX",
    "ADD_SQUARE",
    "MOD",
    "TAN"};

constexpr std::array<std::string_view, 8> kReductionNames = {"ADD",  "MUL", "MIN",   "MAX",
                                                             "AMAX", "AVG", "NORM1", "NORM2"};
constexpr std::array<std::string_view, 2> kAlignmentNames = {"TOP_LEFT", "BOTTOM_RIGHT"};
constexpr std::array<std::string_view, 2> kPhaseNames = {"TRAINING", "INFERENCE"};
constexpr std::array<std::string_view, 6> kErrorNames = {
    "Ok", "InvalidGraph", "InvalidArgument", "NotSupported", "BackendError", "Internal"};

}  // namespace

int64_t data_type_bits(DataType t) { return entry(kDataTypeBits, t, int64_t{0}); }
int64_t data_type_size(DataType t) {
  const int64_t bits = data_type_bits(t);
  return bits % 8 == 0 ? bits / 8 : 0;
}
std::optional<int64_t> data_type_bytes(DataType t, int64_t elements) {
  const int64_t bits = data_type_bits(t);
  if (elements < 0) return std::nullopt;
  if (bits % 8 == 0) {
    int64_t bytes = 0;
    if (__builtin_mul_overflow(elements, bits / 8, &bytes)) return std::nullopt;
    return bytes;
  }
  // Sub-byte: 8 / bits elements per byte (bits divides 8); the last byte may be partly used.
  const int64_t per_byte = 8 / bits;
  return elements / per_byte + (elements % per_byte != 0 ? 1 : 0);
}
bool is_sub_byte(DataType t) {
  const int64_t bits = data_type_bits(t);
  return bits > 0 && bits < 8;
}
std::string_view data_type_name(DataType t) { return name_of(kDataTypeNames, t); }
std::optional<DataType> data_type_from_name(std::string_view s) {
  return find_name<DataType>(kDataTypeNames, s);
}
bool is_floating(DataType t) { return kind_of(t) == TypeKind::Floating; }
bool is_integral(DataType t) { return kind_of(t) == TypeKind::Integral; }

std::string_view pointwise_mode_name(PointwiseMode m) { return name_of(kPointwiseNames, m); }
std::optional<PointwiseMode> pointwise_mode_from_name(std::string_view s) {
  return find_name<PointwiseMode>(kPointwiseNames, s);
}
int pointwise_arity(PointwiseMode m) {
  using M = PointwiseMode;
  switch (m) {
    case M::Add:
    case M::Sub:
    case M::Mul:
    case M::Div:
    case M::Max:
    case M::Min:
    case M::Pow:
    case M::AddSquare:
    case M::Mod:
    case M::CmpEq:
    case M::CmpNeq:
    case M::CmpGt:
    case M::CmpGe:
    case M::CmpLt:
    case M::CmpLe:
    case M::LogicalAnd:
    case M::LogicalOr:
    case M::ReluBwd:
    case M::GeluBwd:
    case M::GeluApproxTanhBwd:
    case M::SigmoidBwd:
    case M::TanhBwd:
    case M::SiluBwd:
    case M::EluBwd:
    case M::SoftplusBwd:
      return 2;
    case M::BinarySelect:
      return 3;
    default:
      return 1;
  }
}

std::string_view reduction_mode_name(ReductionMode m) { return name_of(kReductionNames, m); }
std::optional<ReductionMode> reduction_mode_from_name(std::string_view s) {
  return find_name<ReductionMode>(kReductionNames, s);
}
std::string_view diagonal_alignment_name(DiagonalAlignment a) {
  return name_of(kAlignmentNames, a);
}
std::optional<DiagonalAlignment> diagonal_alignment_from_name(std::string_view s) {
  return find_name<DiagonalAlignment>(kAlignmentNames, s);
}
std::string_view norm_phase_name(NormForwardPhase p) { return name_of(kPhaseNames, p); }
std::optional<NormForwardPhase> norm_phase_from_name(std::string_view s) {
  return find_name<NormForwardPhase>(kPhaseNames, s);
}

const char* error_code_name(ErrorCode c) { return kErrorNames[static_cast<size_t>(c)].data(); }
std::string Status::to_string() const {
  if (is_ok()) return "Ok";
  return detail::cat(error_code_name(code_), ": ", message_);
}

const char* version() { return kVersion; }

}  // namespace dnngraph
