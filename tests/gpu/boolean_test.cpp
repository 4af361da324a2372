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
