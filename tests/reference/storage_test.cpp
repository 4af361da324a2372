// Storage conversions of the reference engine (tensor_io.cpp): round to nearest even for
// half/bf16/fp8, subnormals, overflow, integer saturation, and strided gather/scatter.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/ref_harness.hpp"
#include "engines/reference/kernel.hpp"

namespace {

using dnngraph::DataType;
using dnngraph::ir::Role;
using dnngraph::reference::load_element;
using dnngraph::reference::round_to;
using dnngraph::reference::store_element;

constexpr double kInf = std::numeric_limits<double>::infinity();

uint32_t bits_of(DataType t, double v) {
  unsigned char buf[8] = {};
  store_element(buf, t, 0, v);
  if (dnngraph::data_type_size(t) == 1) return buf[0];
  uint16_t h;
  std::memcpy(&h, buf, 2);
  return h;
}

double from_bits(DataType t, uint32_t code) {
  unsigned char buf[8] = {};
  if (dnngraph::data_type_size(t) == 1) {
    buf[0] = static_cast<unsigned char>(code);
  } else {
    const uint16_t h = static_cast<uint16_t>(code);
    std::memcpy(buf, &h, 2);
  }
  return load_element(buf, t, 0);
}

TEST(Storage, HalfEncodingsByHand) {
  EXPECT_EQ(bits_of(DataType::Half, 1.0), 0x3c00u);
  EXPECT_EQ(bits_of(DataType::Half, -2.0), 0xc000u);
  EXPECT_EQ(bits_of(DataType::Half, 65504.0), 0x7bffu);
  EXPECT_EQ(bits_of(DataType::Half, std::ldexp(1.0, -24)), 0x0001u);  // smallest subnormal
  EXPECT_EQ(bits_of(DataType::Half, std::ldexp(1.0, -14)), 0x0400u);  // smallest normal
  EXPECT_EQ(bits_of(DataType::Half, kInf), 0x7c00u);
  EXPECT_EQ(bits_of(DataType::Half, -0.0), 0x8000u);
  EXPECT_TRUE(std::isnan(from_bits(DataType::Half, 0x7e00u)));
  // 0x3555: exponent 13 (2^-2), mantissa 0x155.
  EXPECT_EQ(from_bits(DataType::Half, 0x3555u), (1024 + 0x155) * std::ldexp(1.0, -12));
}

TEST(Storage, HalfRoundsToNearestEvenWithTies) {
  const double ulp = std::ldexp(1.0, -10);                              // at 1.0
  EXPECT_EQ(round_to(DataType::Half, 1.0 + 0.5 * ulp), 1.0);            // tie -> even (down)
  EXPECT_EQ(round_to(DataType::Half, 1.0 + 1.5 * ulp), 1.0 + 2 * ulp);  // tie -> even (up)
  EXPECT_EQ(round_to(DataType::Half, 1.0 + 0.51 * ulp), 1.0 + ulp);
  EXPECT_EQ(round_to(DataType::Half, -(1.0 + 1.5 * ulp)), -(1.0 + 2 * ulp));
  // Subnormals: quantum 2^-24.
  const double q = std::ldexp(1.0, -24);
  EXPECT_EQ(round_to(DataType::Half, 0.5 * q), 0.0);  // tie -> 0 (even)
  EXPECT_EQ(round_to(DataType::Half, 0.75 * q), q);
  EXPECT_EQ(round_to(DataType::Half, 1.5 * q), 2 * q);
  EXPECT_EQ(round_to(DataType::Half, 2.5 * q), 2 * q);
  EXPECT_EQ(round_to(DataType::Half, 0.3 * q), 0.0);
  // Largest subnormal rounding up into the smallest normal.
  EXPECT_EQ(round_to(DataType::Half, std::ldexp(1.0, -14) - 0.4 * q), std::ldexp(1.0, -14));
  // Overflow: 65520 is the midpoint between 65504 and 65536 -> ties to even (65536) -> inf.
  EXPECT_EQ(round_to(DataType::Half, 65519.0), 65504.0);
  EXPECT_EQ(round_to(DataType::Half, 65520.0), kInf);
  EXPECT_EQ(round_to(DataType::Half, -1e10), -kInf);
  EXPECT_TRUE(std::isnan(round_to(DataType::Half, std::nan(""))));
}

TEST(Storage, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(bits_of(DataType::BFloat16, 1.0), 0x3f80u);
  EXPECT_EQ(bits_of(DataType::BFloat16, -3.0), 0xc040u);
  EXPECT_EQ(bits_of(DataType::BFloat16, kInf), 0x7f80u);
  const double ulp = std::ldexp(1.0, -7);
  EXPECT_EQ(round_to(DataType::BFloat16, 1.0 + 0.5 * ulp), 1.0);
  EXPECT_EQ(round_to(DataType::BFloat16, 1.0 + 1.5 * ulp), 1.0 + 2 * ulp);
  EXPECT_EQ(round_to(DataType::BFloat16, 1.0 + 0.6 * ulp), 1.0 + ulp);
  // Largest finite (2 - 2^-7) * 2^127; the midpoint to 2^128 overflows to inf.
  const double mx = (2.0 - ulp) * std::ldexp(1.0, 127);
  EXPECT_EQ(bits_of(DataType::BFloat16, mx), 0x7f7fu);
  EXPECT_EQ(round_to(DataType::BFloat16, (2.0 - 0.5 * ulp) * std::ldexp(1.0, 127)), kInf);
  EXPECT_EQ(round_to(DataType::BFloat16, (2.0 - 0.6 * ulp) * std::ldexp(1.0, 127)), mx);
  // Subnormals: quantum 2^-133.
  const double q = std::ldexp(1.0, -133);
  EXPECT_EQ(bits_of(DataType::BFloat16, q), 0x0001u);
  EXPECT_EQ(round_to(DataType::BFloat16, 0.5 * q), 0.0);
  EXPECT_EQ(round_to(DataType::BFloat16, 1.5 * q), 2 * q);
}

TEST(Storage, Fp8E4M3OverflowsToNaN) {
  EXPECT_EQ(bits_of(DataType::FP8_E4M3, 1.0), 0x38u);
  EXPECT_EQ(bits_of(DataType::FP8_E4M3, 448.0), 0x7eu);
  EXPECT_EQ(bits_of(DataType::FP8_E4M3, -448.0), 0xfeu);
  EXPECT_EQ(from_bits(DataType::FP8_E4M3, 0x7eu), 448.0);
  EXPECT_TRUE(std::isnan(from_bits(DataType::FP8_E4M3, 0x7fu)));
  EXPECT_TRUE(std::isnan(from_bits(DataType::FP8_E4M3, 0xffu)));
  // Exponent 1111 holds normal values in e4m3 ("fn"): 0x78 = 256.
  EXPECT_EQ(from_bits(DataType::FP8_E4M3, 0x78u), 256.0);
  // 464 is the midpoint between 448 (mantissa 110, even) and the NaN code: ties to 448.
  EXPECT_EQ(round_to(DataType::FP8_E4M3, 464.0), 448.0);
  EXPECT_TRUE(std::isnan(round_to(DataType::FP8_E4M3, 465.0)));
  EXPECT_TRUE(std::isnan(round_to(DataType::FP8_E4M3, 1e6)));
  EXPECT_TRUE(std::isnan(round_to(DataType::FP8_E4M3, kInf)));
  EXPECT_TRUE(std::isnan(round_to(DataType::FP8_E4M3, -kInf)));
  // Ties: 1 + 1/16 between 1 and 1.125 -> 1; 1 + 3/16 -> 1.25.
  EXPECT_EQ(round_to(DataType::FP8_E4M3, 1.0625), 1.0);
  EXPECT_EQ(round_to(DataType::FP8_E4M3, 1.1875), 1.25);
  // Subnormals: quantum 2^-9.
  const double q = std::ldexp(1.0, -9);
  EXPECT_EQ(bits_of(DataType::FP8_E4M3, q), 0x01u);
  EXPECT_EQ(round_to(DataType::FP8_E4M3, 0.5 * q), 0.0);
  EXPECT_EQ(round_to(DataType::FP8_E4M3, 1.5 * q), 2 * q);
  EXPECT_EQ(round_to(DataType::FP8_E4M3, 3.5 * q), 4 * q);
}

TEST(Storage, Fp8E5M2OverflowsToInf) {
  EXPECT_EQ(bits_of(DataType::FP8_E5M2, 1.0), 0x3cu);
  EXPECT_EQ(bits_of(DataType::FP8_E5M2, 57344.0), 0x7bu);
  EXPECT_EQ(bits_of(DataType::FP8_E5M2, kInf), 0x7cu);
  EXPECT_TRUE(std::isnan(from_bits(DataType::FP8_E5M2, 0x7du)));
  // 61440 is the midpoint between 57344 (mantissa 11, odd) and 65536: ties up -> inf.
  EXPECT_EQ(round_to(DataType::FP8_E5M2, 61439.0), 57344.0);
  EXPECT_EQ(round_to(DataType::FP8_E5M2, 61440.0), kInf);
  EXPECT_EQ(round_to(DataType::FP8_E5M2, -1e9), -kInf);
  EXPECT_EQ(round_to(DataType::FP8_E5M2, 1.125), 1.0);  // tie -> even
  EXPECT_EQ(round_to(DataType::FP8_E5M2, 1.375), 1.5);  // tie -> even
  const double q = std::ldexp(1.0, -16);
  EXPECT_EQ(bits_of(DataType::FP8_E5M2, q), 0x01u);
  EXPECT_EQ(round_to(DataType::FP8_E5M2, 0.5 * q), 0.0);
  EXPECT_EQ(round_to(DataType::FP8_E5M2, 1.5 * q), 2 * q);
}

// Every code decodes to a value that encodes back to the same code (NaNs to a NaN), and
// rounding random doubles gives the nearest representable value, ties to the even code,
// found by brute force over the sorted table of all finite values.
void check_format_exhaustively(DataType t, int bits, uint64_t seed) {
  std::vector<std::pair<double, uint32_t>> finite;
  for (uint32_t c = 0; c < (1u << bits); ++c) {
    const double v = from_bits(t, c);
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(from_bits(t, bits_of(t, v)))) << std::hex << c;
      continue;
    }
    if (v == 0.0 && std::signbit(v)) {
      EXPECT_EQ(bits_of(t, v), c);
      continue;
    }
    EXPECT_EQ(bits_of(t, v), c) << std::hex << "code 0x" << c << " value " << v;
    if (std::isfinite(v)) finite.emplace_back(v, c);
  }
  std::sort(finite.begin(), finite.end());
  const double max_finite = finite.back().first;
  double min_positive = max_finite;
  for (const auto& [v, c] : finite)
    if (v > 0) min_positive = std::min(min_positive, v);
  ref_test::Rng rng(seed);
  for (int i = 0; i < 4000; ++i) {
    // Log-uniform magnitudes covering subnormals to near the largest value.
    const double mag = std::min(
        max_finite, std::exp(rng.uniform(std::log(min_positive) - 1, std::log(max_finite))));
    const double x = rng.uniform() < 0.5 ? -mag : mag;
    auto hi = std::lower_bound(finite.begin(), finite.end(), std::make_pair(x, 0u),
                               [](auto a, auto b) { return a.first < b.first; });
    ASSERT_TRUE(hi != finite.begin() && hi != finite.end());
    auto lo = hi - 1;
    double want;
    if (hi->first == x) {
      want = x;
    } else {
      const double dl = x - lo->first, dh = hi->first - x;
      if (dl < dh)
        want = lo->first;
      else if (dh < dl)
        want = hi->first;
      else
        want = (lo->second & 1u) ? hi->first : lo->first;
    }
    ASSERT_EQ(round_to(t, x), want) << "x=" << x;
  }
}

TEST(Storage, HalfExhaustive) { check_format_exhaustively(DataType::Half, 16, 1); }
TEST(Storage, BFloat16Exhaustive) { check_format_exhaustively(DataType::BFloat16, 16, 2); }
TEST(Storage, Fp8E4M3Exhaustive) { check_format_exhaustively(DataType::FP8_E4M3, 8, 3); }
TEST(Storage, Fp8E5M2Exhaustive) { check_format_exhaustively(DataType::FP8_E5M2, 8, 4); }

TEST(Storage, FloatRoundsLikeTheHardware) {
  ref_test::Rng rng(5);
  for (int i = 0; i < 1000; ++i) {
    const double x = rng.uniform(-1e3, 1e3);
    EXPECT_EQ(round_to(DataType::Float, x), static_cast<double>(static_cast<float>(x)));
  }
  EXPECT_EQ(round_to(DataType::Float, 1e300), kInf);
  EXPECT_EQ(round_to(DataType::Double, 0.1), 0.1);
}

TEST(Storage, IntegersRoundToEvenAndSaturate) {
  EXPECT_EQ(round_to(DataType::Int8, 200.0), 127.0);
  EXPECT_EQ(round_to(DataType::Int8, -200.0), -128.0);
  EXPECT_EQ(round_to(DataType::Int8, 2.5), 2.0);
  EXPECT_EQ(round_to(DataType::Int8, 3.5), 4.0);
  EXPECT_EQ(round_to(DataType::Int8, -2.5), -2.0);
  EXPECT_EQ(round_to(DataType::Int8, 1.4), 1.0);
  EXPECT_EQ(round_to(DataType::UInt8, -5.0), 0.0);
  EXPECT_EQ(round_to(DataType::UInt8, 300.0), 255.0);
  EXPECT_EQ(round_to(DataType::UInt8, 254.6), 255.0);
  EXPECT_EQ(round_to(DataType::Int32, 3e10), 2147483647.0);
  EXPECT_EQ(round_to(DataType::Int32, -3e10), -2147483648.0);
  EXPECT_EQ(round_to(DataType::Int32, std::nan("")), 0.0);
  EXPECT_EQ(round_to(DataType::Int64, 1e30), 9223372036854775807.0);
  EXPECT_EQ(round_to(DataType::Int64, -12345.5), -12346.0);
  EXPECT_EQ(round_to(DataType::Boolean, 0.5), 1.0);
  EXPECT_EQ(round_to(DataType::Boolean, -3.0), 1.0);
  EXPECT_EQ(round_to(DataType::Boolean, 0.0), 0.0);
}

// BOOLEAN is bit-packed as cuDNN stores it: element i is bit i % 8 of byte i / 8, least
// significant first; a write keeps the other bits of its byte.
TEST(Storage, BooleanIsOneBitPerElementLsbFirst) {
  EXPECT_EQ(dnngraph::data_type_bits(DataType::Boolean), 1);
  EXPECT_TRUE(dnngraph::is_sub_byte(DataType::Boolean));
  EXPECT_EQ(dnngraph::data_type_bytes(DataType::Boolean, 9), 2);  // 9 bits take 2 bytes
  EXPECT_EQ(dnngraph::data_type_bytes(DataType::Boolean, 16), 2);
  unsigned char b[2] = {0xF0, 0x0F};
  const int truth[11] = {1, 0, 1, 1, 0, 0, 0, 1, 1, 0, 0};
  for (int i = 0; i < 11; ++i) store_element(b, DataType::Boolean, i, truth[i] ? 2.5 : 0.0);
  EXPECT_EQ(b[0], 0x8D);  // 1,0,1,1,0,0,0,1 from bit 0 up: 0b10001101
  EXPECT_EQ(b[1], 0x09);  // bits 0-2 written (1,0,0), bits 3-7 of 0x0F kept
  for (int i = 0; i < 11; ++i) EXPECT_EQ(load_element(b, DataType::Boolean, i), truth[i]) << i;
  const unsigned char c[1] = {0x40};
  EXPECT_EQ(load_element(c, DataType::Boolean, 6), 1.0);
  EXPECT_EQ(load_element(c, DataType::Boolean, 1), 0.0);
  // A [2,16] mask in either layout takes 4 bytes; no unit-stride or even-extent rule (FP4's).
  auto t = dnngraph::ir::TensorAttrs().set_dim({2, 16, 1, 3}).set_stride({48, 1, 48, 16});
  t.set_data_type(DataType::Boolean);
  EXPECT_EQ(t.storage_bytes(), 12);
  EXPECT_EQ(t.packing_problem(), "");
  EXPECT_EQ(t.set_dim({3, 5}).set_stride({5, 1}).packing_problem(), "");
}

// Gather/scatter through KernelContext: strided storage with gaps, broadcast loads and
// pass-by-value scalars.
TEST(Storage, StridedLoadStoreAndBroadcast) {
  using namespace dnngraph;
  // X [2,3] stored with row stride 5 and column stride 2 (gaps in between).
  auto x = ref_test::make_tensor("X", {2, 3}, DataType::Half, {5, 2});
  auto b = ref_test::make_tensor("B", {1, 3}, DataType::Float);
  auto s = std::make_shared<ir::TensorAttrs>();
  s->set_name("s").set_value(ir::Scalar::of_float(2.5));
  auto y = ref_test::make_tensor("Y", {2, 3}, DataType::BFloat16, {1, 4});  // column-major-ish
  ir::Node n;
  n.name = "io";
  n.attrs = ir::PointwiseAttrs{};
  n.inputs = {{Role::X, x}, {Role::B, b}, {Role::SCALE, s}};
  n.outputs = {{Role::Y, y}};
  ref_test::Buffers bufs;
  const auto xv = bufs.set(x, {1, 2, 3, 4, 5, 6});
  bufs.set(b, {10, 20, 30});
  reference::KernelContext ctx(n,
                               {{Role::X, {x.get(), bufs[x].data()}},
                                {Role::B, {b.get(), bufs[b].data()}},
                                {Role::SCALE, {s.get(), nullptr}}},
                               {{Role::Y, {y.get(), bufs[y].data()}}}, DataType::Float);
  const reference::Dense dx = ctx.load(Role::X);
  EXPECT_EQ(dx.data, xv);
  EXPECT_EQ(dx.dim, (std::vector<int64_t>{2, 3}));
  const reference::Dense db = ctx.load_broadcast(Role::B, {2, 3});
  EXPECT_EQ(db.data, (std::vector<double>{10, 20, 30, 10, 20, 30}));
  EXPECT_EQ(ctx.scalar(Role::SCALE), 2.5);
  // Storage offsets of X: (i, j) -> 5i + 2j; the gaps hold the poison.
  EXPECT_EQ(load_element(bufs[x].data(), DataType::Half, 5 + 4), 6.0);
  EXPECT_TRUE(std::isnan(load_element(bufs[x].data(), DataType::Half, 1)));
  reference::Dense out({2, 3});
  for (int i = 0; i < 6; ++i) out[i] = 1.0 + i + 1.0 / 512;  // rounds in bf16
  ctx.store(Role::Y, out);
  // Y (i, j) at offset i + 4j.
  EXPECT_EQ(load_element(bufs[y].data(), DataType::BFloat16, 1 + 4 * 2), 6.0);
  EXPECT_EQ(bufs.values(y), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(std::isnan(load_element(bufs[y].data(), DataType::BFloat16, 2)));  // gap
}

}  // namespace
