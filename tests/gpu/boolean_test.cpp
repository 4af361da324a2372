// BOOLEAN tensors in graph memory are bit-packed: element i is bit i % 8 (least significant
// first) of byte i / 8, by element offset. That is what cuDNN 9.19 reads and writes (first
// measured here on an H200 with LayoutProbe, 2026-12-02: a byte-per-element buffer disagreed
// on 3839 of 3840 elements, LSB-first bits on none), what the frontend's batchnorm fusion test
// hands it, and what dnngraph's storage (so the CPU reference engine) uses.
#include "harness.hpp"

namespace dnngraph::gpu_test {
namespace {

const std::vector<int64_t> kDim = {2, 16, 12, 10};  // 3840 elements, a multiple of 32

// A comparison written to memory as a BOOLEAN graph output, and a select reading it.
TEST(GpuBoolean, ComparisonOutputIsBitPacked) {
  DNNGRAPH_REQUIRE_GPU();
  expect_matches_reference([](Graph& g) {
    auto x = input(g, "X", kDim, DataType::Float), y = input(g, "Y", kDim, DataType::Float);
    auto m = g.binary(PointwiseMode::CmpGt, x, y);
    finish(m, "M", kDim, DataType::Boolean);
    auto z = g.pointwise(x, y, m, Graph::pointwise_attrs(PointwiseMode::BinarySelect));
    finish(z, "Z", kDim, DataType::Float);
  });
}

// Channels-last (NHWC) strides: the bits follow element offsets, channel innermost (the
// layout of the frontend's batchnorm fusion masks).
TEST(GpuBoolean, ChannelsLastComparisonIsBitPacked) {
  DNNGRAPH_REQUIRE_GPU();
  expect_matches_reference([](Graph& g) {
    auto x = input(g, "X", kDim, DataType::Float, true);
    auto y = input(g, "Y", kDim, DataType::Float, true);
    auto m = g.binary(PointwiseMode::CmpGt, x, y);
    finish(m, "M", kDim, DataType::Boolean, true);
    auto z = g.pointwise(x, y, m, Graph::pointwise_attrs(PointwiseMode::BinarySelect));
    finish(z, "Z", kDim, DataType::Float, true);
  });
}

// A BOOLEAN graph input (bit-packed, about half of the elements true) selecting between two
// tensors.
TEST(GpuBoolean, MaskInputIsBitPacked) {
  DNNGRAPH_REQUIRE_GPU();
  expect_matches_reference([](Graph& g) {
    auto x = input(g, "X", kDim, DataType::Float), y = input(g, "Y", kDim, DataType::Float);
    auto m = input(g, "M", kDim, DataType::Boolean);
    auto z = g.pointwise(x, y, m, Graph::pointwise_attrs(PointwiseMode::BinarySelect));
    finish(z, "Z", kDim, DataType::Float);
  });
}

}  // namespace
}  // namespace dnngraph::gpu_test

namespace dnngraph::gpu_test {
namespace {

detail_::Buffer& buf(GpuRun& run, const std::string& name) {
  for (auto& b : run.bufs)
    if (b.t->name == name) return b;
  ADD_FAILURE() << "no buffer " << name;
  return run.bufs.front();
}

int64_t bit_of(const std::vector<unsigned char>& b, int64_t e, bool lsb_first) {
  const int bit = lsb_first ? static_cast<int>(e % 8) : 7 - static_cast<int>(e % 8);
  return (b[static_cast<size_t>(e / 8)] >> bit) & 1;
}

// The layout worked out by hand, independently of dnngraph's storage code: cuDNN's BOOLEAN
// output and input against bits LSB or MSB first. Prints BOOLEAN_LAYOUT lines; expects
// LSB-first bits (and a true mask element selecting input 0).
TEST(GpuBoolean, BitsAreLsbFirstInElementOrder) {
  DNNGRAPH_REQUIRE_GPU();
  const int64_t n = 3840;
  {
    GpuRun run;
    ASSERT_TRUE(run.prepare(
                       [](Graph& g) {
                         auto x = input(g, "X", kDim, DataType::Float);
                         auto y = input(g, "Y", kDim, DataType::Float);
                         finish(g.binary(PointwiseMode::CmpGt, x, y), "M", kDim, DataType::Boolean);
                       },
                       {})
                    .is_ok());
    ASSERT_TRUE(run.run_once().is_ok());
    const auto& x = buf(run, "X").host;
    const auto& y = buf(run, "Y").host;
    const auto& m = buf(run, "M").host;
    ASSERT_EQ(m.size(), static_cast<size_t>(n / 8));  // BOOLEAN storage: n / 8 bytes
    int64_t miss_lsb = 0, miss_msb = 0;
    for (int64_t e = 0; e < n; ++e) {
      const int64_t want = detail_::load_at(x.data(), DataType::Float, e) >
                           detail_::load_at(y.data(), DataType::Float, e);
      miss_lsb += bit_of(m, e, true) != want;
      miss_msb += bit_of(m, e, false) != want;
    }
    std::printf(
        "BOOLEAN_LAYOUT output: mismatches bits LSB-first %lld, bits MSB-first %lld; first "
        "bytes %02x %02x %02x %02x\n",
        (long long)miss_lsb, (long long)miss_msb, m[0], m[1], m[2], m[3]);
    EXPECT_EQ(miss_lsb, 0);
  }
  {
    GpuRun run;
    ASSERT_TRUE(
        run.prepare(
               [](Graph& g) {
                 auto x = input(g, "X", kDim, DataType::Float);
                 auto y = input(g, "Y", kDim, DataType::Float);
                 auto m = input(g, "M", kDim, DataType::Boolean);
                 finish(g.pointwise(x, y, m, Graph::pointwise_attrs(PointwiseMode::BinarySelect)),
                        "Z", kDim, DataType::Float);
               },
               {})
            .is_ok());
    // Random bits in every byte of M's buffer.
    std::mt19937 gen(7);
    auto& m = buf(run, "M").host;
    for (auto& b : m) b = static_cast<unsigned char>(gen() & 0xff);
    cudaMemcpy(run.pack.at(buf(run, "M").t->uid), m.data(), m.size(), cudaMemcpyHostToDevice);
    ASSERT_TRUE(run.run_once().is_ok());
    const auto& x = buf(run, "X").host;
    const auto& y = buf(run, "Y").host;
    const auto& z = buf(run, "Z").host;
    int64_t miss[2][2] = {};  // [lsb, msb][select x when true, select y when true]
    for (int64_t e = 0; e < n; ++e) {
      const double xv = detail_::load_at(x.data(), DataType::Float, e);
      const double yv = detail_::load_at(y.data(), DataType::Float, e);
      const double zv = detail_::load_at(z.data(), DataType::Float, e);
      const int64_t c[2] = {bit_of(m, e, true), bit_of(m, e, false)};
      for (int k = 0; k < 2; ++k) {
        miss[k][0] += zv != (c[k] ? xv : yv);
        miss[k][1] += zv != (c[k] ? yv : xv);
      }
    }
    std::printf(
        "BOOLEAN_LAYOUT input: mismatches (true->X / true->Y) LSB %lld/%lld, MSB %lld/%lld\n",
        (long long)miss[0][0], (long long)miss[0][1], (long long)miss[1][0], (long long)miss[1][1]);
    EXPECT_EQ(miss[0][0], 0);
  }
}

}  // namespace
}  // namespace dnngraph::gpu_test
