// JSON description: exact round trips (seed graphs, every op family, odd values), sharing of
// tensors after load, the files in tests/data, and rejection of malformed descriptions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "dnngraph/ir/dot.hpp"
#include "dnngraph/ir/fingerprint.hpp"
#include "dnngraph/ir/json.hpp"
#include "ir/test_util.hpp"

namespace dnngraph::ir {
namespace {

using testing::named;

// ----------------------------------------------------------------------------- seed graphs

// conv (NHWC bf16, pad 1) -> bias -> relu.
Graph conv_bias_relu() {
  Graph g;
  g.set_name("conv_bias_relu")
      .set_io_data_type(DataType::BFloat16)
      .set_intermediate_data_type(DataType::Float)
      .set_compute_data_type(DataType::Float);
  const std::vector<int64_t> nhwc = {0, 2, 3, 1};
  auto x = g.tensor(TensorAttrs()
                        .set_name("X")
                        .set_dim({8, 64, 56, 56})
                        .set_stride(packed_strides({8, 64, 56, 56}, nhwc))
                        .set_data_type(DataType::BFloat16));
  auto w = g.tensor(TensorAttrs()
                        .set_name("W")
                        .set_dim({128, 64, 3, 3})
                        .set_stride(packed_strides({128, 64, 3, 3}, nhwc))
                        .set_data_type(DataType::BFloat16));
  auto b = g.tensor(TensorAttrs()
                        .set_name("B")
                        .set_dim({1, 128, 1, 1})
                        .set_stride({128, 1, 128, 128})
                        .set_data_type(DataType::BFloat16));
  ConvFpropAttrs ca;
  ca.set_padding({1, 1}).set_stride({1, 1}).set_dilation({1, 1});
  auto c = g.conv_fprop(x, w, ca, {"conv", DataType::Float});
  auto cb = g.bias(c, b, named("bias"));
  auto y = g.relu(cb, named("relu"));
  y->set_name("Y").set_output(true).set_data_type(DataType::BFloat16);
  return g;
}

// matmul -> mul(alpha, pass by value) -> bias -> gelu, plus an AMAX reduction of the result.
Graph matmul_epilogue() {
  Graph g;
  g.set_name("matmul_epilogue")
      .set_io_data_type(DataType::BFloat16)
      .set_compute_data_type(DataType::Float);
  auto a = g.tensor(TensorAttrs().set_name("A").set_dim({4, 128, 64}).set_stride({8192, 64, 1}));
  auto b = g.tensor(TensorAttrs().set_name("B").set_dim({4, 64, 256}).set_stride({16384, 256, 1}));
  a->set_data_type(DataType::BFloat16);
  b->set_data_type(DataType::BFloat16);
  auto alpha = g.scalar(Scalar::of_float(0.5), "alpha");
  auto bias = g.tensor(TensorAttrs()
                           .set_name("bias")
                           .set_dim({1, 1, 256})
                           .set_stride({256, 256, 1})
                           .set_data_type(DataType::BFloat16)
                           .set_uid(7));
  auto c = g.matmul(a, b, {}, named("mm"));
  auto scaled = g.mul(c, alpha, named("scale"));
  auto biased = g.bias(scaled, bias, named("add_bias"));
  auto y = g.gelu(biased, named("gelu"));
  y->set_name("Y").set_output(true).set_data_type(DataType::BFloat16);
  auto amax = g.reduction(y, {ReductionMode::Amax}, named("amax"));
  amax->set_name("amax").set_output(true).set_dim({1, 1, 1}).set_data_type(DataType::Float);
  return g;
}

// Causal SDPA, training (emits STATS), with a pass-by-value attention scale.
Graph sdpa_causal() {
  Graph g;
  g.set_name("sdpa_causal").set_io_data_type(DataType::Half);
  auto make = [&](const char* name) {
    return g.tensor(TensorAttrs()
                        .set_name(name)
                        .set_dim({2, 8, 128, 64})
                        .set_stride({65536, 64, 512, 1})  // [b, s, h, d] in memory
                        .set_data_type(DataType::Half));
  };
  auto q = make("Q"), k = make("K"), v = make("V");
  SdpaAttrs attrs;
  attrs.is_inference = false;
  attrs.causal = true;
  SdpaInputs extra;
  extra.attn_scale = g.scalar(Scalar::of_float(0.125), "attn_scale");
  auto [o, stats] = g.sdpa(q, k, v, attrs, extra, named("sdpa"));
  o->set_name("O").set_output(true).set_data_type(DataType::Half);
  stats->set_name("Stats").set_output(true).set_data_type(DataType::Float);
  return g;
}

// One node of every family with every attribute away from its default.
Graph every_family() {
  Graph g;
  g.set_name("every family").set_dynamic_shape_enabled(true);
  auto t = [&](const char* name) {
    return g.tensor(TensorAttrs().set_name(name).set_dim({2, 4, 8, 8}).set_stride({256, 64, 8, 1}));
  };
  ConvDgradAttrs dg;
  dg.set_pre_padding({1, 2}).set_post_padding({0, 3}).set_stride({2, 2}).set_dilation({1, 2});
  dg.set_group_count(2);
  dg.cross_correlation = false;
  g.conv_dgrad(t("dy"), t("w"), dg, {"dgrad", DataType::Double});
  ConvWgradAttrs wg;
  wg.set_padding({0, 0, 0}).set_stride({1, 1, 1}).set_dilation({1, 1, 1});
  g.conv_wgrad(t("dy3"), t("x3"), wg);
  ConvFpropAttrs fp;
  fp.set_padding({0, 0}).set_stride({1, 1}).set_dilation({1, 1});
  g.conv_fprop(t("cx"), t("cw"), fp);
  g.matmul(t("ma"), t("mb"), MatmulAttrs{0.25});
  PointwiseAttrs pw;
  pw.mode = PointwiseMode::Relu;
  pw.relu_lower_clip = -1.5;
  pw.relu_upper_clip = 6.0;
  pw.relu_lower_clip_slope = 0.01;
  pw.elu_alpha = 1.25;
  pw.softplus_beta = 2.0;
  pw.swish_beta = 1.5;
  pw.axis = 3;
  g.pointwise(t("p0"), pw);
  g.pointwise(t("s0"), t("s1"), t("s2"), Graph::pointwise_attrs(PointwiseMode::BinarySelect));
  g.reduction(t("r"), {ReductionMode::Norm2});
  auto eps = g.scalar(Scalar::of_float(1e-5), "eps");
  g.layernorm(t("lx"), t("ls"), t("lb"), eps, NormForwardPhase::Training);
  g.rmsnorm(t("rx"), t("rs"), nullptr, eps, NormForwardPhase::Inference);
  g.batchnorm(t("bx"), t("bs"), t("bb"), t("rm"), t("rv"), eps,
              g.scalar(Scalar::of_float(0.1), "momentum"));
  g.batchnorm_inference(t("ix"), t("im"), t("iv"), t("is"), t("ib"));
  g.layernorm_backward(t("ldy"), t("lx2"), t("ls2"), t("lm"), t("liv"));
  g.rmsnorm_backward(t("rdy"), t("rx2"), t("rs2"), t("riv"), true);
  g.softmax(t("sx"), true);
  SdpaAttrs sa;
  sa.attn_scale = 0.3;
  sa.diagonal_alignment = DiagonalAlignment::BottomRight;
  sa.left_bound = 16;
  sa.right_bound = 0;
  sa.dropout_probability = 0.1;
  SdpaInputs extra;
  extra.bias = t("bias");
  extra.seq_len_q = t("slq");
  extra.seq_len_kv = t("slkv");
  extra.seed = g.scalar(Scalar::of_int(1234), "seed");
  extra.offset = g.scalar(Scalar::of_int(-5, DataType::Int32), "offset");
  g.sdpa(t("q"), t("k"), t("v"), sa, extra);
  SdpaBwdAttrs sb;
  sb.causal = true;
  sb.alibi_mask = true;
  SdpaInputs bwd_extra;
  bwd_extra.bias = t("bbias");
  g.sdpa_backward(t("bq"), t("bk"), t("bv"), t("bo"), t("bdo"), t("bstats"), sb, bwd_extra);
  return g;
}

// ----------------------------------------------------------------------------- helpers

void expect_same_tensor(const TensorAttrs& a, const TensorAttrs& b) {
  SCOPED_TRACE("tensor '" + a.name + "'");
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.dim, b.dim);
  EXPECT_EQ(a.stride, b.stride);
  EXPECT_EQ(a.data_type, b.data_type);
  EXPECT_EQ(a.uid, b.uid);
  EXPECT_EQ(a.uid_assigned, b.uid_assigned);
  EXPECT_EQ(a.is_virtual, b.is_virtual);
  EXPECT_EQ(a.is_output, b.is_output);
  EXPECT_EQ(a.is_pass_by_value, b.is_pass_by_value);
  ASSERT_EQ(a.value.has_value(), b.value.has_value());
  if (a.value) {
    EXPECT_EQ(a.value->type, b.value->type);
    EXPECT_EQ(a.value->i, b.value->i);
    if (std::isnan(a.value->f))
      EXPECT_TRUE(std::isnan(b.value->f));
    else
      EXPECT_EQ(a.value->f, b.value->f);  // exact, bit for bit (0.0 == -0.0 aside)
  }
}

size_t index_of(const Graph& g, const Tensor& t) {
  for (size_t i = 0; i < g.tensors().size(); ++i)
    if (g.tensors()[i] == t) return i;
  return static_cast<size_t>(-1);
}

// Field by field, and the wiring by tensor identity (index in tensors()).
void expect_same_graph(const Graph& a, const Graph& b) {
  EXPECT_EQ(a.name(), b.name());
  EXPECT_EQ(a.io_data_type(), b.io_data_type());
  EXPECT_EQ(a.intermediate_data_type(), b.intermediate_data_type());
  EXPECT_EQ(a.compute_data_type(), b.compute_data_type());
  EXPECT_EQ(a.dynamic_shape_enabled(), b.dynamic_shape_enabled());
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (size_t i = 0; i < a.tensors().size(); ++i)
    expect_same_tensor(*a.tensors()[i], *b.tensors()[i]);
  ASSERT_EQ(a.nodes().size(), b.nodes().size());
  for (size_t i = 0; i < a.nodes().size(); ++i) {
    const Node &na = a.nodes()[i], &nb = b.nodes()[i];
    SCOPED_TRACE("node '" + na.name + "'");
    EXPECT_EQ(na.name, nb.name);
    EXPECT_EQ(na.kind(), nb.kind());
    EXPECT_EQ(na.compute_data_type, nb.compute_data_type);
    EXPECT_TRUE(na.attrs == nb.attrs);
    for (auto [pa, pb] : {std::pair{&na.inputs, &nb.inputs}, std::pair{&na.outputs, &nb.outputs}}) {
      ASSERT_EQ(pa->size(), pb->size());
      for (size_t k = 0; k < pa->size(); ++k) {
        EXPECT_EQ((*pa)[k].role, (*pb)[k].role);
        EXPECT_EQ(index_of(a, (*pa)[k].tensor), index_of(b, (*pb)[k].tensor)) << (*pa)[k].role;
      }
    }
  }
}

void expect_exact_round_trip(const Graph& g) {
  const std::string text = to_json(g);
  Graph loaded;
  Status s = from_json(text, loaded);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  expect_same_graph(g, loaded);
  EXPECT_EQ(to_json(loaded), text);
  EXPECT_EQ(to_json(loaded, -1), to_json(g, -1));
  EXPECT_EQ(fingerprint(loaded, {true, true}), fingerprint(g, {true, true}));
}

std::filesystem::path data_dir() {
  if (const char* env = std::getenv("DNNGRAPH_TEST_DATA")) return env;
  return DNNGRAPH_TEST_DATA_DIR;
}

std::string read_data(const std::string& name) {
  std::ifstream in(data_dir() / name, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing test file " << (data_dir() / name);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// ----------------------------------------------------------------------------- round trips

TEST(Json, RoundTripConvBiasRelu) { expect_exact_round_trip(conv_bias_relu()); }
TEST(Json, RoundTripMatmulEpilogue) { expect_exact_round_trip(matmul_epilogue()); }
TEST(Json, RoundTripSdpaCausal) { expect_exact_round_trip(sdpa_causal()); }
TEST(Json, RoundTripEveryOpFamily) {
  Graph g = every_family();
  // Every family is present.
  std::vector<bool> seen(static_cast<size_t>(OpKind::SdpaBwd) + 1, false);
  for (const Node& n : g.nodes()) seen[static_cast<size_t>(n.kind())] = true;
  for (size_t k = 0; k < seen.size(); ++k) EXPECT_TRUE(seen[k]) << op_kind_name(OpKind(k));
  expect_exact_round_trip(g);
}

TEST(Json, RoundTripOddValues) {
  Graph g;
  g.set_name("odd \"name\"\n\twith\\escapes and \xc3\xa9");
  g.scalar(Scalar::of_float(std::numeric_limits<double>::quiet_NaN()), "nan");
  g.scalar(Scalar::of_float(std::numeric_limits<double>::infinity()), "inf");
  g.scalar(Scalar::of_float(-std::numeric_limits<double>::infinity()), "-inf");
  g.scalar(Scalar::of_float(0.1 + 0.2, DataType::Double), "not exactly 0.3");
  g.scalar(Scalar::of_float(std::numeric_limits<double>::denorm_min()), "denormal");
  g.scalar(Scalar::of_float(-0.0), "negative zero");
  g.scalar(Scalar::of_int(std::numeric_limits<int64_t>::min()), "int min");
  g.scalar(Scalar::of_int(std::numeric_limits<int64_t>::max()), "int max");
  g.scalar(Scalar::of_int(1, DataType::Boolean), "flag");
  auto t = g.tensor(TensorAttrs().set_dim({}).set_uid(std::numeric_limits<int64_t>::max()));
  t->name.clear();  // an unnamed tensor stays unnamed
  g.tensor(TensorAttrs().set_name("big").set_dim({1LL << 40, 3}).set_stride({3, 1}));
  PointwiseAttrs pw = Graph::pointwise_attrs(PointwiseMode::Elu);
  pw.elu_alpha = -std::numeric_limits<double>::infinity();  // NaN would defeat attrs ==
  g.pointwise(g.tensors()[0], pw, named("weird pw"));
  expect_exact_round_trip(g);

  Graph loaded;
  ASSERT_TRUE(from_json(to_json(g), loaded).is_ok());
  EXPECT_EQ(loaded.find_tensor_by_name("negative zero")->value->f, 0.0);
  EXPECT_TRUE(std::signbit(loaded.find_tensor_by_name("negative zero")->value->f));
  EXPECT_EQ(loaded.tensors()[9]->name, "");
}

// What validate() inferred (dims, strides, types, uids) is part of the description too.
TEST(Json, RoundTripAfterValidate) {
  for (Graph (*build)() : {conv_bias_relu, matmul_epilogue, sdpa_causal}) {
    Graph g = build();
    Status s = g.validate();
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    SCOPED_TRACE(g.name());
    expect_exact_round_trip(g);
    Graph loaded;
    ASSERT_TRUE(from_json(to_json(g), loaded).is_ok());
    // The loaded copy validates to the same description: nothing was lost.
    s = loaded.validate();
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_EQ(to_json(loaded), to_json(g));
  }
}

TEST(Json, TensorsAreSharedAfterLoad) {
  Graph loaded;
  ASSERT_TRUE(from_json(to_json(conv_bias_relu()), loaded).is_ok());
  ASSERT_EQ(loaded.nodes().size(), 3u);
  const Node &conv = loaded.nodes()[0], &bias = loaded.nodes()[1], &relu = loaded.nodes()[2];
  // The conv output is the very object the bias node reads, and so on down the chain.
  EXPECT_EQ(conv.output(Role::Y).get(), bias.input(Role::IN_0).get());
  EXPECT_EQ(bias.output(Role::OUT_0).get(), relu.input(Role::IN_0).get());
  EXPECT_EQ(conv.input(Role::X).get(), loaded.find_tensor_by_name("X").get());
  // Editing through one reference is seen through the other.
  conv.output(Role::Y)->set_dim({8, 128, 56, 56});
  EXPECT_EQ(bias.input(Role::IN_0)->dim, (std::vector<int64_t>{8, 128, 56, 56}));
  // No extra copies of tensors were made.
  EXPECT_EQ(loaded.tensors().size(), conv_bias_relu().tensors().size());
}

TEST(Json, FromJsonReplacesTheTargetOnlyOnSuccess) {
  Graph g = sdpa_causal();
  const std::string before = to_json(g);
  EXPECT_FALSE(from_json("{\"dnngraph_version\": 1, \"tensors\": 3, \"nodes\": []}", g).is_ok());
  EXPECT_EQ(to_json(g), before);
  ASSERT_TRUE(from_json(to_json(conv_bias_relu()), g).is_ok());
  EXPECT_EQ(g.name(), "conv_bias_relu");
}

// The files in tests/data are descriptions of the seed graphs; they must keep loading.
TEST(Json, DataFilesMatchSeedGraphs) {
  struct Case {
    const char* file;
    Graph (*build)();
  };
  for (const Case& c :
       {Case{"conv_bias_relu.json", conv_bias_relu}, Case{"matmul_epilogue.json", matmul_epilogue},
        Case{"sdpa_causal.json", sdpa_causal}}) {
    SCOPED_TRACE(c.file);
    Graph loaded;
    Status s = from_json(read_data(c.file), loaded);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    Graph built = c.build();
    expect_same_graph(built, loaded);
    EXPECT_EQ(to_json(loaded), to_json(built));
  }
}

// Hand-written descriptions may leave fields out and refer to tensors by name.
TEST(Json, ShortHandWrittenForm) {
  const char* text = R"({
    "dnngraph_version": 1,
    "tensors": [
      {"name": "x", "dim": [2, 3], "stride": [3, 1], "data_type": "FLOAT"},
      {"name": "alpha", "value": {"data_type": "FLOAT", "float": 2.5}},
      {"name": "y", "uid": 42, "output": true}
    ],
    "nodes": [
      {"kind": "pointwise", "attrs": {"mode": "MUL"},
       "inputs": {"IN_0": "x", "IN_1": "alpha"}, "outputs": {"OUT_0": 2}}
    ]
  })";
  Graph g;
  Status s = from_json(text, g);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  ASSERT_EQ(g.nodes().size(), 1u);
  const Node& n = g.nodes()[0];
  EXPECT_EQ(n.name, "pointwise0");
  EXPECT_EQ(n.as<PointwiseAttrs>().mode, PointwiseMode::Mul);
  EXPECT_EQ(n.input(Role::IN_1)->value->f, 2.5);
  EXPECT_TRUE(n.input(Role::IN_1)->is_pass_by_value);
  EXPECT_EQ(n.input(Role::IN_1)->dim, (std::vector<int64_t>{1}));
  EXPECT_EQ(n.input(Role::IN_1)->data_type, DataType::Float);
  EXPECT_EQ(n.output(Role::OUT_0)->uid, 42);
  EXPECT_TRUE(n.output(Role::OUT_0)->uid_assigned);
  EXPECT_TRUE(n.output(Role::OUT_0)->is_output);
  EXPECT_EQ(g.intermediate_data_type(), Graph().intermediate_data_type());
  // The input order is the written order.
  EXPECT_EQ(n.inputs[0].role, Role::IN_0);
  EXPECT_EQ(n.inputs[1].role, Role::IN_1);
}

// ----------------------------------------------------------------------------- DOT

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(Dot, ShapesStylesEdgesAndEscaping) {
  Graph g = matmul_epilogue();
  g.set_name("say \"hi\"\\");
  const std::string dot = to_dot(g);
  EXPECT_EQ(dot.rfind("digraph \"say \\\"hi\\\"\\\\\" {\n", 0), 0u) << dot;
  EXPECT_EQ(dot.substr(dot.size() - 2), "}\n");
  EXPECT_EQ(count(dot, "shape=ellipse"), g.tensors().size());
  EXPECT_EQ(count(dot, "shape=box"), g.nodes().size());
  // mm::C, scale::OUT_0, add_bias::OUT_0 are virtual.
  EXPECT_EQ(count(dot, "style=\"dashed"), 3u);
  EXPECT_EQ(count(dot, "peripheries=2"), 2u);  // Y and amax are outputs
  size_t edges = 0;
  for (const Node& n : g.nodes()) edges += n.inputs.size() + n.outputs.size();
  EXPECT_EQ(count(dot, " -> "), edges);
  EXPECT_NE(dot.find("t0 -> n0 [label=\"A\"]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n0 -> t4 [label=\"C\"]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("label=\"reduction 'amax'\\nmode=AMAX"), std::string::npos) << dot;
  EXPECT_NE(dot.find("label=\"alpha\\n[1] FLOAT\\n= 0.5"), std::string::npos) << dot;
  // Every quote inside a label is escaped: quotes pair up on every line.
  std::istringstream lines(dot);
  for (std::string line; std::getline(lines, line);) {
    size_t quotes = 0;
    for (size_t i = 0; i < line.size(); ++i)
      if (line[i] == '"' && (i == 0 || line[i - 1] != '\\' || (i >= 2 && line[i - 2] == '\\')))
        ++quotes;
    EXPECT_EQ(quotes % 2, 0u) << line;
  }
}

TEST(Dot, ConvAttributesShown) {
  const std::string dot = to_dot(conv_bias_relu());
  EXPECT_NE(dot.find("conv_fprop 'conv'\\npre_padding=[1,1] post_padding=[1,1] stride=[1,1] "
                     "dilation=[1,1]"),
            std::string::npos)
      << dot;
  EXPECT_NE(dot.find("pointwise 'relu'\\nmode=RELU"), std::string::npos) << dot;
}

// The example in docs/json-format.md loads, with names and indices both resolving.
TEST(Json, DocumentedExampleLoads) {
  std::ifstream in(data_dir().parent_path().parent_path() / "docs" / "json-format.md");
  ASSERT_TRUE(in.good());
  std::ostringstream os;
  os << in.rdbuf();
  const std::string md = os.str();
  const size_t begin = md.find("```json\n"), end = md.find("```", begin + 8);
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  Graph g;
  Status s = from_json(md.substr(begin + 8, end - begin - 8), g);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  ASSERT_EQ(g.nodes().size(), 2u);
  EXPECT_EQ(g.nodes()[0].output(Role::OUT_0), g.nodes()[1].input(Role::IN_0));
  EXPECT_EQ(g.nodes()[1].as<PointwiseAttrs>().relu_upper_clip, 6.0);
  EXPECT_EQ(g.nodes()[1].output(Role::OUT_0)->uid, 2);
}

// ----------------------------------------------------------------------------- rejection

struct BadCase {
  std::string text;
  ErrorCode code;
  std::string fragment;
};

void expect_rejected(const BadCase& c) {
  Graph g;
  Status s = from_json(c.text, g);
  ASSERT_FALSE(s.is_ok()) << c.text;
  EXPECT_EQ(s.code(), c.code) << s.to_string();
  EXPECT_NE(s.message().find(c.fragment), std::string::npos)
      << "message: " << s.message() << "\nexpected fragment: " << c.fragment;
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << "not one line: " << s.message();
  EXPECT_TRUE(g.nodes().empty() && g.tensors().empty());
}

// Wraps a tensor list and node list into a version-1 description.
std::string doc(const std::string& tensors, const std::string& nodes) {
  return R"({"dnngraph_version": 1, "tensors": [)" + tensors + R"(], "nodes": [)" + nodes + "]}";
}
const std::string kTwo = R"({"name": "a"}, {"name": "b"})";

TEST(Json, RejectsMalformedDescriptions) {
  const ErrorCode arg = ErrorCode::InvalidArgument, graph = ErrorCode::InvalidGraph;
  const std::vector<BadCase> cases = {
      {"", arg, "not valid JSON"},
      {"{\"dnngraph_version\": 1,", arg, "not valid JSON"},
      {"[1, 2]", arg, "found an array"},
      {R"({"tensors": [], "nodes": []})", arg, "missing field 'dnngraph_version'"},
      {R"({"dnngraph_version": 2, "tensors": [], "nodes": []})", arg,
       "unsupported dnngraph_version 2"},
      {R"({"dnngraph_version": "1", "tensors": [], "nodes": []})", arg,
       "'dnngraph_version': expected an integer, found a string"},
      {R"({"dnngraph_version": 1.5, "tensors": [], "nodes": []})", arg,
       "found a non-integer number"},
      {R"({"dnngraph_version": 1, "nodes": []})", graph, "missing field 'tensors'"},
      {R"({"dnngraph_version": 1, "tensors": []})", graph, "missing field 'nodes'"},
      {R"({"dnngraph_version": 1, "tensors": {}, "nodes": []})", graph,
       "field 'tensors': expected an array"},
      {R"({"dnngraph_version": 1, "tensors": [], "nodes": [], "colour": 3})", graph,
       "unknown field 'colour'"},
      {R"({"dnngraph_version": 1, "io_data_type": "FLOAT17", "tensors": [], "nodes": []})", graph,
       "unknown data type 'FLOAT17'"},
      {R"({"dnngraph_version": 1, "dynamic_shape": 1, "tensors": [], "nodes": []})", graph,
       "'dynamic_shape': expected true or false, found an integer"},
      {doc("7", ""), graph, "tensor 0: expected an object, found an integer"},
      {doc(R"({"name": "x", "dim": "2x3"})", ""), graph,
       "tensor 0 'x': field 'dim': expected an array of integers, found a string"},
      {doc(R"({"name": "x", "dim": [2, 3.5]})", ""), graph, "tensor 0 'x': field 'dim' element 1"},
      {doc(R"({"name": "x", "dim": [18446744073709551615]})", ""), graph,
       "field 'dim' element 0: expected a 64-bit integer"},
      {doc(R"({"name": "x", "stride": [1, null]})", ""), graph, "field 'stride' element 1"},
      {doc(R"({"name": "x", "data_type": "FP64"})", ""), graph,
       "tensor 0 'x': field 'data_type': unknown data type 'FP64'"},
      {doc(R"({"name": "x", "virtual": "yes"})", ""), graph,
       "field 'virtual': expected true or false"},
      {doc(R"({"name": "x", "uid": 1e3})", ""), graph, "field 'uid': expected a 64-bit integer"},
      {doc(R"({"name": "x", "dims": [1]})", ""), graph, "tensor 0 'x': unknown field 'dims'"},
      {doc(R"({"name": "x", "value": 3})", ""), graph, "field 'value': expected an object or null"},
      {doc(R"({"name": "x", "value": {"float": 3}})", ""), graph,
       "tensor 0 'x' value: missing field 'data_type'"},
      {doc(R"({"name": "x", "value": {"data_type": "FLOAT", "float": "lots"}})", ""), graph,
       "field 'float': expected a number"},
      {doc(R"({"name": 5})", ""), graph, "tensor 0: field 'name': expected a string"},
      {doc(kTwo, "[]"), graph, "node 0: expected an object, found an array"},
      {doc(kTwo, R"({"name": "n"})"), graph, "node 0 'n': missing field 'kind'"},
      {doc(kTwo, R"({"name": "n", "kind": "convolution"})"), graph,
       "node 0 'n': unknown op 'convolution'"},
      {doc(kTwo, R"({"name": "n", "kind": 3})"), graph, "field 'kind': expected an op name"},
      {doc(kTwo, R"({"name": "p", "kind": "pointwise", "attrs": {"mode": "RELU6"}})"), graph,
       "node 0 'p' (pointwise) attrs: field 'mode': unknown pointwise mode 'RELU6'"},
      {doc(kTwo, R"({"name": "p", "kind": "pointwise"})"), graph,
       "node 0 'p' (pointwise) attrs: missing field 'mode'"},
      {doc(kTwo, R"({"name": "r", "kind": "reduction", "attrs": {"mode": "SUM"}})"), graph,
       "unknown reduction mode 'SUM'"},
      {doc(kTwo, R"({"name": "s", "kind": "sdpa", "attrs": {"diagonal_alignment": "CENTER"}})"),
       graph, "unknown diagonal alignment 'CENTER'"},
      {doc(kTwo, R"({"name": "l", "kind": "norm_forward", "attrs": {"phase": "EVAL"}})"), graph,
       "unknown norm phase 'EVAL'"},
      {doc(kTwo, R"({"name": "l", "kind": "norm_backward", "attrs": {"norm": "GROUP_NORM"}})"),
       graph, "unknown norm 'GROUP_NORM'"},
      {doc(kTwo, R"({"name": "c", "kind": "conv_fprop", "attrs": {"padding": [1, 1]}})"), graph,
       "node 0 'c' (conv_fprop) attrs: unknown field 'padding'"},
      {doc(kTwo, R"({"name": "c", "kind": "conv_fprop", "attrs": {"stride": [1, "2"]}})"), graph,
       "field 'stride' element 1"},
      {doc(kTwo, R"({"name": "c", "kind": "conv_fprop", "attrs": {"group_count": 1.5}})"), graph,
       "field 'group_count': expected a 64-bit integer or null"},
      {doc(kTwo, R"({"name": "m", "kind": "matmul", "attrs": []})"), graph,
       "node 0 'm' (matmul): field 'attrs': expected an object"},
      {doc(kTwo, R"({"name": "m", "kind": "matmul", "compute_data_type": "fp32"})"), graph,
       "unknown data type 'fp32'"},
      {doc(kTwo, R"({"name": "s", "kind": "softmax", "attrs": {"axis": 1}})"), graph,
       "node 0 's' (softmax) attrs: unknown field 'axis'"},
      {doc(kTwo, R"({"name": "m", "kind": "matmul", "inputs": {"A": 0, "B": 2}})"), graph,
       "node 0 'm' (matmul): inputs 'B': refers to tensor 2 but there are only 2 tensors"},
      {doc(kTwo, R"({"name": "m", "kind": "matmul", "inputs": {"A": -1}})"), graph,
       "inputs 'A': refers to tensor -1"},
      {doc(kTwo, R"({"name": "m", "kind": "matmul", "outputs": {"C": "c"}})"), graph,
       "node 0 'm' (matmul): outputs 'C': refers to unknown tensor 'c'"},
      {doc(kTwo, R"({"name": "m", "kind": "matmul", "outputs": {"C": true}})"), graph,
       "outputs 'C': expected a tensor index, a tensor name or null"},
      {doc(kTwo, R"({"name": "m", "kind": "matmul", "inputs": {"a": 0}})"), graph,
       "node 0 'm' (matmul): inputs: unknown port 'a'"},
      {doc(kTwo, R"({"name": "m", "kind": "matmul", "inputs": [0, 1]})"), graph,
       "field 'inputs': expected an object of role: tensor"},
      {doc(R"({"name": "a"}, {"name": "a"})",
           R"({"name": "m", "kind": "matmul", "inputs": {"A": "a"}})"),
       graph, "tensor name 'a' is ambiguous"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.text);
    expect_rejected(c);
  }
}

// The bad_*.json samples (also the fuzzer's seeds) fail with the documented error.
TEST(Json, RejectsBadDataFiles) {
  const std::vector<BadCase> cases = {
      {"bad_syntax.json", ErrorCode::InvalidArgument, "not valid JSON"},
      {"bad_version.json", ErrorCode::InvalidArgument, "unsupported dnngraph_version 99"},
      {"bad_unknown_op.json", ErrorCode::InvalidGraph, "unknown op 'conv_transpose'"},
      {"bad_unknown_mode.json", ErrorCode::InvalidGraph, "unknown pointwise mode 'SWISH'"},
      {"bad_dangling_ref.json", ErrorCode::InvalidGraph, "refers to unknown tensor 'W'"},
      {"bad_dim_type.json", ErrorCode::InvalidGraph, "tensor 0 'X': field 'dim'"},
  };
  for (BadCase c : cases) {
    SCOPED_TRACE(c.text);
    c.text = read_data(c.text);
    expect_rejected(c);
  }
}

// Deep nesting, huge numbers and stray bytes end in an error, not a crash.
TEST(Json, SurvivesHostileInput) {
  Graph g;
  EXPECT_FALSE(from_json(std::string(100000, '['), g).is_ok());
  EXPECT_FALSE(from_json(std::string(100000, '[') + std::string(100000, ']'), g).is_ok());
  EXPECT_FALSE(from_json(doc(R"({"dim": [1e400]})", ""), g).is_ok());
  std::string nul = "{\"dnngraph_version\": 1";
  nul += '\0';
  nul += "}";
  EXPECT_FALSE(from_json(nul, g).is_ok());
  EXPECT_FALSE(from_json("\xff\xfe{}", g).is_ok());
  EXPECT_FALSE(from_json(doc(R"({"name": "\ud800"})", ""), g).is_ok());
}

}  // namespace
}  // namespace dnngraph::ir
