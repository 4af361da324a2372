// SDPA with attention sinks on the GPU against the reference engine: SINK_TOKEN [1, h_q, 1, 1]
// FLOAT in the forward (O and STATS) and the backward (dQ, dK, dV and DSINK_TOKEN). The cuDNN
// lowering follows the frontend's graph (docs/cudnn-engine.md); each case prints one
// SDPA_RESULT line for the record. Skips without a GPU.
#include "harness.hpp"
#include "sdpa_cases.hpp"

namespace dnngraph::gpu_test {
namespace {

SdpaCase sink_case(const char* name, bool backward) {
  SdpaCase c = sdpa_case(name, backward);
  c.sink = true;
  return c;
}

void check(const SdpaCase& c) { expect_report_ok(run_case(c)); }

TEST(GpuSdpaSink, Forward) {
  DNNGRAPH_REQUIRE_GPU();
  SdpaCase c = sink_case("fwd sink b2 h4 s128 d64", false);
  check(c);
  c.name = "fwd sink causal b2 h4 s128 d64";
  c.causal = true;
  c.t = DataType::Half;
  check(c);
}

TEST(GpuSdpaSink, ForwardGqa) {
  DNNGRAPH_REQUIRE_GPU();
  SdpaCase c = sink_case("fwd sink causal GQA hq6 hk2 b2 s128 d64", false);
  c.hq = 6;
  c.hk = 2;
  c.causal = true;
  check(c);
}

TEST(GpuSdpaSink, BackwardWithDSink) {
  DNNGRAPH_REQUIRE_GPU();
  SdpaCase c = sink_case("bwd sink + dSink b2 h4 s128 d64", true);
  check(c);
  c.name = "bwd sink + dSink causal GQA hq6 hk2 b2 s128 d64";
  c.hq = 6;
  c.hk = 2;
  c.causal = true;
  check(c);
}

}  // namespace
}  // namespace dnngraph::gpu_test
