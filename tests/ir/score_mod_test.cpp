// SDPA score modifiers in the IR: the builder turns the callback's ops into the node's subgraph,
// validate() checks them (pointwise only, what they may read, the masks the frontend refuses with
// them), the snapshot copies their tensors, and JSON and the fingerprint carry them.
#include <gtest/gtest.h>

#include "dnngraph/ir/fingerprint.hpp"
#include "dnngraph/ir/json.hpp"
#include "ir/test_util.hpp"

namespace dnngraph::ir {
namespace {

using testing::expect_invalid;
using testing::make_input;

struct Sdpa {
  Graph g;
  Tensor q, k, v, o, stats;
};

// softcap (cap * tanh(score / cap)) or, with `mul`, cap * tanh(score * cap).
ScoreModifier softcap(Tensor cap, bool mul = false) {
  return [cap, mul](Graph& g, Tensor s) {
    Tensor x = g.binary(mul ? PointwiseMode::Mul : PointwiseMode::Div, s, cap);
    return g.mul(g.unary(PointwiseMode::Tanh, x), cap);
  };
}

void make(Sdpa& t, SdpaAttrs a, SdpaInputs extra) {
  t.q = make_input(t.g, "q", {2, 3, 5, 8}, DataType::Float);
  t.k = make_input(t.g, "k", {2, 3, 7, 8}, DataType::Float);
  t.v = make_input(t.g, "v", {2, 3, 7, 8}, DataType::Float);
  auto r = t.g.sdpa(t.q, t.k, t.v, a, std::move(extra));
  t.o = r[0];
  t.stats = r[1];
  t.o->set_output(true);
  if (t.stats) t.stats->set_output(true);
}

SdpaInputs with_softcap(Graph& g, bool mul = false) {
  SdpaInputs e;
  e.score_mod = softcap(g.scalar(Scalar::of_float(2.5), "cap"), mul);
  return e;
}

TEST(ScoreMod, BuilderMakesASubgraphAndBindsItsGraphInputs) {
  Sdpa t;
  SdpaAttrs a;
  a.is_inference = false;
  SdpaInputs e = with_softcap(t.g);
  make(t, a, e);
  ASSERT_TRUE(t.g.validate().is_ok()) << t.g.validate().to_string();
  ASSERT_EQ(t.g.nodes().size(), 1u);  // the modifier's ops are not graph nodes
  const Node& n = t.g.nodes()[0];
  const Subgraph* sg = n.subgraph("score_mod");
  ASSERT_NE(sg, nullptr);
  ASSERT_EQ(sg->nodes.size(), 3u);
  EXPECT_EQ(sg->input->dim, (std::vector<int64_t>{2, 3, 5, 7}));
  EXPECT_EQ(sg->input->data_type, DataType::Float);
  EXPECT_EQ(sg->output->dim, (std::vector<int64_t>{2, 3, 5, 7}));
  ASSERT_TRUE(n.input(Role::SCORE_MOD_IN_0));
  EXPECT_EQ(n.input(Role::SCORE_MOD_IN_0)->name, "cap");
  EXPECT_FALSE(n.input(Role::SCORE_MOD_IN_1));
  // The snapshot has its own copies of the subgraph's tensors, wired to its own graph tensors.
  const Node& c = t.g.validated()->nodes()[0];
  EXPECT_NE(c.subgraphs[0].input.get(), sg->input.get());
  EXPECT_EQ(c.subgraphs[0].nodes[0].input(Role::IN_0), c.subgraphs[0].input);
  EXPECT_EQ(c.subgraphs[0].nodes[0].input(Role::IN_1), c.input(Role::SCORE_MOD_IN_0));
}

TEST(ScoreMod, JsonRoundTripAndFingerprint) {
  Sdpa t;
  SdpaAttrs a;
  a.is_inference = false;
  make(t, a, with_softcap(t.g));
  ASSERT_TRUE(t.g.validate().is_ok());
  const std::string text = to_json(t.g);
  EXPECT_NE(text.find("\"subgraphs\""), std::string::npos);
  EXPECT_NE(text.find("\"score_mod\""), std::string::npos);
  Graph loaded;
  Status s = from_json(text, loaded);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(to_json(loaded), text);
  EXPECT_EQ(fingerprint(loaded, {true, true}), fingerprint(t.g, {true, true}));
  ASSERT_TRUE(loaded.validate().is_ok());
  EXPECT_EQ(loaded.nodes()[0].subgraphs[0].nodes.size(), 3u);

  // Another modifier (multiply for divide) or none: other fingerprints.
  Sdpa other, plain;
  make(other, a, with_softcap(other.g, /*mul=*/true));
  make(plain, a, {});
  ASSERT_TRUE(other.g.validate().is_ok());
  ASSERT_TRUE(plain.g.validate().is_ok());
  EXPECT_NE(fingerprint(other.g), fingerprint(t.g));
  EXPECT_NE(fingerprint(plain.g), fingerprint(t.g));
}

TEST(ScoreMod, BackwardSubgraphsReadWhatScoreModMade) {
  Graph g;
  auto in = [&](const char* name, std::vector<int64_t> d) {
    return make_input(g, name, std::move(d), DataType::Float);
  };
  Tensor q = in("q", {1, 2, 4, 8}), k = in("k", {1, 2, 6, 8}), v = in("v", {1, 2, 6, 8});
  Tensor o = in("o", {1, 2, 4, 8}), d_o = in("do", {1, 2, 4, 8}), st = in("st", {1, 2, 4, 1});
  Tensor cap = g.scalar(Scalar::of_float(3.0), "cap");
  Tensor saved;
  SdpaInputs e;
  e.score_mod = [&](Graph& gr, Tensor s) {
    saved = gr.binary(PointwiseMode::Div, s, cap);
    return gr.mul(gr.unary(PointwiseMode::Tanh, saved), cap);
  };
  e.score_mod_bprop = [&](Graph& gr, Tensor ds) {
    Tensor t = gr.binary(PointwiseMode::TanhBwd, gr.mul(ds, cap), saved);
    return gr.binary(PointwiseMode::Div, t, cap);
  };
  auto r = g.sdpa_backward(q, k, v, o, d_o, st, {}, e);
  for (int i = 0; i < 3; ++i) r[i]->set_output(true);
  Status s = g.validate();
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  const Node& n = g.nodes()[0];
  ASSERT_EQ(n.subgraphs.size(), 2u);
  EXPECT_EQ(n.subgraphs[1].name, "score_mod_bprop");
  EXPECT_FALSE(n.input(Role::SCORE_MOD_IN_1));  // cap is bound once
  Graph loaded;
  ASSERT_TRUE(from_json(to_json(g), loaded).is_ok());
  EXPECT_EQ(to_json(loaded), to_json(g));
  EXPECT_TRUE(loaded.validate().is_ok());
}

TEST(ScoreMod, MasksTheFrontendRefusesWithAModifier) {
  for (int which = 0; which < 4; ++which) {
    Sdpa t;
    SdpaAttrs a;
    const char* words = "";
    if (which == 0) a.causal = true, words = "the causal mask";
    if (which == 1) a.left_bound = 2, words = "diagonal_band_left_bound";
    if (which == 2) a.right_bound = 1, words = "diagonal_band_right_bound";
    if (which == 3) a.alibi_mask = a.causal = true, words = "use_alibi_mask";
    make(t, a, with_softcap(t.g));
    expect_invalid(t.g,
                   {"sdpa 'sdpa0'", "score modifier (score_mod) cannot be combined with", words,
                    "cuDNN frontend refuses"},
                   ErrorCode::NotSupported);
  }
}

TEST(ScoreMod, ClearErrorsForBadModifiers) {
  {  // not pointwise
    Sdpa t;
    SdpaInputs e;
    e.score_mod = [](Graph& g, Tensor s) {
      ReductionAttrs r;
      Tensor y = g.reduction(s, r);
      y->set_dim({2, 3, 5, 1});
      return g.add(s, y);
    };
    make(t, {}, e);
    expect_invalid(t.g, {"score_mod: node reduction", "is not pointwise"});
  }
  {  // a virtual tensor of the graph
    Sdpa t;
    Tensor x = make_input(t.g, "x", {1, 1, 5, 7}, DataType::Float);
    Tensor y = t.g.unary(PointwiseMode::Exp, x);
    SdpaInputs e;
    e.score_mod = [y](Graph& g, Tensor s) { return g.add(s, y); };
    make(t, {}, e);
    expect_invalid(t.g, {"the score modifier reads", "a virtual tensor of the graph"});
  }
  {  // more graph tensors than SCORE_MOD_IN ports
    Sdpa t;
    std::vector<Tensor> c;
    for (int i = 0; i < 9; ++i) c.push_back(t.g.scalar(Scalar::of_float(i + 1.0)));
    SdpaInputs e;
    e.score_mod = [c](Graph& g, Tensor s) {
      for (const Tensor& x : c) s = g.add(s, x);
      return s;
    };
    make(t, {}, e);
    expect_invalid(t.g, {"sdpa 'sdpa0': its score modifiers read more than 8 graph tensors",
                         "is one too many"});
  }
  {  // a result of other dims
    Sdpa t;
    Tensor row = make_input(t.g, "row", {2, 3, 5, 7, 2}, DataType::Float);
    SdpaInputs e;
    e.score_mod = [row](Graph& g, Tensor s) { return g.add(s, row); };
    make(t, {}, e);
    expect_invalid(t.g, {"rank mismatch"});
  }
  {  // returns a graph input
    Sdpa t;
    Tensor cap = t.g.scalar(Scalar::of_float(2.0), "cap");
    SdpaInputs e;
    e.score_mod = [cap](Graph& g, Tensor s) {
      g.mul(s, cap);
      return cap;
    };
    make(t, {}, e);
    expect_invalid(t.g, {"must return the score or a tensor its ops made", "'cap'"});
  }
}

TEST(ScoreMod, SubgraphsOnlyOnSdpa) {
  Graph g;
  Tensor a = make_input(g, "a", {1, 4, 4}, DataType::Float);
  Tensor c = g.matmul(a, a);
  c->set_output(true);
  Subgraph sg;
  sg.name = "score_mod";
  sg.input = sg.output = std::make_shared<TensorAttrs>();
  g.mutable_nodes()[0].subgraphs.push_back(sg);
  g.invalidate();
  expect_invalid(g, {"matmul", "only sdpa and sdpa_backward take subgraphs"});
}

}  // namespace
}  // namespace dnngraph::ir
