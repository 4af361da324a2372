// Enumerations shared by every layer: data types and op modes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace dnngraph {

enum class DataType : int {
  NotSet = 0,
  Float,
  Double,
  Half,
  BFloat16,
  FP8_E4M3,
  FP8_E5M2,
  Int8,
  UInt8,
  Int32,
  Int64,
  Boolean,   // one bit per element, eight per byte (element i: bit i % 8 of byte i / 8)
  FP8_E8M0,  // unsigned exponent-only scale (2^(e-127); 0xFF NaN): MX block scales
  FP4_E2M1,  // 4-bit float (OCP MX E2M1: +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}), two per byte
};

// Bits per element: 1 for Boolean (bit-packed, as cuDNN stores it), 4 for FP4_E2M1,
// 8 * data_type_size otherwise; 0 for NotSet.
int64_t data_type_bits(DataType t);
// Bytes per element for the types whose elements are whole bytes; 0 for NotSet and for the
// sub-byte types Boolean (a bit) and FP4_E2M1 (half a byte): size buffers of any type with
// data_type_bytes().
int64_t data_type_size(DataType t);
// Bytes that `elements` consecutive elements of t occupy, rounded up to whole bytes (an FP4
// tensor of 5 elements takes 3); nullopt when that overflows int64 or elements < 0.
std::optional<int64_t> data_type_bytes(DataType t, int64_t elements);
// A sub-byte type: several elements share one byte (Boolean: eight, FP4_E2M1: two). An FP4
// tensor must pack its elements in pairs along a unit-stride axis (see
// ir::TensorAttrs::packing_problem); a Boolean tensor's bits follow its element offsets.
bool is_sub_byte(DataType t);
std::string_view data_type_name(DataType t);  // "FLOAT", "BFLOAT16", ...
std::optional<DataType> data_type_from_name(std::string_view name);
bool is_floating(DataType t);
bool is_integral(DataType t);

enum class PointwiseMode : int {
  Add,
  Sub,
  Mul,
  Div,
  Max,
  Min,
  Pow,
  Abs,
  Neg,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Reciprocal,
  Tanh,
  Sigmoid,
  Relu,  // with optional lower/upper clip and negative slope
  Gelu,  // erf form
  GeluApproxTanh,
  Silu,      // a.k.a. swish (swish_beta attribute, default 1)
  Elu,       // elu_alpha attribute
  Softplus,  // softplus_beta attribute
  Erf,
  Sin,
  Cos,
  Floor,
  Ceil,
  Identity,
  CmpEq,
  CmpNeq,
  CmpGt,
  CmpGe,
  CmpLt,
  CmpLe,
  LogicalAnd,
  LogicalOr,
  LogicalNot,
  BinarySelect,  // out = in2 ? in0 : in1
  ReluBwd,       // in0 = dy, in1 = x
  GeluBwd,
  GeluApproxTanhBwd,
  SigmoidBwd,
  TanhBwd,
  SiluBwd,
  EluBwd,
  SoftplusBwd,
  GenIndex,   // out = the index of each element along PointwiseAttrs::axis (in0 gives the dims)
  AddSquare,  // out = in0 + in1 * in1
  Mod,        // out = fmod(in0, in1): the remainder with the sign of in0
  Tan,
};
constexpr int kPointwiseModeCount = static_cast<int>(PointwiseMode::Tan) + 1;

std::string_view pointwise_mode_name(PointwiseMode m);  // "ADD", "RELU_BWD", ...
std::optional<PointwiseMode> pointwise_mode_from_name(std::string_view name);
// Number of tensor inputs the mode takes (1, 2 or 3).
int pointwise_arity(PointwiseMode m);

enum class ReductionMode : int { Add, Mul, Min, Max, Amax, Avg, Norm1, Norm2 };
std::string_view reduction_mode_name(ReductionMode m);
std::optional<ReductionMode> reduction_mode_from_name(std::string_view name);

enum class DiagonalAlignment : int { TopLeft, BottomRight };
std::string_view diagonal_alignment_name(DiagonalAlignment a);
std::optional<DiagonalAlignment> diagonal_alignment_from_name(std::string_view name);

enum class NormForwardPhase : int { Training, Inference };
std::string_view norm_phase_name(NormForwardPhase p);
std::optional<NormForwardPhase> norm_phase_from_name(std::string_view name);

}  // namespace dnngraph
