// SDPA score modifiers on the GPU against the reference engine: softcapping
// (cap * tanh(score / cap), cap a pass-by-value scalar) spliced after the attention scale in the
// forward (O and STATS) and the backward (score_mod recompute plus score_mod_bprop through
// TANH_BWD on the tensor score_mod saved), and a bias-like add of a [1, 1, s_q, s_kv] table.
// Each case prints one SDPA_RESULT line for the record. Skips without a GPU.
#include <memory>

#include "sdpa_check.hpp"

namespace dnngraph::gpu_test {
namespace {

struct ModCase : SdpaCase {
  bool table = false;  // score + a [1, 1, s_q, s_kv] table instead of softcapping
};

std::function<void(Graph&)> make_graph(const ModCase& c) {
  return [c](Graph& g) {
    ir::SdpaInputs extra;
    if (c.table) {
      auto table = input(g, "TABLE", {1, 1, c.sq, c.skv}, DataType::Float);
      extra.score_mod = [table](ir::Graph& gr, ir::Tensor s) { return gr.add(s, table); };
    } else {
      auto cap = g.scalar(ir::Scalar::of_float(0.5), "cap");
      auto saved = std::make_shared<ir::Tensor>();  // score / cap, what the bprop reads
      extra.score_mod = [cap, saved](ir::Graph& gr, ir::Tensor s) {
        *saved = gr.binary(PointwiseMode::Div, s, cap);
        return gr.mul(gr.unary(PointwiseMode::Tanh, *saved), cap);
      };
      if (c.backward)
        extra.score_mod_bprop = [cap, saved](ir::Graph& gr, ir::Tensor ds) {
          auto t = gr.binary(PointwiseMode::TanhBwd, gr.mul(ds, cap), *saved);
          return gr.binary(PointwiseMode::Div, t, cap);
        };
    }
    add_sdpa(g, c, sdpa_options_of(c), extra);
  };
}

void check(const ModCase& c) { check_sdpa(c, make_graph(c)); }

TEST(GpuSdpaScoreMod, SoftcapForward) {
  DNNGRAPH_REQUIRE_GPU();
  ModCase c;
  c.name = "fwd softcap b2 h4 s128 d64";
  check(c);
  c.name = "fwd softcap GQA hq6 hk2 b2 s128 d64";
  c.hq = 6;
  c.hk = 2;
  c.t = DataType::Half;
  check(c);
}

TEST(GpuSdpaScoreMod, SoftcapBackward) {
  DNNGRAPH_REQUIRE_GPU();
  ModCase c;
  c.backward = true;
  c.name = "bwd softcap b2 h4 s128 d64";
  check(c);
}

TEST(GpuSdpaScoreMod, TableAdd) {
  DNNGRAPH_REQUIRE_GPU();
  ModCase c;
  c.table = true;
  c.name = "fwd score+table b2 h4 s128 d64";
  check(c);
  c.backward = true;
  c.name = "bwd score+table (no bprop) b2 h4 s128 d64";
  check(c);
}

}  // namespace
}  // namespace dnngraph::gpu_test
