// Reference SDPA dropout: the mask form (DROPOUT_MASK * DROPOUT_SCALE) against naive fp64
// loops and finite differences, RNG_DUMP, and the identity the GPU checks rely on: replaying
// the dumped mask through the mask form with scale 1/(1-p) gives what the probability form gave.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "reference/sdpa_harness.hpp"

namespace dnngraph::reference {
namespace {

using namespace sdpa_harness;  // NOLINT(build/namespaces)

std::vector<int64_t> score_dims(const Spec& s) { return {s.b, s.hq, s.sq, s.skv}; }

// The mask form of `s` fed `mask` (full score dims) and scale 1/(1-p), instead of SEED/OFFSET.
Spec replay_spec(const Spec& s) {
  Spec m = s;
  m.dropout = 0.0;
  m.mask_dims = score_dims(s);
  m.mask_scale = 1.0 / (1.0 - s.dropout);
  return m;
}

// ------------------------------------------------------------------ RNG_DUMP and replay
TEST(RefSdpaDropout, RngDumpIsTheDrawnKeepMask) {
  Spec s;
  s.hq = 4, s.hk = 2, s.hv = 2, s.causal = true;
  s.dropout = 0.3, s.seed = 4242, s.offset = 17;
  for (DataType dump_type : {DataType::Float, DataType::Half}) {
    SCOPED_TRACE(data_type_name(dump_type));
    std::mt19937 gen(300);
    Inputs in;
    Case c = forward_node(s, false, gen, in);
    c.output(Role::RNG_DUMP, make_buf("dump", score_dims(s), dump_type));
    Status st = c.run();
    ASSERT_TRUE(st.is_ok()) << st.message();
    const auto dump = c.result(Role::RNG_DUMP);
    // Every element, masked by causality or not, is the hash's keep decision as 1 / 0.
    int kept = 0;
    for (int64_t e = 0; e < static_cast<int64_t>(dump.size()); ++e) {
      const auto ix = ref_test::unravel(e, score_dims(s));
      const bool keep = sdpa_dropout_uniform(4242, 17, ix[0], ix[1], ix[2], ix[3]) >= 0.3;
      ASSERT_EQ(dump[static_cast<size_t>(e)], keep ? 1.0 : 0.0) << e;
      kept += keep;
    }
    EXPECT_GT(kept, 0);
    EXPECT_LT(kept, static_cast<int>(dump.size()));
    expect_close(c.result(Role::O), naive_forward(s, in).o, 1e-5, "O");
  }
}

void replay_case(const Spec& s, uint32_t seed, const std::string& what) {
  SCOPED_TRACE(what);
  // Probability form, with the mask dumped.
  std::mt19937 gen(seed);
  Inputs in;
  Case prob = forward_node(s, false, gen, in);
  prob.output(Role::RNG_DUMP, make_buf("dump", score_dims(s), DataType::Float));
  Status st = prob.run();
  ASSERT_TRUE(st.is_ok()) << st.message();
  const auto dump = prob.result(Role::RNG_DUMP);

  // Mask form on the same Q, K, V (same generator seed), fed the dump.
  const Spec m = replay_spec(s);
  std::mt19937 gen2(seed);
  Inputs in2;
  Case mask = forward_node(m, false, gen2, in2);
  ASSERT_EQ(in2.q, in.q);
  ASSERT_EQ(in2.v, in.v);
  ASSERT_EQ(in2.bias, in.bias);
  mask.in.at(Role::DROPOUT_MASK).set(dump);
  st = mask.run();
  ASSERT_TRUE(st.is_ok()) << st.message();
  const auto o = prob.result(Role::O);
  EXPECT_EQ(mask.result(Role::O), o);  // bitwise: z is the same double on both paths
  EXPECT_EQ(mask.result(Role::STATS), prob.result(Role::STATS));

  // Backward, both forms, from the same O, dO and STATS.
  std::vector<double> d_o(o.size());
  std::uniform_real_distribution<double> dist(-1, 1);
  for (double& x : d_o) x = dist(gen);
  auto backward = [&](const Spec& form, const std::vector<double>* mask_values) {
    std::mt19937 unused(1);
    Case c = backward_node(form, in, mask_values, o, d_o, prob.result(Role::STATS), DataType::Float,
                           unused, false);
    Status bs = c.run();
    EXPECT_TRUE(bs.is_ok()) << bs.message();
    return std::vector<std::vector<double>>{c.result(Role::DQ), c.result(Role::DK),
                                            c.result(Role::DV)};
  };
  const auto gp = backward(s, nullptr), gm = backward(m, &dump);
  for (size_t t = 0; t < 3; ++t) {
    EXPECT_EQ(gm[t], gp[t]) << "gradient " << t;
    for (double x : gp[t]) ASSERT_TRUE(std::isfinite(x)) << "gradient " << t;
  }
}

TEST(RefSdpaDropout, MaskFormReplaysTheProbabilityForm) {
  Spec s;
  s.dropout = 0.25, s.seed = 77, s.offset = 3;
  replay_case(s, 310, "plain");
  s.hq = 4, s.hk = 2, s.hv = 2, s.causal = true, s.bottom_right = true, s.sq = 6, s.skv = 4;
  s.bias_dims = {1, 4, 6, 4};
  replay_case(s, 311, "GQA, causal bottom-right, bias");
  s.len_q = {5, 2}, s.len_kv = {4, 3};
  replay_case(s, 312, "padding");
}

// Through dnngraph::Graph: RNG_DUMP's dims, strides and type inferred, then the dump replayed
// through a second graph in the mask form with a pass-by-value scale.
TEST(RefSdpaDropoutGraph, DumpThenReplay) {
  Spec s;
  s.hq = 4, s.hk = 2, s.hv = 2, s.dropout = 0.4, s.seed = 9, s.offset = 2;
  const Shapes sh(s);
  std::mt19937 gen(320);
  Inputs in;
  auto [qb, kb, vb] = qkv_bufs(s, sh, gen, in);

  Graph g;
  g.set_io_data_type(s.io).set_compute_data_type(DataType::Float);
  ir::SdpaInputs extra;
  extra.seed = g.scalar(ir::Scalar::of_int(s.seed), "seed");
  extra.offset = g.scalar(ir::Scalar::of_int(s.offset), "offset");
  ir::TensorAttrs dump_attrs;
  dump_attrs.set_name("dump").set_uid(6);
  extra.rng_dump = g.tensor(dump_attrs);
  extra.rng_dump->set_output(true);
  auto [o, stats] = g.sdpa(graph_tensor(g, qb, 1), graph_tensor(g, kb, 2), graph_tensor(g, vb, 3),
                           s.attrs(true), extra);
  ASSERT_OK(g.validate());
  EXPECT_EQ(extra.rng_dump->dim, score_dims(s));
  EXPECT_EQ(extra.rng_dump->stride, ref_test::packed(score_dims(s)));
  EXPECT_EQ(extra.rng_dump->data_type, DataType::Float);
  Buf ob = poisoned("O", sh.o, s.io), db = poisoned("dump", score_dims(s), DataType::Float);
  mark_output(o, ob, 4);
  ASSERT_OK(build_and_run(
      g, {{1, qb.data()}, {2, kb.data()}, {3, vb.data()}, {4, ob.data()}, {6, db.data()}}));
  expect_close(ob.get(), naive_forward(s, in).o, 1e-5, "O");

  Graph r;
  r.set_io_data_type(s.io).set_compute_data_type(DataType::Float);
  ir::SdpaInputs replay;
  replay.dropout_mask = graph_tensor(r, db, 7);
  replay.dropout_scale = r.scalar(ir::Scalar::of_float(1.0 / (1.0 - s.dropout)), "scale");
  ir::SdpaAttrs a = s.attrs(true);
  a.dropout_probability.reset();
  auto [o2, unused] =
      r.sdpa(graph_tensor(r, qb, 1), graph_tensor(r, kb, 2), graph_tensor(r, vb, 3), a, replay);
  Buf o2b = poisoned("O2", sh.o, s.io);
  mark_output(o2, o2b, 8);
  ASSERT_OK(build_and_run(
      r, {{1, qb.data()}, {2, kb.data()}, {3, vb.data()}, {7, db.data()}, {8, o2b.data()}}));
  EXPECT_EQ(o2b.get(), ob.get());
}

// ------------------------------------------------------------------ mask form vs naive
TEST(RefSdpaDropout, MaskFormForwardMatchesNaive) {
  Spec s;
  s.mask_dims = {2, 2, 5, 7}, s.mask_scale = 1.25;
  forward_case(s, 330, "full mask");
  s.hq = 4, s.hk = 2, s.hv = 2, s.mask_dims = {1, 4, 5, 7}, s.mask_scale = 2.0;
  forward_case(s, 331, "GQA 4/2, mask broadcast over batch");
  s.mask_dims = {2, 1, 5, 7}, s.causal = true, s.bias_dims = {1, 4, 5, 7};
  s.mask_scale_in_buffer = true;
  forward_case(s, 332, "mask broadcast over heads, causal, bias, scale in a buffer");
  s.mask_dims = {1, 1, 5, 7}, s.mask_any_values = true, s.mask_scale = 0.6;
  forward_case(s, 333, "mask [1,1,sq,skv] with values in [0,2) used as given");
  s.io = DataType::BFloat16;
  forward_case(s, 334, "bf16");
}

TEST(RefSdpaDropout, MaskFormBackwardMatchesNaive) {
  Spec s;
  s.mask_dims = {2, 2, 5, 7}, s.mask_scale = 1.25;
  backward_case(s, 340, "full mask");
  s.hq = 4, s.hk = 2, s.hv = 2, s.mask_dims = {1, 4, 5, 7}, s.mask_scale = 2.0;
  backward_case(s, 341, "GQA 4/2, mask broadcast over batch");
  s.hk = 1, s.hv = 1, s.mask_dims = {2, 1, 5, 7}, s.causal = true, s.bias_dims = {2, 4, 5, 7};
  s.mask_scale_in_buffer = true;
  backward_case(s, 342, "MQA, mask over heads, causal, bias, scale in a buffer");
  s.mask_any_values = true, s.len_q = {3, 5}, s.len_kv = {7, 4}, s.bshd = true;
  backward_case(s, 343, "any mask values, padding, BSHD");
}

TEST(RefSdpaDropout, MaskFormBackwardMatchesFiniteDifferences) {
  Spec s;
  s.b = 2, s.hq = 4, s.hk = 2, s.hv = 2, s.sq = 3, s.skv = 4, s.d = 2, s.dv = 2;
  s.mask_dims = {1, 4, 3, 4}, s.mask_scale = 1.5;
  finite_difference_case(s, 350, "GQA 4/2, 0/1 mask broadcast over batch");
  s.mask_dims = {2, 1, 3, 4}, s.mask_any_values = true, s.causal = true;
  s.bias_dims = {1, 4, 3, 4};
  finite_difference_case(s, 351, "any mask values over heads, causal, bias");
}

// ------------------------------------------------------------------ checks
TEST(RefSdpaDropout, Errors) {
  auto expect_error = [](ir::Node& n, std::vector<std::string> parts) {
    Status st = ref_test::validate_node(n);
    EXPECT_EQ(st.code(), ErrorCode::InvalidGraph) << st.message();
    for (const auto& part : parts)
      EXPECT_NE(st.message().find(part), std::string::npos) << part << " | " << st.message();
  };
  std::mt19937 gen(360);
  Inputs in;
  Spec m;
  m.mask_dims = {2, 2, 5, 7};
  {  // mask without scale
    Case c = forward_node(m, false, gen, in);
    std::erase_if(c.node.inputs, [](const ir::Port& p) { return p.role == Role::DROPOUT_SCALE; });
    expect_error(c.node, {"sdpa 'sdpa0'", "DROPOUT_MASK 'dmask'", "needs both"});
  }
  {  // both forms
    Spec both = m;
    both.dropout = 0.2;
    Case c = forward_node(both, false, gen, in);
    expect_error(c.node, {"DROPOUT_MASK 'dmask'", "dropout_probability"});
  }
  {  // mask dims
    Spec bad = m;
    bad.mask_dims = {2, 3, 5, 7};
    Case c = forward_node(bad, false, gen, in);
    expect_error(c.node, {"DROPOUT_MASK 'dmask'", "[2,3,5,7]", "[2,2,5,7]"});
  }
  {  // RNG_DUMP without dropout by probability
    Case c = forward_node(m, false, gen, in);
    c.output(Role::RNG_DUMP, make_buf("dump", {2, 2, 5, 7}, DataType::Float));
    expect_error(c.node, {"RNG_DUMP 'dump'", "dropout_probability"});
  }
  {  // RNG_DUMP dims
    Spec p;
    p.dropout = 0.1;
    Case c = forward_node(p, false, gen, in);
    c.output(Role::RNG_DUMP, make_buf("dump", {2, 2, 5, 1}, DataType::Float));
    expect_error(c.node, {"RNG_DUMP 'dump'", "[2,2,5,1]", "[2,2,5,7]"});
  }
}

}  // namespace
}  // namespace dnngraph::reference
