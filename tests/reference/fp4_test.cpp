// FP4_E2M1: the 16 codes, rounding and saturation, the packing order (two elements per byte,
// the even one in the low nibble), storage sizes, validation refusals, MXFP4 and NVFP4
// block_scale_quantize by hand and against an independent computation, dequantize error
// bounds, a matmul of dequantized FP4 operands, FP4 outputs written from the parallel
// pointwise path and from concurrent executes, JSON and fingerprint.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "common/ref_harness.hpp"
#include "dnngraph/dnngraph.hpp"
#include "dnngraph/ir/fingerprint.hpp"
#include "dnngraph/ir/json.hpp"

namespace {

using dnngraph::DataType;
using dnngraph::load_element;
using dnngraph::round_to;
using dnngraph::store_element;
using dnngraph::ir::BlockScaleDequantizeAttrs;
using dnngraph::ir::BlockScaleQuantizeAttrs;
using dnngraph::ir::TensorAttrs;

constexpr DataType kFp4 = DataType::FP4_E2M1;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// The value of each code, worked from the OCP MX E2M1 layout (sign, 2 exponent bits with bias
// 1, 1 mantissa bit; exponent 0 is subnormal: m * 0.5).
double hand_decode(unsigned code) {
  const unsigned e = (code >> 1) & 3, m = code & 1;
  const double mag = e == 0 ? 0.5 * m : std::ldexp(1.0 + 0.5 * m, static_cast<int>(e) - 1);
  return (code & 8) ? -mag : mag;
}

unsigned code_of(double v) {
  unsigned char b = 0;
  store_element(&b, kFp4, 0, v);
  return b & 0x0F;
}

BlockScaleQuantizeAttrs quant(int64_t block) {
  BlockScaleQuantizeAttrs a;
  a.block_size = block;
  return a;
}

// The E2M1 value nearest to q by brute force over the 8 magnitudes (ties to the even code),
// saturated: an independent model of the FP4 store.
double nearest_e2m1(double q) {
  const double mags[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  const double a = std::min(std::fabs(q), 6.0);
  int best = 0;
  for (int c = 1; c < 8; ++c) {
    const double d = std::fabs(a - mags[c]), bd = std::fabs(a - mags[best]);
    if (d < bd || (d == bd && c % 2 == 0)) best = c;
  }
  return std::signbit(q) ? -mags[best] : mags[best];
}

TEST(Fp4Storage, EveryCodeDecodesAsWorkedByHand) {
  // Codes 0-7: 0, 0.5, 1, 1.5, 2, 3, 4, 6; 8-15 their negatives (8 is -0).
  const double expected[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6};
  for (unsigned c = 0; c < 16; ++c) {
    // The code in the low nibble (element 0) and in the high nibble (element 1).
    const unsigned char lo = static_cast<unsigned char>(c | 0xA0);
    const unsigned char hi = static_cast<unsigned char>((c << 4) | 0x05);
    EXPECT_EQ(load_element(&lo, kFp4, 0), expected[c]) << "code " << c;
    EXPECT_EQ(load_element(&hi, kFp4, 1), expected[c]) << "code " << c;
    EXPECT_EQ(hand_decode(c), expected[c]) << "code " << c;
    EXPECT_EQ(std::signbit(load_element(&lo, kFp4, 0)), c >= 8) << "code " << c;
    EXPECT_EQ(code_of(expected[c]), c) << "value " << expected[c];  // exact values round-trip
  }
}

TEST(Fp4Storage, RoundsToNearestEvenAndSaturates) {
  struct Case {
    double in, want;
  };
  const Case cases[] = {
      // Between neighbours: the nearer one.
      {0.2, 0.0},
      {0.3, 0.5},
      {1.4, 1.5},
      {2.6, 3.0},
      {4.9, 4.0},
      {5.1, 6.0},
      {-3.4, -3.0},
      // Ties go to the even code: 0.25 (0|1) -> 0, 0.75 (1|2) -> 1, 1.25 (2|3) -> 1,
      // 1.75 (3|4) -> 2, 2.5 (4|5) -> 2, 3.5 (5|6) -> 4, 5 (6|7) -> 4.
      {0.25, 0.0},
      {0.75, 1.0},
      {1.25, 1.0},
      {1.75, 2.0},
      {2.5, 2.0},
      {3.5, 4.0},
      {5.0, 4.0},
      {-5.0, -4.0},
      // No infinity: overflow saturates to +-6.
      {6.5, 6.0},
      {1e30, 6.0},
      {-7.0, -6.0},
      {kInf, 6.0},
      {-kInf, -6.0}};
  for (const Case& c : cases) EXPECT_EQ(round_to(kFp4, c.in), c.want) << c.in;
  EXPECT_EQ(code_of(-0.25), 8u);  // -0 keeps its sign
  // No NaN: stored as +0.
  EXPECT_EQ(code_of(kNaN), 0u);
  EXPECT_EQ(code_of(-kNaN), 0u);
  // Against the brute-force model on a fine grid.
  for (double v = -8.0; v <= 8.0; v += 1.0 / 64) EXPECT_EQ(round_to(kFp4, v), nearest_e2m1(v)) << v;
}

TEST(Fp4Storage, PacksTwoPerByteEvenElementInTheLowNibble) {
  // Elements {1, -2, 6, 0.5}: codes {2, 0xC, 7, 1} -> bytes {0xC2, 0x17}.
  unsigned char b[2] = {0, 0};
  const double v[4] = {1.0, -2.0, 6.0, 0.5};
  for (int i = 0; i < 4; ++i) store_element(b, kFp4, i, v[i]);
  EXPECT_EQ(b[0], 0xC2);
  EXPECT_EQ(b[1], 0x17);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(load_element(b, kFp4, i), v[i]);
  // A store rewrites its own nibble only.
  unsigned char c[2] = {0xFF, 0xFF};
  store_element(c, kFp4, 0, 0.0);  // low nibble of byte 0
  store_element(c, kFp4, 3, 1.5);  // high nibble of byte 1
  EXPECT_EQ(c[0], 0xF0);
  EXPECT_EQ(c[1], 0x3F);
  // Reading element 1 of 0x5A: the high nibble 5 (3.0); element 0: 0xA (-1.0).
  const unsigned char d = 0x5A;
  EXPECT_EQ(load_element(&d, kFp4, 1), 3.0);
  EXPECT_EQ(load_element(&d, kFp4, 0), -1.0);
}

TEST(Fp4Storage, TypeTablesAndSizes) {
  EXPECT_EQ(dnngraph::data_type_name(kFp4), "FP4_E2M1");
  EXPECT_EQ(dnngraph::data_type_from_name("FP4_E2M1"), kFp4);
  EXPECT_EQ(dnngraph::data_type_bits(kFp4), 4);
  EXPECT_EQ(dnngraph::data_type_size(kFp4), 0);  // not whole bytes
  EXPECT_TRUE(dnngraph::is_floating(kFp4));
  EXPECT_FALSE(dnngraph::is_integral(kFp4));
  EXPECT_TRUE(dnngraph::is_sub_byte(kFp4));
  EXPECT_FALSE(dnngraph::is_sub_byte(DataType::FP8_E4M3));
  EXPECT_EQ(dnngraph::data_type_bits(DataType::Half), 16);
  EXPECT_EQ(dnngraph::data_type_bytes(kFp4, 6), 3);
  EXPECT_EQ(dnngraph::data_type_bytes(kFp4, 5), 3);  // the last byte half used
  EXPECT_EQ(dnngraph::data_type_bytes(kFp4, 0), 0);
  EXPECT_EQ(dnngraph::data_type_bytes(kFp4, INT64_MAX), INT64_MAX / 2 + 1);
  EXPECT_EQ(dnngraph::data_type_bytes(DataType::Float, 5), 20);
  EXPECT_EQ(dnngraph::data_type_bytes(DataType::Float, INT64_MAX / 2), std::nullopt);
  EXPECT_EQ(dnngraph::data_type_bytes(kFp4, -1), std::nullopt);

  TensorAttrs t;
  t.set_dim({3, 4}).set_stride({4, 1}).set_data_type(kFp4);
  EXPECT_EQ(t.storage_bytes(), 6);
  t.set_stride({6, 1});  // span 1 + 12 + 3 = 16 elements
  EXPECT_EQ(t.storage_bytes(), 8);
  t.set_dim({2, 4}).set_stride({6, 1});  // span 10
  EXPECT_EQ(t.storage_bytes(), 5);
  t.set_dim({INT64_MAX / 2, 4}).set_stride({4, 1});  // the span overflows int64
  EXPECT_EQ(t.storage_bytes(), std::nullopt);
}

// Validation refusals: the message names the tensor and the op, the rule and the fix.
dnngraph::Status validate_add(const TensorAttrs& x_attrs) {
  dnngraph::Graph g;
  g.set_io_data_type(DataType::Float);
  auto x = g.tensor(x_attrs);
  auto one = g.tensor(TensorAttrs().set_name("one").set_dim({1, 1}).set_stride({1, 1}));
  g.add(x, one, dnngraph::ir::OpOptions{"add_fp4"})->set_output(true).set_name("y");
  return g.validate();
}

TEST(Fp4Validate, RefusesAnOddUnitStrideExtent) {
  const dnngraph::Status s = validate_add(
      TensorAttrs().set_name("x").set_dim({4, 5}).set_stride({5, 1}).set_data_type(kFp4));
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), dnngraph::ErrorCode::InvalidGraph);
  EXPECT_NE(s.message().find("tensor 'x'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("add_fp4"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("unit-stride dim 1 has extent 5"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("must be even"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("pad that dim to 6"), std::string::npos) << s.message();
}

TEST(Fp4Validate, RefusesNoUnitStrideAxisAndOddRowStrides) {
  dnngraph::Status s = validate_add(
      TensorAttrs().set_name("x").set_dim({4, 4}).set_stride({8, 2}).set_data_type(kFp4));
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("no dim has stride 1"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("tensor 'x'"), std::string::npos) << s.message();
  s = validate_add(
      TensorAttrs().set_name("x").set_dim({2, 4}).set_stride({5, 1}).set_data_type(kFp4));
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("stride 0 is 5"), std::string::npos) << s.message();
  // The same layouts pass with even extents and strides (gaps allowed).
  EXPECT_TRUE(
      validate_add(
          TensorAttrs().set_name("x").set_dim({2, 4}).set_stride({6, 1}).set_data_type(kFp4))
          .is_ok());
  // A column-major FP4 tensor packs along dim 0.
  EXPECT_TRUE(
      validate_add(
          TensorAttrs().set_name("x").set_dim({4, 3}).set_stride({1, 4}).set_data_type(kFp4))
          .is_ok());
}

TEST(Fp4Validate, RefusesAnOddFp4OutputAndPassByValue) {
  dnngraph::Graph g;
  g.set_io_data_type(DataType::Float);
  auto x = g.tensor(TensorAttrs().set_name("x").set_dim({3, 3}).set_stride({3, 1}));
  g.relu(x, dnngraph::ir::OpOptions{"relu_fp4"})
      ->set_output(true)
      .set_name("y")
      .set_data_type(kFp4);
  dnngraph::Status s = g.validate();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("tensor 'y' (output"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("relu_fp4"), std::string::npos) << s.message();

  dnngraph::Graph h;
  h.set_io_data_type(DataType::Float);
  auto a = h.tensor(TensorAttrs().set_name("a").set_dim({2, 2}).set_stride({2, 1}));
  auto c = h.tensor(TensorAttrs().set_name("c").set_dim({1}).set_stride({1}).set_data_type(kFp4));
  c->set_is_pass_by_value(true);
  h.mul(a, c)->set_output(true).set_name("y");
  s = h.validate();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("pass-by-value tensor 'c'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("FP4_E2M1"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("give the scalar as FLOAT"), std::string::npos) << s.message();
}

TEST(Fp4Validate, QuantizeScaleTypesName) {
  dnngraph::Graph g;
  g.set_io_data_type(DataType::Float);
  auto x = g.tensor(TensorAttrs().set_name("x").set_dim({2, 32}).set_stride({32, 1}));
  auto [y, s] = g.block_scale_quantize(x, quant(16));
  y->set_output(true).set_name("y").set_data_type(DataType::FP8_E4M3);
  s->set_output(true).set_name("s").set_data_type(DataType::FP8_E4M3);  // E4M3 scales: NVFP4 only
  const dnngraph::Status st = g.validate();
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("FP8_E4M3 for NVFP4, whose Y is FP4_E2M1"), std::string::npos)
      << st.message();
}

struct Quantized {
  std::vector<double> y, s;
  std::vector<unsigned char> y_bytes;
};

// Quantizes x [rows, cols] with blocks of `block` along the last dim into FP4 with `scale`.
Quantized quantize(const std::vector<double>& x, int64_t rows, int64_t cols, int64_t block,
                   DataType scale) {
  dnngraph::Graph g;
  g.set_io_data_type(DataType::Float);
  auto xt = g.tensor(TensorAttrs().set_name("x").set_dim({rows, cols}).set_stride({cols, 1}));
  xt->set_data_type(DataType::Float);
  auto [y, s] = g.block_scale_quantize(xt, quant(block));
  y->set_output(true).set_name("y").set_data_type(kFp4);
  s->set_output(true).set_name("s");
  if (scale != DataType::NotSet) s->set_data_type(scale);
  ref_test::Buffers b;
  b.set(xt, x);
  const dnngraph::Status st = b.run_graph(g);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_EQ(b[y].bytes.size(), static_cast<size_t>(rows * cols / 2));
  return {b.values(y), b.values(s), b[y].bytes};
}

TEST(RefFp4, MxQuantizeHandWorked) {
  // Blocks of 4, emax 2 (E2M1), scale 2^(floor(log2(amax)) - 2):
  //   {1, -3, 0.5, 2}:     amax 3 -> 2^(1-2) = 0.5; Y = {2, -6, 1, 4}
  //   {0.3, 0.1, -0.7, 5}: amax 5 -> 2^0 = 1;      Y = {0.5, 0, -0.5, 4 (5 ties to even)}
  //   {7, 1.25, -0.25, .75}: amax 7 -> 1;           Y = {6 (saturated), 1, -0, 1}
  //   {0, 0, 0, 0}:        2^-127;                  Y = 0
  const Quantized q = quantize({1, -3, 0.5, 2, 0.3, 0.1, -0.7, 5, 7, 1.25, -0.25, 0.75, 0, 0, 0, 0},
                               2, 8, 4, DataType::NotSet);
  EXPECT_EQ(q.s, (std::vector<double>{0.5, 1.0, 1.0, std::ldexp(1.0, -127)}));
  EXPECT_EQ(q.y, (std::vector<double>{2, -6, 1, 4, 0.5, 0, -0.5, 4, 6, 1, -0.0, 1, 0, 0, 0, 0}));
  // The bytes: codes {4, 0xF | 2, 6 | 1, 0 | 9, 6 | 7, 2 | 8, 2 | 0, 0 | 0, 0}.
  EXPECT_EQ(q.y_bytes,
            (std::vector<unsigned char>{0xF4, 0x62, 0x01, 0x69, 0x27, 0x28, 0x00, 0x00}));
}

TEST(RefFp4, NvQuantizeHandWorked) {
  // Blocks of 4, scale = amax / 6 rounded up to FP8_E4M3:
  //   {1, -3, 0.5, 2}:       3/6 = 0.5 (exact);           Y = {2, -6, 1, 4}
  //   {0.3, 0.1, -0.7, 5}:   5/6 = 0.833 -> 0.875;        Y = {0.343->0.5, 0.114->0, -0.8->-1,
  //                                                            5.71->6}
  //   {7, 1.25, -0.25, .75}: 7/6 = 1.167 -> 1.25;         Y = {5.6->6, 1, -0.2->-0, 0.6->0.5}
  //   {0, 0, 0, 0}:          2^-9 (smallest E4M3);        Y = 0
  //   {3000, 1, 0, 0}:       500 > 448 -> 448;            Y = {6.7->6 (saturated), 0.002->0, 0, 0}
  //   {0.01, 0, 0, 0}:       0.00167 -> 2^-9 (subnormal); Y = {5.12->6, 0, 0, 0}
  const Quantized q = quantize({1, -3, 0.5, 2, 0.3,  0.1, -0.7, 5, 7,    1.25, -0.25, 0.75,
                                0, 0,  0,   0, 3000, 1,   0,    0, 0.01, 0,    0,     0},
                               3, 8, 4, DataType::FP8_E4M3);
  EXPECT_EQ(q.s, (std::vector<double>{0.5, 0.875, 1.25, std::ldexp(1.0, -9), 448.0,
                                      std::ldexp(1.0, -9)}));
  EXPECT_EQ(q.y, (std::vector<double>{2, -6, 1, 4, 0.5, 0, -1, 6, 6, 1, -0.0, 0.5,
                                      0, 0,  0, 0, 6,   0, 0,  0, 6, 0, 0,    0}));
}

TEST(RefFp4, QuantizeNaNBlocksGetANaNScale) {
  for (DataType scale : {DataType::NotSet, DataType::FP8_E4M3}) {
    const Quantized q = quantize({kNaN, 1, 2, 3, 1, 2, 3, kInf}, 1, 8, 4, scale);
    ASSERT_EQ(q.s.size(), 2u);
    EXPECT_TRUE(std::isnan(q.s[0]));
    EXPECT_TRUE(std::isnan(q.s[1]));
    for (double v : q.y) EXPECT_EQ(v, 0.0);  // x / NaN is NaN, which FP4 stores as +0
  }
}

// MXFP4 (block 32) and NVFP4 (block 16) on random inputs against an independent computation
// of the scale and the elements.
TEST(RefFp4, QuantizeMatchesIndependentModel) {
  std::mt19937 gen(4242);
  std::uniform_real_distribution<double> mag(-3.0, 3.0);
  std::uniform_real_distribution<double> sgn(-1.0, 1.0);
  const int64_t rows = 6, cols = 64;
  std::vector<double> x(static_cast<size_t>(rows * cols));
  for (double& v : x) v = round_to(DataType::Float, sgn(gen) * std::pow(10.0, mag(gen)));
  for (const auto& [block, scale] :
       {std::pair<int64_t, DataType>{32, DataType::FP8_E8M0}, {16, DataType::FP8_E4M3}}) {
    const Quantized q = quantize(x, rows, cols, block, scale);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t b = 0; b < cols / block; ++b) {
        double amax = 0;
        for (int64_t k = 0; k < block; ++k)
          amax = std::max(amax, std::fabs(x[static_cast<size_t>(r * cols + b * block + k)]));
        double want_scale;
        if (scale == DataType::FP8_E8M0) {
          want_scale = std::exp2(std::floor(std::log2(amax)) - 2);
        } else {  // the smallest E4M3 value >= amax / 6, by search over all 126 positive codes
          want_scale = 448.0;
          for (unsigned c = 1; c < 0x7F; ++c) {
            unsigned char code = static_cast<unsigned char>(c);
            const double v = load_element(&code, DataType::FP8_E4M3, 0);
            if (v >= std::min(amax / 6, 448.0) && v < want_scale) want_scale = v;
          }
        }
        const size_t si = static_cast<size_t>(r * (cols / block) + b);
        ASSERT_EQ(q.s[si], want_scale) << "row " << r << " block " << b;
        for (int64_t k = 0; k < block; ++k) {
          const size_t i = static_cast<size_t>(r * cols + b * block + k);
          EXPECT_EQ(q.y[i], nearest_e2m1(x[i] / want_scale)) << "element " << i;
        }
      }
  }
}

// Y = X * scale: FP4 bytes worked by hand.
TEST(RefFp4, DequantizeHandWorked) {
  dnngraph::Graph g;
  g.set_io_data_type(DataType::Float);
  auto x =
      g.tensor(TensorAttrs().set_name("x").set_dim({2, 4}).set_stride({4, 1}).set_data_type(kFp4));
  auto s = g.tensor(TensorAttrs().set_name("s").set_dim({2, 1}).set_stride({1, 1}).set_data_type(
      DataType::FP8_E8M0));
  BlockScaleDequantizeAttrs a;
  a.block_size = {4};
  auto y = g.block_scale_dequantize(x, s, a);
  y->set_output(true).set_name("y");
  ref_test::Buffers b;
  b.add(x);
  // Row 0 bytes {0x21, 0xF7}: elements {0.5, 1, 6, -6}; row 1 {0x9A, 0x05}: {-1, -0.5, 3, 0}.
  const unsigned char bytes[4] = {0x21, 0xF7, 0x9A, 0x05};
  std::memcpy(b[x].bytes.data(), bytes, 4);
  b.set(s, {4.0, 0.125});
  ASSERT_OK(b.run_graph(g));
  EXPECT_EQ(b.values(y), (std::vector<double>{2, 4, 24, -24, -0.125, -0.0625, 0.375, 0}));
}

// dequantize(quantize(x)) is within half an FP4 step of x / scale, times the scale (plus the
// saturation of MX blocks, whose largest element may reach 8 * scale).
TEST(RefFp4, DequantizeOfQuantizeWithinTheFormatsError) {
  std::mt19937 gen(77);
  std::uniform_real_distribution<double> dist(-5.0, 5.0);
  const int64_t rows = 4, cols = 64;
  for (const auto& [block, scale] :
       {std::pair<int64_t, DataType>{32, DataType::FP8_E8M0}, {16, DataType::FP8_E4M3}}) {
    dnngraph::Graph g;
    g.set_io_data_type(DataType::Float);
    auto x = g.tensor(TensorAttrs().set_name("x").set_dim({rows, cols}).set_stride({cols, 1}));
    x->set_data_type(DataType::Float);
    auto [q, s] = g.block_scale_quantize(x, quant(block));
    q->set_data_type(kFp4).set_name("q");
    s->set_data_type(scale).set_name("s");
    BlockScaleDequantizeAttrs a;
    a.block_size = {block};
    auto y = g.block_scale_dequantize(q, s, a);
    y->set_output(true).set_name("y");
    ref_test::Buffers b;
    std::vector<double> xv(static_cast<size_t>(rows * cols));
    for (double& v : xv) v = dist(gen);
    xv = b.set(x, xv);
    ASSERT_OK(b.run_graph(g));
    const std::vector<double> yv = b.values(y);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t blk = 0; blk < cols / block; ++blk) {
        double amax = 0;
        for (int64_t k = 0; k < block; ++k)
          amax = std::max(amax, std::fabs(xv[static_cast<size_t>(r * cols + blk * block + k)]));
        // The scale the format allows: MX 2^(floor(log2 amax) - 2), NV amax/6 rounded up by at
        // most one E4M3 step (1/8 relative).
        const double sc = scale == DataType::FP8_E8M0 ? std::exp2(std::floor(std::log2(amax)) - 2)
                                                      : amax / 6 * (1 + 0.125);
        for (int64_t k = 0; k < block; ++k) {
          const size_t i = static_cast<size_t>(r * cols + blk * block + k);
          const double qv = std::fabs(xv[i]) / sc;
          const double half_step = qv < 2 ? 0.25 : qv < 4 ? 0.5 : 1.0;
          const double bound = (std::max(qv - 6.0, 0.0) + half_step) * sc;
          EXPECT_LE(std::fabs(yv[i] - xv[i]), bound) << "element " << i << " x " << xv[i];
        }
      }
  }
}

// C = dequantize(A) @ dequantize(B) with MX FP4 operands, against a naive product of the
// decoded values.
TEST(RefFp4, MatmulOfDequantizedOperands) {
  const int64_t M = 8, K = 64, N = 6;
  std::mt19937 gen(9);
  std::uniform_int_distribution<int> byte(0, 255), exp_code(120, 130);
  dnngraph::Graph g;
  g.set_io_data_type(DataType::Float).set_compute_data_type(DataType::Float);
  auto aq = g.tensor(TensorAttrs().set_name("aq").set_dim({1, M, K}).set_stride({M * K, K, 1}));
  aq->set_data_type(kFp4);
  auto as = g.tensor(
      TensorAttrs().set_name("as").set_dim({1, M, K / 32}).set_stride({M * K / 32, K / 32, 1}));
  as->set_data_type(DataType::FP8_E8M0);
  // B [1, K, N] packed along K (column-major rows: stride 1 on K), scales per 32 along K.
  auto bq = g.tensor(TensorAttrs().set_name("bq").set_dim({1, K, N}).set_stride({K * N, 1, K}));
  bq->set_data_type(kFp4);
  auto bs = g.tensor(
      TensorAttrs().set_name("bs").set_dim({1, K / 32, N}).set_stride({K / 32 * N, 1, K / 32}));
  bs->set_data_type(DataType::FP8_E8M0);
  BlockScaleDequantizeAttrs da, db;
  da.block_size = {1, 32};
  db.block_size = {32, 1};
  auto a = g.block_scale_dequantize(aq, as, da);
  auto b = g.block_scale_dequantize(bq, bs, db);
  auto c = g.matmul(a, b);
  c->set_output(true).set_name("c").set_data_type(DataType::Double);
  ASSERT_OK(g.validate());
  ref_test::Buffers bufs;
  for (auto* t : {&aq, &bq}) {
    auto& h = bufs[*t];
    for (auto& v : h.bytes) v = static_cast<unsigned char>(byte(gen));
  }
  for (auto* t : {&as, &bs}) {
    auto& h = bufs[*t];
    for (auto& v : h.bytes) v = static_cast<unsigned char>(exp_code(gen));
  }
  ASSERT_OK(bufs.run_graph(g));
  // Decode by hand: element (m, k) of A is nibble m*K + k; of B (k, n) nibble n*K + k.
  auto nib = [](const std::vector<unsigned char>& v, int64_t i) {
    const unsigned char byte = v[static_cast<size_t>(i / 2)];
    return hand_decode(i % 2 ? byte >> 4 : byte & 0xF);
  };
  auto e8m0 = [](unsigned char code) { return std::ldexp(1.0, code - 127); };
  const auto &A = bufs[aq].bytes, &B = bufs[bq].bytes, &SA = bufs[as].bytes, &SB = bufs[bs].bytes;
  std::vector<double> want(static_cast<size_t>(M * N), 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double av = nib(A, m * K + k) * e8m0(SA[static_cast<size_t>(m * (K / 32) + k / 32)]);
        const double bv = nib(B, n * K + k) * e8m0(SB[static_cast<size_t>(n * (K / 32) + k / 32)]);
        acc += av * bv;
      }
      want[static_cast<size_t>(m * N + n)] = round_to(DataType::Float, acc);
    }
  const std::vector<double> got = bufs.values(c);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-6 * std::fabs(want[i]) + 1e-30) << "element " << i;
}

// FP4 outputs of a kernel that computes in an OpenMP region (pointwise above 16384 elements):
// its threads fill an fp64 buffer and KernelContext::store packs it serially, so no two
// threads ever write the two nibbles of one byte. Every nibble is checked; a lost update of a
// read-modify-write would show as a wrong element.
TEST(RefFp4, ParallelPointwiseWritesEveryNibbleThreaded) {
  const int64_t rows = 64, cols = 1024;  // 65536 elements: the parallel path
  const int saved = omp_get_max_threads();
  omp_set_num_threads(std::max(saved, 4));
  dnngraph::Graph g;
  g.set_io_data_type(DataType::Float).set_compute_data_type(DataType::Float);
  auto x = g.tensor(TensorAttrs().set_name("x").set_dim({rows, cols}).set_stride({cols, 1}));
  x->set_data_type(DataType::Float);
  auto y = g.relu(x);
  y->set_output(true).set_name("y").set_data_type(kFp4);
  ref_test::Buffers b;
  ref_test::Rng rng(31);
  const std::vector<double> xv = b.random(x, rng, -7.0, 7.0);
  ASSERT_OK(b.run_graph(g));
  omp_set_num_threads(saved);
  const std::vector<double> yv = b.values(y);
  for (size_t i = 0; i < xv.size(); ++i)
    ASSERT_EQ(yv[i], nearest_e2m1(std::max(xv[i], 0.0))) << "element " << i;
}

// Concurrent executes of one built graph into separate FP4 outputs (run under TSan by
// `make test-tsan`: the FP4 store path shares nothing between executes).
TEST(RefFp4, ConcurrentExecutesWriteSeparateOutputs) {
  const int64_t n = 256;
  dnngraph::Graph g;
  g.set_io_data_type(DataType::Float);
  auto x = g.tensor(TensorAttrs().set_name("x").set_dim({1, n}).set_stride({n, 1}).set_uid(1));
  auto y = g.relu(x);
  y->set_output(true).set_name("y").set_data_type(kFp4).set_uid(2);
  auto handle = dnngraph::Handle::create(dnngraph::Device::cpu());
  ASSERT_TRUE(handle.is_ok());
  ASSERT_OK(g.build(handle.value()));
  constexpr int kThreads = 4;
  std::vector<std::vector<float>> xs(kThreads, std::vector<float>(n));
  std::vector<std::vector<unsigned char>> ys(kThreads, std::vector<unsigned char>(n / 2, 0xEE));
  for (int t = 0; t < kThreads; ++t)
    for (int64_t i = 0; i < n; ++i)
      xs[static_cast<size_t>(t)][static_cast<size_t>(i)] = static_cast<float>((i + t) % 13) * 0.5f;
  std::vector<dnngraph::Status> st(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      dnngraph::VariantPack p{{1, xs[static_cast<size_t>(t)].data()},
                              {2, ys[static_cast<size_t>(t)].data()}};
      st[static_cast<size_t>(t)] = g.execute(*handle.value(), p, nullptr, 0);
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_TRUE(st[static_cast<size_t>(t)].is_ok()) << st[static_cast<size_t>(t)].to_string();
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(load_element(ys[static_cast<size_t>(t)].data(), kFp4, i),
                nearest_e2m1(static_cast<double>((i + t) % 13) * 0.5))
          << "thread " << t << " element " << i;
  }
}

// FP4 inputs read through load_element by pointwise and reduction.
TEST(RefFp4, PointwiseAndReductionReadFp4) {
  dnngraph::Graph g;
  g.set_io_data_type(DataType::Float).set_compute_data_type(DataType::Float);
  auto x =
      g.tensor(TensorAttrs().set_name("x").set_dim({2, 4}).set_stride({4, 1}).set_data_type(kFp4));
  auto two = g.tensor(TensorAttrs().set_name("two").set_dim({1, 1}).set_stride({1, 1}));
  two->set_data_type(DataType::Float);
  auto y = g.mul(x, two);
  y->set_output(true).set_name("y");
  dnngraph::ir::ReductionAttrs ra;
  ra.mode = dnngraph::ReductionMode::Add;
  auto r = g.reduction(x, ra);
  r->set_output(true).set_name("r").set_dim({2, 1});
  ref_test::Buffers b;
  b.add(x);
  // {0x21, 0xF7, 0x9A, 0x05}: {0.5, 1, 6, -6 | -1, -0.5, 3, 0}.
  const unsigned char bytes[4] = {0x21, 0xF7, 0x9A, 0x05};
  std::memcpy(b[x].bytes.data(), bytes, 4);
  b.set(two, {2.0});
  ASSERT_OK(b.run_graph(g));
  EXPECT_EQ(b.values(y), (std::vector<double>{1, 2, 12, -12, -2, -1, 6, 0}));
  EXPECT_EQ(b.values(r), (std::vector<double>{1.5, 1.5}));
}

TEST(Fp4Json, RoundTripsAndEntersTheFingerprint) {
  auto make = [](DataType yt) {
    dnngraph::ir::Graph g;
    g.set_name("fp4").set_io_data_type(DataType::Float);
    auto x = g.tensor(TensorAttrs().set_name("x").set_dim({2, 32}).set_stride({32, 1}).set_uid(1));
    auto [y, s] = g.block_scale_quantize(x, quant(16));
    y->set_output(true).set_name("y").set_data_type(yt).set_uid(2);
    s->set_output(true).set_name("s").set_data_type(DataType::FP8_E4M3).set_uid(3);
    return g;
  };
  dnngraph::ir::Graph g = make(kFp4);
  ASSERT_OK(g.validate());
  const std::string text = dnngraph::ir::to_json(g);
  EXPECT_NE(text.find("\"FP4_E2M1\""), std::string::npos);
  dnngraph::ir::Graph back;
  ASSERT_OK(dnngraph::ir::from_json(text, back));
  ASSERT_OK(back.validate());
  EXPECT_EQ(dnngraph::ir::to_json(back), text);
  EXPECT_EQ(dnngraph::ir::fingerprint(back), dnngraph::ir::fingerprint(g));
  dnngraph::ir::Graph other = make(DataType::FP8_E4M3);
  EXPECT_NE(dnngraph::ir::fingerprint(other), dnngraph::ir::fingerprint(g));
}

}  // namespace
