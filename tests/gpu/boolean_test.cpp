// BOOLEAN tensors in graph memory: dnngraph stores one element per byte (0 or 1), on the CPU
// reference engine and in the buffers it hands cuDNN. The frontend's batchnorm fusion test
// hands cuDNN a bit-packed mask (eight elements a byte) for a BOOLEAN output, so cuDNN may use
// another layout for some operations. These tests settle it for pointwise graphs: a failure on
// the mask "M" (elements 0/1 against bytes holding other values) means cuDNN wrote or read
// bits, not bytes, and the CPU engine's layout must change to match it.
#include "harness.hpp"

namespace dnngraph::gpu_test {
namespace {

const std::vector<int64_t> kDim = {2, 16, 12, 10};  // 3840 elements, a multiple of 32

// A comparison written to memory as a BOOLEAN graph output, and a select reading it.
TEST(GpuBoolean, ComparisonOutputIsOneBytePerElement) {
  DNNGRAPH_REQUIRE_GPU();
  expect_matches_reference([](Graph& g) {
    auto x = input(g, "X", kDim, DataType::Float), y = input(g, "Y", kDim, DataType::Float);
    auto m = g.binary(PointwiseMode::CmpGt, x, y);
    finish(m, "M", kDim, DataType::Boolean);
    auto z = g.pointwise(x, y, m, Graph::pointwise_attrs(PointwiseMode::BinarySelect));
    finish(z, "Z", kDim, DataType::Float);
  });
}

// A BOOLEAN graph input (one byte per element, about half of them true) selecting between two
// tensors.
TEST(GpuBoolean, MaskInputIsOneBytePerElement) {
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

// Which memory layout cuDNN uses for BOOLEAN: one byte per element, or bits (LSB or MSB first).
// Prints BOOLEAN_LAYOUT lines; passes when one of the three explains every element.
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

TEST(GpuBoolean, LayoutProbe) {
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
    int64_t miss_byte = 0, miss_lsb = 0, miss_msb = 0, touched_tail = 0;
    for (int64_t e = 0; e < n; ++e) {
      const int64_t want = detail_::load_at(x.data(), DataType::Float, e) >
                           detail_::load_at(y.data(), DataType::Float, e);
      miss_byte += (m[static_cast<size_t>(e)] != want);
      miss_lsb += bit_of(m, e, true) != want;
      miss_msb += bit_of(m, e, false) != want;
      if (e >= n / 8 && m[static_cast<size_t>(e)] != 0xff) ++touched_tail;
    }
    std::printf(
        "BOOLEAN_LAYOUT output: mismatches byte-per-element %lld, bits LSB-first %lld, bits "
        "MSB-first %lld; bytes past n/8 written %lld; first bytes %02x %02x %02x %02x\n",
        (long long)miss_byte, (long long)miss_lsb, (long long)miss_msb, (long long)touched_tail,
        m[0], m[1], m[2], m[3]);
    EXPECT_TRUE(miss_byte == 0 || miss_lsb == 0 || miss_msb == 0);
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
    int64_t miss[3][2] = {};  // [byte!=0, lsb, msb][select x when true, select y when true]
    for (int64_t e = 0; e < n; ++e) {
      const double xv = detail_::load_at(x.data(), DataType::Float, e);
      const double yv = detail_::load_at(y.data(), DataType::Float, e);
      const double zv = detail_::load_at(z.data(), DataType::Float, e);
      const int64_t c[3] = {m[static_cast<size_t>(e)] != 0, bit_of(m, e, true),
                            bit_of(m, e, false)};
      for (int k = 0; k < 3; ++k) {
        miss[k][0] += zv != (c[k] ? xv : yv);
        miss[k][1] += zv != (c[k] ? yv : xv);
      }
    }
    std::printf(
        "BOOLEAN_LAYOUT input: mismatches (true->X / true->Y) byte-per-element %lld/%lld, LSB "
        "%lld/%lld, MSB %lld/%lld\n",
        (long long)miss[0][0], (long long)miss[0][1], (long long)miss[1][0], (long long)miss[1][1],
        (long long)miss[2][0], (long long)miss[2][1]);
  }
}

}  // namespace
}  // namespace dnngraph::gpu_test
