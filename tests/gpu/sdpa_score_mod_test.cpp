// SDPA score modifiers on the GPU against the reference engine: softcapping
// (cap * tanh(score / cap), cap a pass-by-value scalar) spliced after the attention scale in the
// forward (O and STATS) and the backward (score_mod recompute plus score_mod_bprop through
// TANH_BWD on the tensor score_mod saved), and a bias-like add of a [1, 1, s_q, s_kv] table.
// Each case prints one SDPA_RESULT line for the record. Skips without a GPU.
#include <memory>

#include "harness.hpp"
#include "sdpa_cases.hpp"

namespace dnngraph::gpu_test {
namespace {

// Softcapping with cap 0.5 (the scores of the harness's [-1, 1] inputs reach a few units).
SdpaCase softcap_case(const char* name, bool backward) {
  SdpaCase c = sdpa_case(name, backward);
  c.more_inputs = [backward](Graph& g, ir::SdpaInputs& extra) {
    auto cap = g.scalar(ir::Scalar::of_float(0.5), "cap");
    auto saved = std::make_shared<ir::Tensor>();  // score / cap, what the bprop reads
    extra.score_mod = [cap, saved](ir::Graph& gr, ir::Tensor s) {
      *saved = gr.binary(PointwiseMode::Div, s, cap);
      return gr.mul(gr.unary(PointwiseMode::Tanh, *saved), cap);
    };
    if (!backward) return;
    extra.score_mod_bprop = [cap, saved](ir::Graph& gr, ir::Tensor ds) {
      auto t = gr.binary(PointwiseMode::TanhBwd, gr.mul(ds, cap), *saved);
      return gr.binary(PointwiseMode::Div, t, cap);
    };
  };
  return c;
}

// score + TABLE [1, 1, s_q, s_kv] (slope 1: no bprop needed).
SdpaCase table_case(const char* name, bool backward) {
  SdpaCase c = sdpa_case(name, backward);
  c.more_inputs = [sq = c.sq, skv = c.skv](Graph& g, ir::SdpaInputs& extra) {
    auto table = input(g, "TABLE", {1, 1, sq, skv}, DataType::Float);
    extra.score_mod = [table](ir::Graph& gr, ir::Tensor s) { return gr.add(s, table); };
  };
  return c;
}

void check(const SdpaCase& c) { expect_report_ok(run_case(c)); }

TEST(GpuSdpaScoreMod, SoftcapForward) {
  DNNGRAPH_REQUIRE_GPU();
  check(softcap_case("fwd softcap b2 h4 s128 d64", false));
  SdpaCase c = softcap_case("fwd softcap GQA hq6 hk2 b2 s128 d64", false);
  c.hq = 6;
  c.hk = 2;
  c.t = DataType::Half;
  check(c);
}

TEST(GpuSdpaScoreMod, SoftcapBackward) {
  DNNGRAPH_REQUIRE_GPU();
  check(softcap_case("bwd softcap b2 h4 s128 d64", true));
}

TEST(GpuSdpaScoreMod, TableAdd) {
  DNNGRAPH_REQUIRE_GPU();
  check(table_case("fwd score+table b2 h4 s128 d64", false));
  check(table_case("bwd score+table (no bprop) b2 h4 s128 d64", true));
}

}  // namespace
}  // namespace dnngraph::gpu_test
