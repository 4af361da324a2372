// FP4_E2M1 graphs on the cuDNN engine. cuDNN runs FP4 only in its block-scaled engines, which
// need FP4 tensor cores (compute capability 10.x and later; docs/cudnn-engine.md). Below that,
// each graph must be refused with NotSupported, and the message must say that the graph has an
// FP4_E2M1 tensor; from 10.x on, each must match the reference engine (outputs poisoned first,
// inputs uniform in [-1, 1]): block scales exactly, FP4 elements within one FP4 step.
// g++ 13 reports false -Warray-bounds / -Wstringop-overflow errors inside std::vector's copy
// (stl_algobase.h memmove, "offset 4 is out of the bounds [0, 4]") for this file's small
// initializer lists at -O3.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif
#include <cuda_runtime.h>

#include <cstdio>
#include <string>

#include "harness.hpp"

namespace dnngraph::gpu_test {
namespace {

constexpr DataType kFp4 = DataType::FP4_E2M1;

// The compute capability of device 0 as major * 10 + minor, or -1 when it cannot be read.
int compute_capability() {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return major * 10 + minor;
}

std::function<void(Graph&)> quantize_graph(int64_t block, DataType scale_type) {
  return [=](Graph& g) {
    g.set_io_data_type(DataType::Float).set_compute_data_type(DataType::Float);
    auto x = input(g, "X", {128, 128}, DataType::Float);
    ir::BlockScaleQuantizeAttrs a;
    a.block_size = block;
    auto [y, s] = g.block_scale_quantize(x, a);
    finish(y, "Y", {128, 128}, kFp4);
    finish(s, "SCALE", {128, 128 / block}, scale_type);
  };
}

// C = dequantize(A) @ dequantize(B), MXFP4 operands (the block-scaled matmul's form).
std::function<void(Graph&)> dequantize_matmul_graph() {
  return [](Graph& g) {
    g.set_io_data_type(DataType::Float).set_compute_data_type(DataType::Float);
    const int64_t M = 128, K = 128, N = 128;
    auto aq = input(g, "AQ", {1, M, K}, kFp4);
    auto as = input(g, "AS", {1, M, K / 32}, DataType::FP8_E8M0);
    auto bq = g.tensor(ir::TensorAttrs().set_name("BQ").set_dim({1, K, N}).set_stride(
        {K * N, 1, K}));  // K innermost: FP4 pairs pack along K
    bq->set_data_type(kFp4);
    auto bs = g.tensor(ir::TensorAttrs()
                           .set_name("BS")
                           .set_dim({1, K / 32, N})
                           .set_stride({K / 32 * N, 1, K / 32}));
    bs->set_data_type(DataType::FP8_E8M0);
    ir::BlockScaleDequantizeAttrs da, db;
    da.block_size = {1, 32};
    db.block_size = {32, 1};
    auto a = g.block_scale_dequantize(aq, as, da);
    auto b = g.block_scale_dequantize(bq, bs, db);
    finish(g.matmul(a, b), "C", {1, M, N}, DataType::Float);
  };
}

void expect_refused_or_matching(const char* what, const std::function<void(Graph&)>& make,
                                CompareOptions o = {}) {
  const int cc = compute_capability();
  ASSERT_GE(cc, 0) << "cannot read the compute capability of device 0";
  const RunReport r = run_and_compare(make, o);
  std::printf(
      "FP4_RESULT %s cc %d.%d: %s\n", what, cc / 10, cc % 10,
      r.status.is_ok() ? ("ran, plan " + r.plan_name).c_str() : r.status.to_string().c_str());
  if (cc < 100) {
    ASSERT_FALSE(r.status.is_ok())
        << what << " ran on compute capability " << cc / 10 << "." << cc % 10 << " (plan "
        << r.plan_name << "); FP4 was expected to need 10.x: update the docs";
    EXPECT_EQ(r.status.code(), ErrorCode::NotSupported) << r.status.to_string();
    EXPECT_NE(r.status.message().find("FP4_E2M1 tensor"), std::string::npos)
        << "the refusal does not name the FP4 tensor: " << r.status.to_string();
    return;
  }
  expect_report_ok(r);
}

TEST(GpuFp4, Mxfp4QuantizeRefusedBelowCc10ElseMatchesReference) {
  DNNGRAPH_REQUIRE_GPU();
  expect_refused_or_matching("mxfp4 quantize", quantize_graph(32, DataType::FP8_E8M0));
}

TEST(GpuFp4, Nvfp4QuantizeRefusedBelowCc10ElseMatchesReference) {
  DNNGRAPH_REQUIRE_GPU();
  expect_refused_or_matching("nvfp4 quantize", quantize_graph(16, DataType::FP8_E4M3));
}

TEST(GpuFp4, Mxfp4DequantizeMatmulRefusedBelowCc10ElseMatchesReference) {
  DNNGRAPH_REQUIRE_GPU();
  CompareOptions o;
  // E8M0 scales near 1 (codes 120-134), so that products stay in a float's comfortable range.
  o.adjust_input = [](const ir::TensorAttrs& t, std::vector<unsigned char>& host) {
    if (t.data_type != DataType::FP8_E8M0) return;
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<unsigned char>(120 + i % 15);
  };
  expect_refused_or_matching("mxfp4 dequantize+matmul", dequantize_matmul_graph(), o);
}

}  // namespace
}  // namespace dnngraph::gpu_test
