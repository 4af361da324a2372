// SDPA with attention sinks on the GPU against the reference engine: SINK_TOKEN [1, h_q, 1, 1]
// FLOAT in the forward (O and STATS) and the backward (dQ, dK, dV and DSINK_TOKEN). The cuDNN
// lowering follows the frontend's graph (docs/cudnn-engine.md); each case prints one
// SDPA_RESULT line for the record. Skips without a GPU.
#include "sdpa_check.hpp"

namespace dnngraph::gpu_test {
namespace {

using SinkCase = SdpaCase;

std::function<void(Graph&)> make_graph(const SinkCase& c) {
  return [c](Graph& g) {
    ir::SdpaInputs extra;
    extra.sink_token = input(g, "SINK", {1, c.hq, 1, 1}, DataType::Float);
    if (c.backward) extra.dsink_token = g.tensor(ir::TensorAttrs().set_name("DSINK"));
    add_sdpa(g, c, sdpa_options_of(c), extra);
    if (c.backward) finish(extra.dsink_token, "DSINK", {1, c.hq, 1, 1}, DataType::Float);
  };
}

void check(const SinkCase& c) { check_sdpa(c, make_graph(c)); }

TEST(GpuSdpaSink, Forward) {
  DNNGRAPH_REQUIRE_GPU();
  SinkCase c;
  c.name = "fwd sink b2 h4 s128 d64";
  check(c);
  c.name = "fwd sink causal b2 h4 s128 d64";
  c.causal = true;
  c.t = DataType::Half;
  check(c);
}

TEST(GpuSdpaSink, ForwardGqa) {
  DNNGRAPH_REQUIRE_GPU();
  SinkCase c;
  c.name = "fwd sink causal GQA hq6 hk2 b2 s128 d64";
  c.hq = 6;
  c.hk = 2;
  c.causal = true;
  check(c);
}

TEST(GpuSdpaSink, BackwardWithDSink) {
  DNNGRAPH_REQUIRE_GPU();
  SinkCase c;
  c.backward = true;
  c.name = "bwd sink + dSink b2 h4 s128 d64";
  check(c);
  c.name = "bwd sink + dSink causal GQA hq6 hk2 b2 s128 d64";
  c.hq = 6;
  c.hk = 2;
  c.causal = true;
  check(c);
}

}  // namespace
}  // namespace dnngraph::gpu_test
