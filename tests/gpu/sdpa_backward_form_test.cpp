// The form of the SDPA backward the cuDNN engine builds (lowering_variants): dQ accumulated in a
// float scratch tensor of the plan's workspace, as the frontend builds it on cuDNN 9, so the
// workspace holds b*h*s_q*d floats instead of the b*h*s_q*s_kv scores of dS; and the result of
// that form against the reference engine on a longer sequence than sdpa_test.cpp's.
#include "harness.hpp"
#include "sdpa_cases.hpp"

namespace dnngraph::gpu_test {
namespace {

SdpaCase long_causal() {
  SdpaCase c;
  c.name = "bwd causal b2 h4 s1024 d64 (float dQ accumulator)";
  c.backward = true;
  c.causal = true;
  c.sq = c.skv = 1024;
  return c;
}

TEST(GpuSdpaBackwardForm, WorkspaceHoldsTheDqAccumulatorNotTheScores) {
  DNNGRAPH_REQUIRE_GPU();
  const SdpaCase c = long_causal();
  Graph g;
  make_graph(c)(g);
  auto h = Handle::create(Device::cuda(0)).value();
  Status s = g.build(h, {HeurMode::A, HeurMode::Fallback});
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  const int64_t ws = g.get_workspace_size().value();
  const int64_t scores = c.b * c.hq * c.sq * c.skv * 2;     // dS in bf16: the dP form's need
  const int64_t accumulator = c.b * c.hq * c.sq * c.d * 4;  // dQ in float
  EXPECT_GE(ws, accumulator);
  EXPECT_LT(ws, scores) << "the plan's workspace (" << ws << " bytes) is as large as dS";
}

TEST(GpuSdpaBackwardForm, FloatDqAccumulatorMatchesTheReference) {
  DNNGRAPH_REQUIRE_GPU();
  expect_report_ok(run_case(long_causal()));
}

}  // namespace
}  // namespace dnngraph::gpu_test
