// SDPA with attention sinks on the GPU against the reference engine: SINK_TOKEN [1, h_q, 1, 1]
// FLOAT in the forward (O and STATS) and the backward (dQ, dK, dV and DSINK_TOKEN). The cuDNN
// lowering follows the frontend's graph (docs/cudnn-engine.md); each case prints one
// SDPA_RESULT line for the record. Skips without a GPU.
#include <cmath>
#include <cstdio>
#include <cstring>

#include "harness.hpp"

namespace dnngraph::gpu_test {
namespace {

struct SinkCase {
  const char* name;
  DataType t = DataType::BFloat16;
  int64_t b = 2, hq = 4, hk = 4, sq = 128, skv = 128, d = 64;
  bool causal = false;
  bool backward = false;
};

std::function<void(Graph&)> make_graph(const SinkCase& c) {
  return [c](Graph& g) {
    const DataType t = c.t;
    g.set_io_data_type(t);
    auto q = input(g, "Q", {c.b, c.hq, c.sq, c.d}, t);
    auto k = input(g, "K", {c.b, c.hk, c.skv, c.d}, t);
    auto v = input(g, "V", {c.b, c.hk, c.skv, c.d}, t);
    ir::SdpaOptions a;
    a.causal = c.causal;
    if (c.causal) a.right_bound = 0;
    a.attn_scale = 1.0 / std::sqrt(static_cast<double>(c.d));
    ir::SdpaInputs extra;
    extra.sink_token = input(g, "SINK", {1, c.hq, 1, 1}, DataType::Float);
    if (!c.backward) {
      auto out = g.sdpa(q, k, v, ir::SdpaAttrs{a, false, {}}, extra);
      finish(out[0], "O", {c.b, c.hq, c.sq, c.d}, t);
      finish(out[1], "STATS", {c.b, c.hq, c.sq, 1}, DataType::Float);
      return;
    }
    auto o = input(g, "O", {c.b, c.hq, c.sq, c.d}, t);
    auto d_o = input(g, "DO", {c.b, c.hq, c.sq, c.d}, t);
    auto stats = input(g, "STATS", {c.b, c.hq, c.sq, 1}, DataType::Float);
    extra.dsink_token = g.tensor(ir::TensorAttrs().set_name("DSINK"));
    auto out = g.sdpa_backward(q, k, v, o, d_o, stats, ir::SdpaBwdAttrs{a}, extra);
    finish(out[0], "DQ", {c.b, c.hq, c.sq, c.d}, t);
    finish(out[1], "DK", {c.b, c.hk, c.skv, c.d}, t);
    finish(out[2], "DV", {c.b, c.hk, c.skv, c.d}, t);
    finish(extra.dsink_token, "DSINK", {1, c.hq, 1, 1}, DataType::Float);
  };
}

CompareOptions options(const SinkCase& c) {
  CompareOptions o;
  o.tol_scale = 2;
  o.min_abs = c.backward ? 0.15 : 2e-2;
  o.adjust_input = [](const ir::TensorAttrs& t, std::vector<unsigned char>& host) {
    // STATS as a log-sum-exp of the random scores would be: around 1 (+-0.5).
    if (t.name != "STATS") return;
    for (size_t off = 0; off + 4 <= host.size(); off += 4) {
      float f;
      std::memcpy(&f, host.data() + off, 4);
      f = 1.0f + 0.5f * f;
      std::memcpy(host.data() + off, &f, 4);
    }
  };
  return o;
}

void check(const SinkCase& c) {
  const RunReport r = run_and_compare(make_graph(c), options(c));
  std::printf(
      "SDPA_RESULT %s %s: %s plan %s, %lld compared, %lld mismatches, max abs err %.4g%s%s\n",
      c.name, data_type_name(c.t).data(), r.status.is_ok() ? "ok" : r.status.to_string().c_str(),
      r.plan_name.c_str(), static_cast<long long>(r.compared), static_cast<long long>(r.mismatches),
      r.max_abs_err, r.mismatches ? ", first: " : "", r.first_mismatch.c_str());
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  EXPECT_GT(r.compared, 0);
  EXPECT_EQ(r.mismatches, 0) << r.mismatches << " of " << r.compared
                             << " elements differ; first: " << r.first_mismatch << " (plan "
                             << r.plan_name << ")";
}

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
