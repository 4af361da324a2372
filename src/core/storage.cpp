// Element conversions of include/dnngraph/storage.hpp.
#include "dnngraph/storage.hpp"

#include <cmath>
#include <cstring>
#include <limits>

namespace dnngraph {
namespace {

// A small IEEE-like float format with E exponent bits and M mantissa bits.
// has_inf: the all-ones exponent encodes inf/NaN (half, bf16, e5m2). Otherwise (e4m3 "fn")
// the all-ones exponent holds normal values and only the all-ones pattern is NaN.
struct MiniFloat {
  int E, M;
  bool has_inf;
  int bias() const { return (1 << (E - 1)) - 1; }
  uint32_t nan_code() const { return (1u << (E + M)) - 1; }
  uint32_t inf_code() const { return ((1u << E) - 1) << M; }
  uint32_t max_code() const {
    return has_inf ? ((((1u << E) - 2) << M) | ((1u << M) - 1)) : (nan_code() - 1);
  }
};
constexpr MiniFloat kHalf{5, 10, true}, kBf16{8, 7, true}, kE4M3{4, 3, false}, kE5M2{5, 2, true};

// FP8_E8M0 (OCP MX "E8M0", ml_dtypes.float8_e8m0fnu): 2^(code - 127), code 0xFF is NaN; no
// sign, zero or infinity. Rounds to the nearer power of two, ties (a mantissa of exactly 1.5)
// up; below 2^-127 gives 2^-127; zero, negatives, infinities and values that round past 2^127
// give NaN (as ml_dtypes converts).
uint8_t encode_e8m0(double x) {
  if (!(x > 0.0) || std::isinf(x)) return 0xFF;
  int e = 0;
  const double m = std::frexp(x, &e);  // x = m * 2^e, m in [0.5, 1)
  int exp2 = e - 1;                    // x = 2m * 2^(e-1)
  if (2.0 * m >= 1.5) ++exp2;
  const int code = exp2 + 127;
  if (code < 0) return 0;
  if (code > 254) return 0xFF;
  return static_cast<uint8_t>(code);
}
double decode_e8m0(uint8_t code) {
  if (code == 0xFF) return std::numeric_limits<double>::quiet_NaN();
  return std::ldexp(1.0, static_cast<int>(code) - 127);
}

// FP4_E2M1 (OCP MX v1.0 E2M1; ml_dtypes.float4_e2m1fn): sign bit 3, exponent bits 2-1 (bias
// 1), mantissa bit 0; codes 0-7 are 0, 0.5 (the one subnormal), 1, 1.5, 2, 3, 4, 6 and 8-15
// their negatives. The format has no infinity and no NaN.
constexpr double kE2M1Values[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};

// Rounds to the nearest value, ties to the even code (0.25 -> 0, 0.75 -> 1, 1.25 -> 1,
// 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4); magnitudes beyond 6, infinities included, saturate
// to +-6 (OCP MX v1.0: no inf to overflow to). NaN has no code: it is stored as +0. Libraries
// differ here (ml_dtypes 0.7 gives a zero, ONNX's float4 cast gives +6); a zero keeps a NaN
// from turning into a plausible large value. The block-scaled formats keep a NaN visible
// through the block's scale (FP8_E8M0 and FP8_E4M3 both have a NaN code; see
// block_scale_quantize).
uint8_t encode_e2m1(double x) {
  if (std::isnan(x)) return 0;
  const uint8_t sign = std::signbit(x) ? 0x8 : 0x0;
  const double a = std::fabs(x);
  uint8_t code = 7;  // saturated
  for (uint8_t c = 0; c < 7; ++c) {
    const double mid = 0.5 * (kE2M1Values[c] + kE2M1Values[c + 1]);
    if (a < mid || (a == mid && c % 2 == 0)) {
      code = c;
      break;
    }
  }
  return sign | code;
}
double decode_e2m1(uint8_t code) {
  const double v = kE2M1Values[code & 0x7];
  return (code & 0x8) ? -v : v;
}

// Element i of an FP4 tensor lives in byte i / 2: the even element in the low nibble (bits
// 3-0), the odd one in the high nibble (bits 7-4). That is torch's float4_e2m1fn_x2 order (the
// Float4_e2m1fn_x2 docblock of pytorch PR 148791: the second element in the most significant
// bits, as torchao's maintainers restate in pytorch/ao issue 2939), CUDA's __nv_fp4x2_e2m1 and
// ONNX's FLOAT4E2M1 (the first element in the least significant bits). Along the unit-stride
// axis, element 2k is the low nibble of byte k.
uint8_t read_nibble(const void* base, int64_t i) {
  const uint8_t byte = static_cast<const uint8_t*>(base)[i / 2];
  return i % 2 ? static_cast<uint8_t>(byte >> 4) : static_cast<uint8_t>(byte & 0x0F);
}
// Read-modify-write of the byte holding element i: the other nibble is kept. Two threads must
// never write the two elements of one byte at once; the reference engine writes every output
// through KernelContext::store, serially (src/engines/reference/tensor_io.cpp).
void write_nibble(void* base, int64_t i, uint8_t code) {
  uint8_t& byte = static_cast<uint8_t*>(base)[i / 2];
  byte = i % 2 ? static_cast<uint8_t>((byte & 0x0F) | (code << 4))
               : static_cast<uint8_t>((byte & 0xF0) | (code & 0x0F));
}

// Element i of a BOOLEAN tensor is bit i % 8 of byte i / 8, least significant bit first: the
// layout cuDNN reads and writes (measured on an H200 with cuDNN 9.19: GpuBoolean.* in
// tests/gpu/boolean_test.cpp), numpy.packbits(..., bitorder="little")'s. Writes are a
// read-modify-write of the byte, like FP4's (one writer per byte at a time).
bool read_bit(const void* base, int64_t i) {
  return (static_cast<const uint8_t*>(base)[i / 8] >> (i % 8)) & 1;
}
void write_bit(void* base, int64_t i, bool v) {
  uint8_t& byte = static_cast<uint8_t*>(base)[i / 8];
  const auto mask = static_cast<uint8_t>(1u << (i % 8));
  byte = static_cast<uint8_t>(v ? (byte | mask) : (byte & ~mask));
}

uint32_t encode(const MiniFloat& f, double x) {
  const uint32_t sign = std::signbit(x) ? (1u << (f.E + f.M)) : 0u;
  if (std::isnan(x)) return f.nan_code();
  const double a = std::fabs(x);
  if (std::isinf(a)) return sign | (f.has_inf ? f.inf_code() : f.nan_code());
  if (a == 0.0) return sign;
  int e = 0;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  e -= 1;             // a = m' * 2^e, m' in [1, 2)
  const int emin = 1 - f.bias();
  // Subnormals share the quantum of the smallest normal binade.
  const int q_exp = (e < emin ? emin : e) - f.M;
  const double q = std::nearbyint(std::ldexp(a, -q_exp));  // round to nearest even
  uint64_t code;
  if (e < emin) {
    code = static_cast<uint64_t>(q);  // may round up into the first normal: still monotonic
  } else {
    code = (static_cast<uint64_t>(e + f.bias()) << f.M) + (static_cast<uint64_t>(q) - (1u << f.M));
  }
  if (code > f.max_code()) return sign | (f.has_inf ? f.inf_code() : f.nan_code());
  return sign | static_cast<uint32_t>(code);
}

double decode(const MiniFloat& f, uint32_t code) {
  const bool neg = (code >> (f.E + f.M)) & 1u;
  const uint32_t exp = (code >> f.M) & ((1u << f.E) - 1);
  const uint32_t man = code & ((1u << f.M) - 1);
  double v;
  if (f.has_inf && exp == (1u << f.E) - 1) {
    v = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (!f.has_inf && (code & f.nan_code()) == f.nan_code()) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (exp == 0) {
    v = std::ldexp(static_cast<double>(man), 1 - f.bias() - f.M);
  } else {
    v = std::ldexp(static_cast<double>(man | (1u << f.M)), static_cast<int>(exp) - f.bias() - f.M);
  }
  return neg ? -v : v;
}

template <class T>
T saturate_int(double v) {
  if (std::isnan(v)) return 0;
  const double r = std::nearbyint(v);
  if (r <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
  if (r >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(r);
}

template <class T>
T read_as(const void* base, int64_t off) {
  T v;
  std::memcpy(&v, static_cast<const char*>(base) + off * static_cast<int64_t>(sizeof(T)),
              sizeof(T));
  return v;
}
template <class T>
void write_as(void* base, int64_t off, T v) {
  std::memcpy(static_cast<char*>(base) + off * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}

}  // namespace

double load_element(const void* base, DataType t, int64_t off) {
  switch (t) {
    case DataType::Float:
      return read_as<float>(base, off);
    case DataType::Double:
      return read_as<double>(base, off);
    case DataType::Half:
      return decode(kHalf, read_as<uint16_t>(base, off));
    case DataType::BFloat16:
      return decode(kBf16, read_as<uint16_t>(base, off));
    case DataType::FP8_E4M3:
      return decode(kE4M3, read_as<uint8_t>(base, off));
    case DataType::FP8_E5M2:
      return decode(kE5M2, read_as<uint8_t>(base, off));
    case DataType::FP8_E8M0:
      return decode_e8m0(read_as<uint8_t>(base, off));
    case DataType::FP4_E2M1:
      return decode_e2m1(read_nibble(base, off));
    case DataType::Int8:
      return read_as<int8_t>(base, off);
    case DataType::UInt8:
      return read_as<uint8_t>(base, off);
    case DataType::Int32:
      return read_as<int32_t>(base, off);
    case DataType::Int64:
      return static_cast<double>(read_as<int64_t>(base, off));
    case DataType::Boolean:
      return read_bit(base, off) ? 1.0 : 0.0;
    case DataType::NotSet:
      break;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

void store_element(void* base, DataType t, int64_t off, double v) {
  switch (t) {
    case DataType::Float:
      write_as<float>(base, off, static_cast<float>(v));
      return;
    case DataType::Double:
      write_as<double>(base, off, v);
      return;
    case DataType::Half:
      write_as<uint16_t>(base, off, static_cast<uint16_t>(encode(kHalf, v)));
      return;
    case DataType::BFloat16:
      write_as<uint16_t>(base, off, static_cast<uint16_t>(encode(kBf16, v)));
      return;
    case DataType::FP8_E4M3:
      write_as<uint8_t>(base, off, static_cast<uint8_t>(encode(kE4M3, v)));
      return;
    case DataType::FP8_E5M2:
      write_as<uint8_t>(base, off, static_cast<uint8_t>(encode(kE5M2, v)));
      return;
    case DataType::FP8_E8M0:
      write_as<uint8_t>(base, off, encode_e8m0(v));
      return;
    case DataType::FP4_E2M1:
      write_nibble(base, off, encode_e2m1(v));
      return;
    case DataType::Int8:
      write_as<int8_t>(base, off, saturate_int<int8_t>(v));
      return;
    case DataType::UInt8:
      write_as<uint8_t>(base, off, saturate_int<uint8_t>(v));
      return;
    case DataType::Int32:
      write_as<int32_t>(base, off, saturate_int<int32_t>(v));
      return;
    case DataType::Int64:
      write_as<int64_t>(base, off, saturate_int<int64_t>(v));
      return;
    case DataType::Boolean:
      write_bit(base, off, v != 0.0);
      return;
    case DataType::NotSet:
      return;
  }
}

double round_to(DataType t, double v) {
  switch (t) {
    case DataType::Double:
    case DataType::NotSet:
      return v;
    case DataType::Float:
      return static_cast<double>(static_cast<float>(v));
    case DataType::FP4_E2M1:
      return decode_e2m1(encode_e2m1(v));
    default: {
      unsigned char buf[8] = {};
      store_element(buf, t, 0, v);
      return load_element(buf, t, 0);
    }
  }
}

}  // namespace dnngraph
