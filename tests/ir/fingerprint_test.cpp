// Fingerprint: stable (a value fixed across machines and two graphs built apart), sensitive to
// every attribute, blind to names unless asked, blind to dims with include_shapes=false.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "dnngraph/ir/fingerprint.hpp"
#include "dnngraph/ir/json.hpp"
#include "ir/test_util.hpp"

namespace dnngraph::ir {
namespace {

using testing::named;

// A small graph touching tensors, a scalar, a conv and a pointwise node.
Graph small_graph() {
  Graph g;
  g.set_name("small").set_io_data_type(DataType::Half);
  auto x = g.tensor(TensorAttrs()
                        .set_name("x")
                        .set_dim({1, 4, 8, 8})
                        .set_stride({256, 1, 32, 4})
                        .set_data_type(DataType::Half)
                        .set_uid(1));
  auto w = g.tensor(TensorAttrs()
                        .set_name("w")
                        .set_dim({8, 4, 3, 3})
                        .set_stride({36, 1, 12, 4})
                        .set_data_type(DataType::Half)
                        .set_uid(2));
  auto alpha = g.scalar(Scalar::of_float(0.5), "alpha");
  ConvFpropAttrs ca;
  ca.set_padding({1, 1}).set_stride({1, 1}).set_dilation({1, 1});
  auto y = g.conv_fprop(x, w, ca, named("conv"));
  auto z = g.mul(y, alpha, named("scale"));
  z->set_name("z").set_output(true).set_data_type(DataType::Half).set_uid(3);
  return g;
}

TEST(Fingerprint, HexIs32LowercaseDigitsOfHiThenLo) {
  Fingerprint f{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  EXPECT_EQ(f.hex(), "0123456789abcdeffedcba9876543210");
  EXPECT_EQ(Fingerprint{}.hex(), std::string(32, '0'));
}

// Cross-machine stability: this value only changes when the canonical encoding changes
// (then bump kEncodingVersion in src/ir/fingerprint.cpp and update it here).
TEST(Fingerprint, FixedValueForFixedGraph) {
  EXPECT_EQ(fingerprint(small_graph()).hex(), "fc2259b4542b1cbe120e7ffb63cf3516");
}

TEST(Fingerprint, SameForIndependentlyBuiltGraphs) {
  Graph a = small_graph(), b = small_graph();
  for (bool shapes : {true, false})
    for (bool names : {true, false})
      EXPECT_EQ(fingerprint(a, {shapes, names}), fingerprint(b, {shapes, names}));
}

TEST(Fingerprint, SameAfterJsonRoundTrip) {
  Graph a = small_graph(), b;
  ASSERT_TRUE(from_json(to_json(a), b).is_ok());
  EXPECT_EQ(fingerprint(a, {true, true}), fingerprint(b, {true, true}));
}

// Each mutation of the small graph must give a hash different from the original and from
// every other mutation.
TEST(Fingerprint, EveryAttributeChangesTheHash) {
  using Mut = std::function<void(Graph&)>;
  auto node = [](Graph& g, size_t i) -> Node& { return g.mutable_nodes()[i]; };
  auto conv = [&](Graph& g) -> ConvFpropAttrs& { return node(g, 0).as<ConvFpropAttrs>(); };
  auto pw = [&](Graph& g) -> PointwiseAttrs& { return node(g, 1).as<PointwiseAttrs>(); };
  auto x = [](Graph& g) { return g.find_tensor_by_name("x"); };
  auto alpha = [](Graph& g) { return g.find_tensor_by_name("alpha"); };
  const std::vector<std::pair<std::string, Mut>> muts = {
      {"graph io type", [](Graph& g) { g.set_io_data_type(DataType::BFloat16); }},
      {"graph intermediate type", [](Graph& g) { g.set_intermediate_data_type(DataType::Half); }},
      {"graph compute type", [](Graph& g) { g.set_compute_data_type(DataType::Double); }},
      {"graph dynamic shapes", [](Graph& g) { g.set_dynamic_shape_enabled(true); }},
      {"graph sm count 8", [](Graph& g) { g.set_sm_count(8); }},
      {"graph sm count 132", [](Graph& g) { g.set_sm_count(132); }},
      {"tensor dim", [&](Graph& g) { x(g)->dim[2] = 16; }},
      {"tensor stride",
       [&](Graph& g) {
         x(g)->stride = {256, 64, 8, 1};
       }},
      {"tensor rank", [&](Graph& g) { x(g)->dim.push_back(1); }},
      {"tensor data type", [&](Graph& g) { x(g)->data_type = DataType::BFloat16; }},
      {"tensor uid", [&](Graph& g) { x(g)->uid = 11; }},
      {"tensor uid assigned", [&](Graph& g) { x(g)->uid_assigned = false; }},
      {"tensor virtual", [&](Graph& g) { x(g)->is_virtual = true; }},
      {"tensor output", [&](Graph& g) { x(g)->is_output = true; }},
      {"tensor pass by value", [&](Graph& g) { x(g)->is_pass_by_value = true; }},
      {"scalar value", [&](Graph& g) { alpha(g)->value->f = 0.25; }},
      {"scalar value type", [&](Graph& g) { alpha(g)->value->type = DataType::Double; }},
      {"scalar int part", [&](Graph& g) { alpha(g)->value->i = 1; }},
      {"scalar removed", [&](Graph& g) { alpha(g)->value.reset(); }},
      {"conv pre padding",
       [&](Graph& g) {
         conv(g).pre_padding = {0, 1};
       }},
      {"conv post padding",
       [&](Graph& g) {
         conv(g).post_padding = {1, 2};
       }},
      {"conv stride",
       [&](Graph& g) {
         conv(g).stride = {2, 2};
       }},
      {"conv dilation",
       [&](Graph& g) {
         conv(g).dilation = {1, 2};
       }},
      {"conv groups", [&](Graph& g) { conv(g).group_count = 1; }},
      {"conv cross correlation", [&](Graph& g) { conv(g).cross_correlation = false; }},
      {"conv to dgrad", [&](Graph& g) { node(g, 0).attrs = ConvDgradAttrs{conv(g)}; }},
      {"node compute type", [&](Graph& g) { node(g, 0).compute_data_type = DataType::Float; }},
      {"pointwise mode", [&](Graph& g) { pw(g).mode = PointwiseMode::Add; }},
      {"relu lower clip", [&](Graph& g) { pw(g).relu_lower_clip = 0.0; }},
      {"relu upper clip", [&](Graph& g) { pw(g).relu_upper_clip = 0.0; }},
      {"relu slope", [&](Graph& g) { pw(g).relu_lower_clip_slope = 0.0; }},
      {"elu alpha", [&](Graph& g) { pw(g).elu_alpha = 0.0; }},
      {"softplus beta", [&](Graph& g) { pw(g).softplus_beta = 0.0; }},
      {"swish beta", [&](Graph& g) { pw(g).swish_beta = 0.0; }},
      {"axis", [&](Graph& g) { pw(g).axis = 0; }},
      {"input role", [&](Graph& g) { node(g, 1).inputs[1].role = Role::IN_2; }},
      {"inputs swapped",
       [&](Graph& g) { std::swap(node(g, 1).inputs[0].tensor, node(g, 1).inputs[1].tensor); }},
      {"input rewired", [&](Graph& g) { node(g, 0).inputs[1].tensor = x(g); }},
      {"extra tensor", [](Graph& g) { g.tensor(TensorAttrs().set_name("extra")); }},
      {"nodes reordered", [&](Graph& g) { std::swap(node(g, 0), node(g, 1)); }},
  };
  const Fingerprint base = fingerprint(small_graph());
  std::set<std::string> seen = {base.hex()};
  for (const auto& [what, mut] : muts) {
    Graph g = small_graph();
    mut(g);
    Fingerprint f = fingerprint(g);
    EXPECT_NE(f, base) << what;
    EXPECT_TRUE(seen.insert(f.hex()).second) << what << " collides with another mutation";
  }
}

TEST(Fingerprint, SdpaAndOtherAttributesChangeTheHash) {
  auto build = [](const std::function<void(SdpaAttrs&)>& edit) {
    Graph g;
    auto t = [&](const char* n) {
      return g.tensor(
          TensorAttrs().set_name(n).set_dim({1, 2, 16, 8}).set_stride({256, 128, 8, 1}));
    };
    SdpaAttrs a;
    edit(a);
    g.sdpa(t("q"), t("k"), t("v"), a);
    return fingerprint(g);
  };
  const std::vector<std::function<void(SdpaAttrs&)>> edits = {
      [](SdpaAttrs&) {},
      [](SdpaAttrs& a) { a.is_inference = false; },
      [](SdpaAttrs& a) { a.attn_scale = 0.5; },
      [](SdpaAttrs& a) { a.causal = true; },
      [](SdpaAttrs& a) { a.diagonal_alignment = DiagonalAlignment::BottomRight; },
      [](SdpaAttrs& a) { a.left_bound = 4; },
      [](SdpaAttrs& a) { a.right_bound = 0; },
      [](SdpaAttrs& a) { a.padding_mask = true; },
      [](SdpaAttrs& a) { a.dropout_probability = 0.1; },
      [](SdpaAttrs& a) { a.causal = true, a.alibi_mask = true; },
  };
  std::set<std::string> seen;
  for (size_t i = 0; i < edits.size(); ++i)
    EXPECT_TRUE(seen.insert(build(edits[i]).hex()).second) << i;

  auto norm = [](NormKind k, NormForwardPhase p) {
    Graph g;
    auto x = g.tensor(TensorAttrs().set_name("x").set_dim({2, 3}));
    g.add_node(Node{"n", DataType::NotSet, NormFwdAttrs{k, p}, {{Role::X, x}}, {}});
    return fingerprint(g);
  };
  EXPECT_NE(norm(NormKind::LayerNorm, NormForwardPhase::Training),
            norm(NormKind::RmsNorm, NormForwardPhase::Training));
  EXPECT_NE(norm(NormKind::LayerNorm, NormForwardPhase::Training),
            norm(NormKind::LayerNorm, NormForwardPhase::Inference));
}

TEST(Fingerprint, NamesOnlyCountWhenAsked) {
  Graph a = small_graph(), b = small_graph();
  b.set_name("other");
  b.find_tensor_by_name("x")->name = "input";
  b.mutable_nodes()[0].name = "convolution";
  EXPECT_EQ(fingerprint(a), fingerprint(b));
  FingerprintOptions with_names;
  with_names.include_names = true;
  EXPECT_NE(fingerprint(a, with_names), fingerprint(b, with_names));
  EXPECT_NE(fingerprint(a, with_names), fingerprint(a));  // the options are part of the hash
}

TEST(Fingerprint, WithoutShapesDimsAndStridesDoNotCountButRankDoes) {
  FingerprintOptions no_shapes;
  no_shapes.include_shapes = false;
  Graph a = small_graph(), b = small_graph(), c = small_graph(), d = small_graph();
  b.find_tensor_by_name("x")->set_dim({7, 4, 31, 9}).set_stride({1116, 1, 36, 4});
  b.find_tensor_by_name("w")->dim[0] = 16;
  EXPECT_EQ(fingerprint(a, no_shapes), fingerprint(b, no_shapes));
  EXPECT_NE(fingerprint(a), fingerprint(b));
  c.find_tensor_by_name("x")->set_dim({1, 4, 8, 8, 1});
  EXPECT_NE(fingerprint(a, no_shapes), fingerprint(c, no_shapes));
  d.find_tensor_by_name("x")->data_type = DataType::Float;  // not a shape: still counts
  EXPECT_NE(fingerprint(a, no_shapes), fingerprint(d, no_shapes));
}

}  // namespace
}  // namespace dnngraph::ir
