// Validation of extents (element counts and byte spans that would wrap int64) and of
// attribute values (NaN, infinities, negative or out-of-range numbers, enum values that name
// nothing): each is refused by Graph::validate() with the tensor or attribute named, whether
// the graph comes from the builder, a JSON description or a serialized built graph. Also the
// ValidatedGraph contract: engines get an immutable snapshot that only validate() makes.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "dnngraph/graph.hpp"
#include "dnngraph/ir/json.hpp"
#include "ir/test_util.hpp"

namespace dnngraph::ir {
namespace {

using testing::expect_invalid;
using testing::make_input;
using testing::named;

constexpr int64_t kBig = int64_t{1} << 62;

// ---------------------------------------------------------------- extents
TEST(Extents, StridesNear2To62WrapTheByteSpan) {
  Graph g;
  // (3-1) * 2^62 elements of 2 bytes: far beyond int64 bytes.
  Tensor x = make_input(g, "huge", {3, 4}, DataType::Half, {kBig, 1});
  g.relu(x, named("r"))->set_output(true);
  expect_invalid(g, {"tensor 'huge'", "strides [4611686018427387904,1]", "overflows int64 bytes"});
}

TEST(Extents, ElementCountBeyondInt64) {
  Graph g;
  Tensor x = make_input(g, "wide", {int64_t{1} << 32, int64_t{1} << 32}, DataType::Float);
  g.relu(x, named("r"))->set_output(true);
  expect_invalid(g, {"tensor 'wide'", "[4294967296,4294967296]", "element count overflows"});
}

TEST(Extents, BytesJustBeyondInt64) {
  // 2^61 elements fit int64, their 8 bytes each do not.
  Graph g;
  Tensor x = make_input(g, "d", {int64_t{1} << 61}, DataType::Double);
  g.relu(x, named("r"))->set_output(true);
  expect_invalid(g, {"tensor 'd'", "DOUBLE", "overflows int64 bytes"});
}

TEST(Extents, WrappedProductOfOneIsNotAScalar) {
  // 274177 * 67280421310721 = 2^64 + 1: a wrapping product would read as one element.
  Graph g;
  Tensor x = make_input(g, "x", {2, 3}, DataType::Float);
  TensorAttrs s;
  s.set_name("alpha").set_value(Scalar::of_float(2.0)).set_dim({274177, 67280421310721});
  s.set_stride({67280421310721, 1});
  Tensor alpha = g.tensor(s);
  g.mul(x, alpha, named("m"))->set_output(true);
  expect_invalid(g, {"pass-by-value tensor 'alpha'", "must hold one element"});
}

TEST(Extents, NegativeDimsAndStrides) {
  {
    Graph g;
    g.relu(make_input(g, "neg", {-1, -1}, DataType::Float), named("r"))->set_output(true);
    expect_invalid(g, {"tensor 'neg'", "dim 0 is -1"});
  }
  {
    Graph g;
    g.relu(make_input(g, "negs", {2, 2}, DataType::Float, {-2, 1}), named("r"))->set_output(true);
    expect_invalid(g, {"tensor 'negs'", "stride 0 is -2"});
  }
}

TEST(Extents, InferredOutputThatWouldOverflow) {
  // Each input fits; the broadcast output [2^40, 2^40] does not.
  Graph g;
  Tensor a = make_input(g, "a", {int64_t{1} << 40, 1}, DataType::Float);
  Tensor b = make_input(g, "b", {1, int64_t{1} << 40}, DataType::Float);
  g.add(a, b, named("sum"))->set_output(true).set_name("y");
  expect_invalid(g, {"tensor 'y'", "output OUT_0 of pointwise 'sum'", "element count overflows"});
}

TEST(Extents, ConvPaddingThatWouldOverflow) {
  Graph g;
  Tensor x = make_input(g, "x", {1, 4, 8, 8});
  Tensor w = make_input(g, "w", {4, 4, 3, 3});
  ConvFpropAttrs a;
  a.set_pre_padding({std::numeric_limits<int64_t>::max(), 0}).set_post_padding({1, 0});
  g.conv_fprop(x, w, a, named("conv"))->set_output(true);
  expect_invalid(g, {"conv_fprop 'conv'", "spatial dim 0", "overflow int64"});
}

// The same tensor from a JSON description: loading succeeds (it is well-formed JSON), validate
// refuses it, as `dnngraph validate` does.
TEST(Extents, FromJsonDescription) {
  Graph src;
  src.set_name("tampered").set_io_data_type(DataType::Float);
  Tensor x = make_input(src, "x", {3, 4}, DataType::Float, {4, 1});
  src.relu(x, named("r"))->set_output(true);
  std::string text = to_json(src, -1);
  const size_t at = text.find("[4,1]");
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, 5, "[4611686018427387904,1]");
  Graph g;
  Status s = from_json(text, g);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  expect_invalid(g, {"tensor 'x'", "overflows int64 bytes"});
}

// A built graph's bytes whose description was edited: deserialize validates it again.
TEST(Extents, TamperedSerializedGraph) {
  dnngraph::Graph g;
  g.set_name("ser").set_io_data_type(DataType::Float);
  Tensor x = make_input(g, "x", {3, 4}, DataType::Float);
  g.relu(x, named("r"))->set_output(true).set_name("y");
  auto h = Handle::create(Device::cpu());
  ASSERT_TRUE(h.is_ok());
  ASSERT_TRUE(g.build(*h).is_ok());
  auto bytes = g.serialize();
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  std::string blob = *bytes;
  // The graph is embedded as a JSON string: x's strides [4,1] appear escaped inside it.
  const std::string from = "[4,1]", to = "[4611686018427387904,1]";
  const size_t at = blob.find(from);
  ASSERT_NE(at, std::string::npos) << blob;
  blob.replace(at, from.size(), to);
  dnngraph::Graph back;
  Status s = back.deserialize(*h, blob);
  EXPECT_EQ(s.code(), ErrorCode::InvalidGraph) << s.to_string();
  EXPECT_NE(s.message().find("overflows int64 bytes"), std::string::npos) << s.message();
}

// ---------------------------------------------------------------- attributes
Graph& layernorm_with_epsilon(Graph& g, double eps) {
  Tensor x = make_input(g, "x", {2, 8}, DataType::Float);
  Tensor scale = make_input(g, "gamma", {1, 8}, DataType::Float);
  Tensor bias = make_input(g, "beta", {1, 8}, DataType::Float);
  auto out = g.layernorm(x, scale, bias, g.scalar(Scalar::of_float(eps), "eps"),
                         NormForwardPhase::Training, named("ln"));
  out[0]->set_output(true);
  return g;
}

TEST(Attributes, NormEpsilonNanInfNegative) {
  for (double eps : {std::nan(""), HUGE_VAL, -HUGE_VAL, -1e-5}) {
    SCOPED_TRACE(eps);
    Graph g;
    expect_invalid(layernorm_with_epsilon(g, eps),
                   {"norm_forward 'ln'", "EPSILON 'eps'", "expected a finite value >= 0"});
  }
  Graph ok;
  EXPECT_TRUE(layernorm_with_epsilon(ok, 0.0).validate().is_ok());
}

TEST(Attributes, BatchnormMomentumOutOfRange) {
  for (double m : {std::nan(""), -0.1, 1.5}) {
    SCOPED_TRACE(m);
    Graph g;
    Tensor x = make_input(g, "x", {2, 3, 4, 4}, DataType::Float);
    auto p = [&](const char* n) { return make_input(g, n, {1, 3, 1, 1}, DataType::Float); };
    auto out = g.batchnorm(x, p("gamma"), p("beta"), p("rm"), p("rv"),
                           g.scalar(Scalar::of_float(1e-5), "eps"),
                           g.scalar(Scalar::of_float(m), "momentum"), named("bn"));
    out[0]->set_output(true);
    expect_invalid(g, {"norm_forward 'bn'", "MOMENTUM 'momentum'", "[0, 1]"});
  }
}

TEST(Attributes, ConvNegativePaddingStrideDilation) {
  struct Case {
    const char* field;
    ConvFpropAttrs attrs;
  };
  Case cases[] = {{"pre_padding", ConvFpropAttrs().set_pre_padding({-1, 0})},
                  {"post_padding", ConvFpropAttrs().set_post_padding({0, -2})},
                  {"stride", ConvFpropAttrs().set_stride({0, 1})},
                  {"dilation", ConvFpropAttrs().set_dilation({1, -1})}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.field);
    Graph g;
    Tensor x = make_input(g, "x", {1, 4, 8, 8});
    Tensor w = make_input(g, "w", {4, 4, 3, 3});
    g.conv_fprop(x, w, c.attrs, named("conv"))->set_output(true);
    expect_invalid(g, {"conv_fprop 'conv'", c.field, "below"});
  }
}

struct SdpaGraph {
  Graph g;
  Tensor q, k, v;
  SdpaGraph() {
    q = make_input(g, "q", {1, 2, 4, 8});
    k = make_input(g, "k", {1, 2, 4, 8});
    v = make_input(g, "v", {1, 2, 4, 8});
  }
  Graph& with(SdpaAttrs a, SdpaInputs in = {}) {
    if (a.dropout_probability && *a.dropout_probability > 0.0) {
      in.seed = g.scalar(Scalar::of_int(1), "seed");
      in.offset = g.scalar(Scalar::of_int(2), "offset");
    }
    g.sdpa(q, k, v, a, in, named("attn"))[0]->set_output(true);
    return g;
  }
};

TEST(Attributes, SdpaDropoutProbabilityOutsideZeroOne) {
  for (double p : {1.0, 1.5, -0.1, std::nan("")}) {
    SCOPED_TRACE(p);
    SdpaGraph s;
    SdpaAttrs a;
    a.dropout_probability = p;
    expect_invalid(s.with(a), {"sdpa 'attn'", "dropout_probability", "outside [0, 1)"});
  }
}

TEST(Attributes, SdpaScaleNotFinite) {
  for (double v : {std::nan(""), HUGE_VAL}) {
    SCOPED_TRACE(v);
    SdpaGraph a;
    SdpaAttrs attrs;
    attrs.attn_scale = v;
    expect_invalid(a.with(attrs), {"sdpa 'attn'", "attn_scale", "not finite"});
    SdpaGraph b;
    SdpaInputs in;
    in.attn_scale = b.g.scalar(Scalar::of_float(v), "scale");
    expect_invalid(b.with(SdpaAttrs{}, in), {"sdpa 'attn'", "ATTN_SCALE 'scale'", "finite"});
  }
}

TEST(Attributes, SdpaNegativeBoundsAndUnknownAlignment) {
  {
    SdpaGraph s;
    SdpaAttrs a;
    a.left_bound = -3;
    expect_invalid(s.with(a), {"sdpa 'attn'", "left_bound -3", "window length"});
  }
  {
    SdpaGraph s;
    SdpaAttrs a;
    a.left_bound = 0;  // the frontend's window length: at least one key
    expect_invalid(s.with(a), {"sdpa 'attn'", "left_bound 0", "at least 1"});
  }
  {
    SdpaGraph s;
    SdpaAttrs a;
    a.diagonal_alignment = static_cast<DiagonalAlignment>(7);
    expect_invalid(s.with(a), {"sdpa 'attn'", "diagonal_alignment 7"});
  }
}

TEST(Attributes, PointwiseFactorsAndMode) {
  auto attempt = [](PointwiseAttrs a, std::vector<std::string> parts) {
    Graph g;
    Tensor x = make_input(g, "x", {2, 3}, DataType::Float);
    g.pointwise(x, a, named("pw"))->set_output(true);
    expect_invalid(g, parts);
  };
  PointwiseAttrs elu = Graph::pointwise_attrs(PointwiseMode::Elu);
  elu.elu_alpha = HUGE_VAL;
  attempt(elu, {"pointwise 'pw'", "elu_alpha", "finite"});
  PointwiseAttrs sp = Graph::pointwise_attrs(PointwiseMode::Softplus);
  sp.softplus_beta = 0.0;
  attempt(sp, {"pointwise 'pw'", "softplus_beta is 0"});
  PointwiseAttrs relu = Graph::pointwise_attrs(PointwiseMode::Relu);
  relu.relu_lower_clip = std::nan("");
  attempt(relu, {"pointwise 'pw'", "relu_lower_clip is NaN"});
  attempt(Graph::pointwise_attrs(static_cast<PointwiseMode>(kPointwiseModeCount + 3)),
          {"pointwise 'pw'", "is not a pointwise mode"});
}

TEST(Attributes, ReductionAndNormEnums) {
  {
    Graph g;
    ReductionAttrs a;
    a.mode = static_cast<ReductionMode>(-1);
    g.reduction(make_input(g, "x", {2, 3}, DataType::Float), a, named("red"))->set_output(true);
    expect_invalid(g, {"reduction 'red'", "mode -1", "not a reduction mode"});
  }
  {
    Graph g;
    Tensor x = make_input(g, "x", {2, 8}, DataType::Float);
    Tensor s = make_input(g, "gamma", {1, 8}, DataType::Float);
    auto out = g.rmsnorm(x, s, nullptr, g.scalar(Scalar::of_float(1e-5), "eps"),
                         static_cast<NormForwardPhase>(5), named("rms"));
    out[0]->set_output(true);
    expect_invalid(g, {"norm_forward 'rms'", "phase 5"});
  }
}

// ---------------------------------------------------------------- the validated snapshot
TEST(ValidatedGraph, OnlyValidateMakesItAndEditsDoNotReachIt) {
  Graph g;
  Tensor x = make_input(g, "x", {2, 3}, DataType::Float);
  Tensor y = g.relu(x, named("r"));
  y->set_output(true);
  EXPECT_EQ(g.validated(), nullptr);
  ASSERT_TRUE(g.validate().is_ok());
  ValidatedGraphPtr v = g.validated();
  ASSERT_NE(v, nullptr);
  ASSERT_EQ(v->nodes().size(), 1u);
  Tensor vx = v->find_tensor_by_uid(x->uid);
  ASSERT_NE(vx, nullptr);
  EXPECT_NE(vx.get(), x.get());  // a private copy
  EXPECT_EQ(v->nodes()[0].input(Role::IN_0), vx);
  x->set_dim({5, 5});  // an edit after validate
  EXPECT_EQ(vx->dim, (std::vector<int64_t>{2, 3}));
  g.relu(y, named("r2"));  // a builder call: the graph must be validated again
  EXPECT_EQ(g.validated(), nullptr);
}

}  // namespace
}  // namespace dnngraph::ir
