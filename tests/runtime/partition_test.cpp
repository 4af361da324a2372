// partition(): maximal convex groups of connected ops that the handle's engine accepts, and the
// ops it refuses alone, with its reason. A picky CPU engine registered ahead of the reference
// engine refuses chosen pointwise modes and op kinds at check_support (as cuDNN refuses what it
// has no engine for); the groups below are worked out by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <set>
#include <thread>

#include "dnngraph/dnngraph.hpp"
#include "engines/registry.hpp"

namespace dnngraph {
namespace {

struct Refusals {
  std::set<PointwiseMode> modes;
  std::set<ir::OpKind> kinds;
  int candidates = 1;          // each with a reason of its own when more than one
  std::atomic<int> checks{0};  // check_support calls (threads of a concurrent test count too)
  // Modes check_support accepts but no plan builds for (a candidate that fails to finalize).
  std::set<PointwiseMode> unbuildable;
};

// The first node the engine refuses, or null.
const ir::Node* refused(const Refusals& r, const ir::ValidatedGraph& g) {
  for (const ir::Node& n : g.nodes()) {
    if (r.kinds.count(n.kind())) return &n;
    if (n.kind() == ir::OpKind::Pointwise && r.modes.count(n.as<ir::PointwiseAttrs>().mode))
      return &n;
  }
  return nullptr;
}

class PickyPlan final : public Plan {
 public:
  std::string name() const override { return "picky"; }
  int64_t workspace_size() const override { return 0; }
  Status execute(Handle&, const VariantPack&, void*) override { return Status::ok(); }
};

class PickyCandidate final : public Candidate {
 public:
  PickyCandidate(Refusals& r, ir::ValidatedGraphPtr g, int i) : r_(r), g_(std::move(g)), i_(i) {
    info_.engine = "picky";
    info_.name = "picky" + std::to_string(i);
  }
  const CandidateInfo& info() const override { return info_; }
  Status check_support() override {
    ++r_.checks;
    if (const ir::Node* n = refused(r_, *g_))
      return make_error(ErrorCode::NotSupported, "op '", n->name,
                        "': the picky engine has no "
                        "kernel for it",
                        r_.candidates > 1 ? " in config " + std::to_string(i_) : "");
    return Status::ok();
  }
  Result<std::unique_ptr<Plan>> build() override {
    for (const ir::Node& n : g_->nodes())
      if (n.kind() == ir::OpKind::Pointwise &&
          r_.unbuildable.count(n.as<ir::PointwiseAttrs>().mode))
        return make_error(ErrorCode::NotSupported, "op '", n.name,
                          "': the picky engine's kernel failed to build");
    return std::unique_ptr<Plan>(std::make_unique<PickyPlan>());
  }

 private:
  Refusals& r_;
  ir::ValidatedGraphPtr g_;
  int i_;
  CandidateInfo info_;
};

class PickyLowered final : public LoweredGraph {
 public:
  PickyLowered(Refusals& r, ir::ValidatedGraphPtr g) : r_(r), g_(std::move(g)) {}
  Result<std::vector<std::unique_ptr<Candidate>>> candidates(HeurMode) override {
    std::vector<std::unique_ptr<Candidate>> out;
    for (int i = 0; i < r_.candidates; ++i)
      out.push_back(std::make_unique<PickyCandidate>(r_, g_, i));
    return out;
  }

 private:
  Refusals& r_;
  ir::ValidatedGraphPtr g_;
};

class PickyEngine final : public Engine {
 public:
  Refusals r;
  std::string_view name() const override { return "picky"; }
  bool runs_on(const Device& d) const override { return d.kind == Device::Kind::CPU; }
  Result<std::unique_ptr<LoweredGraph>> lower(const ir::ValidatedGraphPtr& g, Handle&) override {
    return std::unique_ptr<LoweredGraph>(std::make_unique<PickyLowered>(r, g));
  }
};

ir::TensorAttrs f32(std::string name, std::vector<int64_t> dims) {
  return ir::TensorAttrs()
      .set_name(std::move(name))
      .set_dim(std::move(dims))
      .set_data_type(DataType::Float);
}

// The names of partition p's ops, in order.
std::vector<std::string> names_of(const Graph& g, const Partition& p) {
  std::vector<std::string> out;
  for (size_t i : p.ops) out.push_back(g.nodes()[i].name);
  return out;
}

// x -> conv -> bias -> relu -> matmul -> Y, the relu's output R also a graph output.
struct Chain {
  Graph g;
  Chain() {
    g.set_name("chain").set_io_data_type(DataType::Float);
    auto x = g.tensor(f32("X", {1, 2, 5, 5}).set_stride({50, 25, 5, 1}));
    auto w = g.tensor(f32("W", {3, 2, 3, 3}).set_stride({18, 9, 3, 1}));
    auto b = g.tensor(f32("B", {1, 3, 1, 1}).set_stride({3, 1, 1, 1}));
    auto w2 = g.tensor(f32("W2", {1, 3, 5, 4}).set_stride({60, 20, 4, 1}));
    auto c = g.conv_fprop(x, w, ir::ConvFpropAttrs().set_padding({1, 1}), {.name = "conv"});
    auto cb = g.bias(c, b, {.name = "bias"});
    auto r = g.relu(cb, {.name = "relu"});
    r->set_output(true).set_name("R");
    g.matmul(r, w2, {}, {.name = "mm"})->set_output(true).set_name("Y");
    EXPECT_TRUE(g.validate().is_ok());
  }
  std::vector<std::string> names(const Partition& p) const { return names_of(g, p); }
};

using Names = std::vector<std::string>;

// relu(X1) named `relu_name` and `second`(X2) named `second_name`, added into S.
void two_branches_added(Graph& g, const char* name, const char* relu_name, PointwiseMode second,
                        const char* second_name) {
  g.set_name(name).set_io_data_type(DataType::Float);
  auto x1 = g.tensor(f32("X1", {2, 3}).set_stride({3, 1}));
  auto x2 = g.tensor(f32("X2", {2, 3}).set_stride({3, 1}));
  auto r = g.relu(x1, {.name = relu_name});
  auto u = g.unary(second, x2, {.name = second_name});
  g.add(r, u, {.name = "sum"})->set_output(true).set_name("S");
}

struct PartitionTest : ::testing::Test {
  PickyEngine picky;
  HandlePtr h = Handle::create(Device::cpu()).value();
  void SetUp() override {
    register_engine(&picky);
    clear_partition_cache();
  }
  void TearDown() override { unregister_engine(&picky); }
};

TEST_F(PartitionTest, AChainTheEngineTakesIsOnePartition) {
  Chain c;
  auto parts = partition(c.g, h);
  ASSERT_TRUE(parts.is_ok()) << parts.status().message();
  ASSERT_EQ(parts->size(), 1u);
  EXPECT_TRUE((*parts)[0].supported);
  EXPECT_EQ((*parts)[0].reason, "");
  EXPECT_EQ(c.names((*parts)[0]), (Names{"conv", "bias", "relu", "mm"}));
}

TEST_F(PartitionTest, TheReferenceEngineTakesEveryGraph) {
  unregister_engine(&picky);
  Chain c;
  auto parts = partition(c.g, h);
  ASSERT_TRUE(parts.is_ok()) << parts.status().message();
  ASSERT_EQ(parts->size(), 1u);
  EXPECT_TRUE((*parts)[0].supported);
  register_engine(&picky);
}

TEST_F(PartitionTest, ARefusedLastOpIsItsOwnPartitionWithTheReason) {
  picky.r.kinds = {ir::OpKind::Matmul};
  Chain c;
  auto parts = partition(c.g, h);
  ASSERT_TRUE(parts.is_ok()) << parts.status().message();
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ(c.names((*parts)[0]), (Names{"conv", "bias", "relu"}));
  EXPECT_TRUE((*parts)[0].supported);
  EXPECT_EQ(c.names((*parts)[1]), (Names{"mm"}));
  EXPECT_FALSE((*parts)[1].supported);
  EXPECT_EQ((*parts)[1].reason,
            "engine 'picky': none of its 1 candidate(s) supports it: op 'mm': the picky engine "
            "has no kernel for it");
}

// Every candidate's reason on one line, the first three distinct ones shown.
TEST_F(PartitionTest, ARefusalIsOneLineWithTheFirstDistinctReasons) {
  picky.r.kinds = {ir::OpKind::Matmul};
  picky.r.candidates = 5;
  Chain c;
  auto parts = partition(c.g, h);
  ASSERT_TRUE(parts.is_ok()) << parts.status().message();
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[1].reason,
            "engine 'picky': none of its 5 candidate(s) supports it: op 'mm': the picky engine "
            "has no kernel for it in config 0; op 'mm': the picky engine has no kernel for it in "
            "config 1; op 'mm': the picky engine has no kernel for it in config 2; and 2 other "
            "reason(s)");
}

TEST_F(PartitionTest, ARefusedMiddleOpSplitsTheChain) {
  picky.r.modes = {PointwiseMode::Relu};
  Chain c;
  auto parts = partition(c.g, h);
  ASSERT_TRUE(parts.is_ok()) << parts.status().message();
  ASSERT_EQ(parts->size(), 3u);
  EXPECT_EQ(c.names((*parts)[0]), (Names{"conv", "bias"}));
  EXPECT_EQ(c.names((*parts)[1]), (Names{"relu"}));
  EXPECT_EQ(c.names((*parts)[2]), (Names{"mm"}));
  EXPECT_TRUE((*parts)[0].supported);
  EXPECT_FALSE((*parts)[1].supported);
  EXPECT_TRUE((*parts)[2].supported);
  EXPECT_NE((*parts)[1].reason.find("'relu'"), std::string::npos) << (*parts)[1].reason;
}

// X -> a = relu -> b = tanh(a), c = sigmoid(a) -> d = b + c.
struct Diamond {
  Graph g;
  explicit Diamond(std::string name = "diamond", int64_t first_uid = 0) {
    g.set_name(name).set_io_data_type(DataType::Float);
    auto x = g.tensor(f32("X", {4, 8}).set_stride({8, 1}));
    if (first_uid) x->set_uid(first_uid);
    auto a = g.relu(x, {.name = name + "_a"});
    auto b = g.unary(PointwiseMode::Tanh, a, {.name = name + "_b"});
    auto c = g.unary(PointwiseMode::Sigmoid, a, {.name = name + "_c"});
    auto d = g.add(b, c, {.name = name + "_d"});
    d->set_output(true).set_name("D");
    int64_t uid = first_uid;
    if (first_uid)
      for (const ir::Tensor& t : {a, b, c, d}) t->set_uid(++uid);
    EXPECT_TRUE(g.validate().is_ok());
  }
};

TEST_F(PartitionTest, ADiamondIsOnePartition) {
  Diamond d;
  auto parts = partition(d.g, h);
  ASSERT_TRUE(parts.is_ok()) << parts.status().message();
  ASSERT_EQ(parts->size(), 1u);
  EXPECT_EQ((*parts)[0].ops, (std::vector<size_t>{0, 1, 2, 3}));
}

// With c refused, d cannot join {a, b}: the path a -> c -> d would leave the group and come back.
TEST_F(PartitionTest, ADiamondWithARefusedArmStaysConvex) {
  picky.r.modes = {PointwiseMode::Sigmoid};
  Diamond d;
  auto parts = partition(d.g, h);
  ASSERT_TRUE(parts.is_ok()) << parts.status().message();
  ASSERT_EQ(parts->size(), 3u);
  auto name = [&](const Partition& p, size_t k) { return d.g.nodes()[p.ops[k]].name; };
  ASSERT_EQ((*parts)[0].ops.size(), 2u);
  EXPECT_EQ(name((*parts)[0], 0), "diamond_a");
  EXPECT_EQ(name((*parts)[0], 1), "diamond_b");
  ASSERT_EQ((*parts)[1].ops.size(), 1u);
  EXPECT_EQ(name((*parts)[1], 0), "diamond_c");
  EXPECT_FALSE((*parts)[1].supported);
  ASSERT_EQ((*parts)[2].ops.size(), 1u);
  EXPECT_EQ(name((*parts)[2], 0), "diamond_d");
  EXPECT_TRUE((*parts)[2].supported);
}

// relu(X1) and relu(X2) start two groups; the add that reads both merges them.
TEST_F(PartitionTest, AnOpReadingTwoGroupsMergesThem) {
  Graph g;
  two_branches_added(g, "two", "r1", PointwiseMode::Tanh, "r2");
  ASSERT_TRUE(g.validate().is_ok());
  auto parts = partition(g, h);
  ASSERT_TRUE(parts.is_ok()) << parts.status().message();
  ASSERT_EQ(parts->size(), 1u);
  EXPECT_EQ((*parts)[0].ops.size(), 3u);
  EXPECT_TRUE((*parts)[0].supported);
}

// relu(X1) starts a group, sigmoid(X2) is refused, and the add joins relu's group: that group
// reads the sigmoid's output, so it comes after it although its first op comes first.
TEST_F(PartitionTest, PartitionsComeInAnOrderThatRunsThem) {
  picky.r.modes = {PointwiseMode::Sigmoid};
  Graph g;
  two_branches_added(g, "order", "r", PointwiseMode::Sigmoid, "sg");
  ASSERT_TRUE(g.validate().is_ok());
  auto parts = partition(g, h);
  ASSERT_TRUE(parts.is_ok()) << parts.status().message();
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ(names_of(g, (*parts)[0]), (Names{"sg"}));
  EXPECT_FALSE((*parts)[0].supported);
  EXPECT_EQ(names_of(g, (*parts)[1]), (Names{"r", "sum"}));
  EXPECT_TRUE((*parts)[1].supported);
}

// An output read inside its partition and by the graph's user, and a virtual tensor that crosses
// partitions: both become non-virtual in the standalone graphs, with their uids.
TEST_F(PartitionTest, BoundaryTensorsBecomeInputsAndOutputs) {
  picky.r.kinds = {ir::OpKind::Matmul};
  Chain c;
  auto parts = partition(c.g, h);
  ASSERT_TRUE(parts.is_ok()) << parts.status().message();
  ASSERT_EQ(parts->size(), 2u);
  auto first = partition_graph(c.g, (*parts)[0]);
  ASSERT_TRUE(first.is_ok()) << first.status().message();
  auto io = [](const Graph& g) {
    std::vector<std::string> in, out;
    for (const ir::Tensor& t : g.io_tensors()) (t->is_output ? out : in).push_back(t->name);
    return std::make_pair(in, out);
  };
  auto [in0, out0] = io(**first);
  EXPECT_EQ(std::set<std::string>(in0.begin(), in0.end()), (std::set<std::string>{"X", "W", "B"}));
  EXPECT_EQ(out0, (Names{"R"}));
  auto second = partition_graph(c.g, (*parts)[1]);
  ASSERT_TRUE(second.is_ok()) << second.status().message();
  auto [in1, out1] = io(**second);
  EXPECT_EQ(std::set<std::string>(in1.begin(), in1.end()), (std::set<std::string>{"R", "W2"}));
  EXPECT_EQ(out1, (Names{"Y"}));
  EXPECT_EQ((*second)->find_tensor_by_name("R")->uid, c.g.find_tensor_by_name("R")->uid);

  // The split of the diamond: tanh's output b is virtual in the graph but read by d outside.
  picky.r.kinds.clear();
  picky.r.modes = {PointwiseMode::Sigmoid};
  Diamond d;
  auto dparts = partition(d.g, h);
  ASSERT_TRUE(dparts.is_ok());
  auto ab = partition_graph(d.g, (*dparts)[0]);
  ASSERT_TRUE(ab.is_ok()) << ab.status().message();
  auto [in2, out2] = io(**ab);
  EXPECT_EQ(in2, (Names{"X"}));
  EXPECT_EQ(out2.size(), 2u);  // a (read by c) and b (read by d)
  for (const ir::Tensor& t : (*ab)->tensors()) EXPECT_FALSE(t->is_virtual) << t->name;
}

TEST_F(PartitionTest, TheStandaloneGraphRunsLikeTheWhole) {
  unregister_engine(&picky);
  Diamond d;
  Partition all{{0, 1, 2, 3}, true, ""};
  auto sub = partition_graph(d.g, all);
  ASSERT_TRUE(sub.is_ok()) << sub.status().message();
  ASSERT_TRUE((*sub)->build(h).is_ok());
  std::vector<float> x(32), y(32, -99.f);
  for (int i = 0; i < 32; ++i) x[i] = 0.25f * static_cast<float>(i - 13);
  VariantPack pack{{(*sub)->find_tensor_by_name("X")->uid, x.data()},
                   {(*sub)->find_tensor_by_name("D")->uid, y.data()}};
  std::vector<char> ws(static_cast<size_t>((*sub)->get_workspace_size().value()));
  Status run = (*sub)->execute(*h, pack, ws.data(), static_cast<int64_t>(ws.size()));
  ASSERT_TRUE(run.is_ok()) << run.to_string();
  for (int i = 0; i < 32; ++i) {
    const float a = std::max(x[i], 0.f);
    EXPECT_NEAR(y[i], std::tanh(a) + 1.f / (1.f + std::exp(-a)), 1e-5f) << i;
  }
  register_engine(&picky);
}

TEST_F(PartitionTest, AnswersAreCachedPerFingerprint) {
  picky.r.modes = {PointwiseMode::Sigmoid};
  Diamond d1("first");
  ASSERT_TRUE(partition(d1.g, h).is_ok());
  const int checks = picky.r.checks;
  const auto stats = partition_cache_stats();
  EXPECT_GT(checks, 0);
  EXPECT_EQ(stats[2], checks);  // every miss asked the engine once
  // Same structure, other names and uids (the next layer): no engine call, and the refusal
  // names this graph's op.
  Diamond d2("second", 100);
  ASSERT_EQ(d2.g.find_tensor_by_name("X")->uid, 100);
  auto parts = partition(d2.g, h);
  ASSERT_TRUE(parts.is_ok());
  EXPECT_EQ(picky.r.checks, checks);
  // Every question of the first run (its misses and its hits) is a hit now.
  EXPECT_EQ(partition_cache_stats()[1] - stats[1], stats[1] + stats[2]);
  ASSERT_EQ(parts->size(), 3u);
  EXPECT_NE((*parts)[1].reason.find("op 'second_c'"), std::string::npos) << (*parts)[1].reason;
  EXPECT_EQ((*parts)[1].reason.find("first"), std::string::npos) << (*parts)[1].reason;
}

// What the compile backend does: the candidates of one graph partitioned on worker threads, each
// with its own handle, the support cache shared (cleared first, so that the threads miss and
// insert at once). Every thread gets the partitions one thread alone gets.
TEST_F(PartitionTest, ConcurrentPartitionsOnTheirOwnHandlesAgree) {
  picky.r.modes = {PointwiseMode::Sigmoid};
  auto describe = [](const Graph& g, const std::vector<Partition>& parts) {
    std::string out;
    for (const Partition& p : parts) {
      for (const std::string& n : names_of(g, p)) out += n + ",";
      out += std::string(p.supported ? "+" : "-") + p.reason + ";";
    }
    return out;
  };
  constexpr int kThreads = 8, kRounds = 20;
  std::vector<std::string> want(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    Diamond d("graph" + std::to_string(t % 3));
    auto parts = partition(d.g, h);
    ASSERT_TRUE(parts.is_ok()) << parts.status().message();
    want[static_cast<size_t>(t)] = describe(d.g, *parts);
  }
  ASSERT_NE(want[0].find("op 'graph0_c': the picky engine has no kernel"), std::string::npos)
      << want[0];
  clear_partition_cache();
  std::vector<std::string> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      HandlePtr own = Handle::create(Device::cpu()).value();
      std::string last;
      for (int round = 0; round < kRounds; ++round) {
        Diamond d("graph" + std::to_string(t % 3));
        auto parts = partition(d.g, own);
        last = parts.is_ok() ? describe(d.g, *parts) : "error: " + parts.status().message();
        if (last != want[static_cast<size_t>(t)]) break;
      }
      got[static_cast<size_t>(t)] = last;
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t)
    EXPECT_EQ(got[static_cast<size_t>(t)], want[static_cast<size_t>(t)]) << t;
}

// An SDPA node carries its score modifier's ops: the standalone graph gets its own copies of
// them (and of the graph tensor they read), and writes and reads back as JSON.
TEST_F(PartitionTest, AScoreModifierTravelsWithItsNode) {
  picky.r.modes = {PointwiseMode::Relu};
  Graph g;
  g.set_name("attn").set_io_data_type(DataType::Float);
  auto in = [&](const char* name, std::vector<int64_t> d) {
    std::vector<int64_t> st = ir::packed_strides(d);
    return g.tensor(f32(name, std::move(d)).set_stride(std::move(st)));
  };
  auto q = g.relu(in("Q", {1, 2, 4, 8}), {.name = "pre"});
  auto k = in("K", {1, 2, 6, 8}), v = in("V", {1, 2, 6, 8});
  auto cap = g.scalar(ir::Scalar::of_float(2.5), "cap");
  ir::SdpaInputs e;
  e.score_mod = [cap](ir::Graph& gr, ir::Tensor sc) {
    return gr.mul(gr.unary(PointwiseMode::Tanh, gr.binary(PointwiseMode::Div, sc, cap)), cap);
  };
  ir::SdpaAttrs a;
  a.is_inference = true;
  g.sdpa(q, k, v, a, e, {.name = "attn"})[0]->set_output(true).set_name("O");
  Status ok = g.validate();
  ASSERT_TRUE(ok.is_ok()) << ok.to_string();
  auto parts = partition(g, h);
  ASSERT_TRUE(parts.is_ok()) << parts.status().message();
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_FALSE((*parts)[0].supported);
  ASSERT_TRUE((*parts)[1].supported) << (*parts)[1].reason;
  auto sub = partition_graph(g, (*parts)[1]);
  ASSERT_TRUE(sub.is_ok()) << sub.status().message();
  const ir::Node& copied = (*sub)->nodes()[0];
  const ir::Node& orig = g.validated()->nodes()[1];
  ASSERT_EQ(copied.subgraphs.size(), 1u);
  EXPECT_EQ(copied.subgraphs[0].nodes.size(), 3u);
  EXPECT_NE(copied.subgraphs[0].input.get(), orig.subgraphs[0].input.get());
  EXPECT_FALSE((*sub)->find_tensor_by_name(q->name)->is_virtual);  // relu's output: an input
  Graph loaded;
  ASSERT_TRUE(ir::from_json(ir::to_json(**sub), loaded).is_ok());
  EXPECT_TRUE(loaded.validate().is_ok());
  EXPECT_EQ(ir::to_json(loaded), ir::to_json(**sub));
}

// Between partitions a value is stored in memory: a virtual tensor whose type validate() only
// inferred (the intermediate type, fp32) is an input or output of a cut in the io type (bf16
// here), as a marked output without a type would be; a type the user set stays.
TEST_F(PartitionTest, ACutStoresInferredVirtualTensorsInTheIoType) {
  Graph g;
  g.set_name("bf16").set_io_data_type(DataType::BFloat16);
  auto x = g.tensor(ir::TensorAttrs().set_name("X").set_dim({2, 3}).set_stride({3, 1}));
  auto a = g.relu(x, {.name = "a"});
  auto b = g.unary(PointwiseMode::Tanh, a, {.name = "b"});
  b->set_data_type(DataType::Float);  // a virtual tensor with the user's type
  g.relu(b, {.name = "c"})->set_output(true).set_name("Y");
  ASSERT_TRUE(g.validate().is_ok());
  EXPECT_EQ(g.validated()->find_tensor_by_name(a->name)->data_type, DataType::Float);
  auto first = partition_graph(g, Partition{{0}, true, ""});
  ASSERT_TRUE(first.is_ok()) << first.status().message();
  const auto a_out = (*first)->find_tensor_by_name(a->name);
  EXPECT_FALSE(a_out->is_virtual);
  EXPECT_EQ(a_out->data_type, DataType::BFloat16);
  auto second = partition_graph(g, Partition{{1}, true, ""});
  ASSERT_TRUE(second.is_ok()) << second.status().message();
  EXPECT_EQ((*second)->find_tensor_by_name(a->name)->data_type, DataType::BFloat16);
  EXPECT_EQ((*second)->find_tensor_by_name(b->name)->data_type, DataType::Float);
  auto third = partition_graph(g, Partition{{2}, true, ""});
  ASSERT_TRUE(third.is_ok()) << third.status().message();
  EXPECT_EQ((*third)->find_tensor_by_name(b->name)->data_type, DataType::Float);
  EXPECT_EQ((*third)->find_tensor_by_name("Y")->data_type, DataType::BFloat16);
}

TEST_F(PartitionTest, BadCallsAreCleanErrors) {
  Graph g;
  g.set_name("raw");
  auto x = g.tensor(f32("X", {2, 2}).set_stride({2, 1}));
  g.relu(x)->set_output(true);
  auto r = partition(g, h);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), ErrorCode::InvalidArgument);
  EXPECT_NE(r.status().message().find("validate() first"), std::string::npos);
  ASSERT_TRUE(g.validate().is_ok());
  auto no_handle = partition(g, nullptr);
  EXPECT_EQ(no_handle.status().code(), ErrorCode::InvalidArgument);
  auto bad = partition_graph(g, Partition{{7}, true, ""});
  EXPECT_EQ(bad.status().code(), ErrorCode::InvalidArgument);
  EXPECT_NE(bad.status().message().find("out of range"), std::string::npos);
}

TEST_F(PartitionTest, AnEmptyGraphHasNoPartitions) {
  Graph g;
  g.set_name("empty").set_allow_unused_tensors(true);
  ASSERT_TRUE(g.validate().is_ok());
  auto parts = partition(g, h);
  ASSERT_TRUE(parts.is_ok()) << parts.status().message();
  EXPECT_TRUE(parts->empty());
}

// A long chain the engine takes whole: one partition, from one question to the engine (growing
// it op by op asked about every prefix: thousands of ever larger graphs, quadratic time).
TEST_F(PartitionTest, AComponentTheEngineTakesWholeIsAskedOnce) {
  Graph g;
  g.set_name("long").set_io_data_type(DataType::Float);
  ir::Tensor t = g.tensor(f32("X", {1, 4}).set_stride({4, 1}));
  constexpr int kOps = 3000;
  for (int i = 0; i < kOps; ++i) t = g.relu(t);
  t->set_output(true);
  ASSERT_TRUE(g.validate().is_ok());
  auto parts = partition(g, h);
  ASSERT_TRUE(parts.is_ok()) << parts.status().message();
  ASSERT_EQ(parts->size(), 1u);
  EXPECT_EQ((*parts)[0].ops.size(), static_cast<size_t>(kOps));
  // Asked once at check_support, then once more when its plan is built.
  EXPECT_EQ(picky.r.checks, 2);
  EXPECT_EQ(partition_cache_stats()[2], 2);
}

// Anchors: of two unconnected groups (the chain conv -> bias -> relu -> matmul, and a separate
// relu -> tanh), only the one holding an anchor op is built; the other comes back supported and
// unbuilt, with the reason, and its plan is never asked for.
TEST_F(PartitionTest, OnlyPartitionsHoldingAnAnchorAreBuilt) {
  Chain c;
  ir::Tensor z = c.g.tensor(f32("Z", {2, 3}).set_stride({3, 1}));
  c.g.unary(PointwiseMode::Tanh, c.g.relu(z, {.name = "zr"}), {.name = "zt"})
      ->set_output(true)
      .set_name("T");
  ASSERT_TRUE(c.g.validate().is_ok());
  std::vector<size_t> mm;
  for (size_t i = 0; i < c.g.nodes().size(); ++i)
    if (c.g.nodes()[i].name == "mm") mm.push_back(i);
  ASSERT_EQ(mm.size(), 1u);
  picky.r.unbuildable = {PointwiseMode::Tanh};  // building the unanchored group would fail
  auto parts = partition(c.g, h, PartitionOptions{mm});
  ASSERT_TRUE(parts.is_ok()) << parts.status().message();
  ASSERT_EQ(parts->size(), 2u);
  for (const Partition& p : *parts) {
    SCOPED_TRACE(names_of(c.g, p)[0]);
    EXPECT_TRUE(p.supported);
    const bool has_mm = std::find(p.ops.begin(), p.ops.end(), mm[0]) != p.ops.end();
    EXPECT_EQ(p.built, has_mm);
    if (has_mm) {
      EXPECT_EQ(p.ops.size(), 4u);
      EXPECT_EQ(p.reason, "");
    } else {
      EXPECT_EQ(names_of(c.g, p), (Names{"zr", "zt"}));  // not split: never built
      EXPECT_EQ(p.reason, "not built: it holds none of the anchor ops asked for");
    }
  }
  // Without anchors every supported group is built: the tanh group fails and is split.
  clear_partition_cache();
  auto all = partition(c.g, h);
  ASSERT_TRUE(all.is_ok()) << all.status().message();
  ASSERT_EQ(all->size(), 3u);
  for (const Partition& p : *all) EXPECT_EQ(p.built, p.supported) << p.reason;
  // Anchors given but empty: nothing is built.
  clear_partition_cache();
  auto none = partition(c.g, h, PartitionOptions{std::vector<size_t>{}});
  ASSERT_TRUE(none.is_ok()) << none.status().message();
  for (const Partition& p : *none) EXPECT_FALSE(p.built);
  auto bad = partition(c.g, h, PartitionOptions{std::vector<size_t>{99}});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("anchor op index 99 is out of range"), std::string::npos)
      << bad.status().message();
}

// check_support accepts relu -> sigmoid -> tanh whole, but no plan builds with the sigmoid: the
// partition is split into its ops, the relu and the tanh claimed alone, the sigmoid left out
// with the engine's reason; the order still runs them.
TEST_F(PartitionTest, APartitionWithoutAPlanIsSplitIntoItsOps) {
  picky.r.unbuildable = {PointwiseMode::Sigmoid};
  Graph g;
  g.set_name("unbuilt").set_io_data_type(DataType::Float);
  ir::Tensor x = g.tensor(f32("X", {2, 3}).set_stride({3, 1}));
  ir::Tensor y = g.unary(PointwiseMode::Tanh, g.unary(PointwiseMode::Sigmoid, g.relu(x)));
  y->set_output(true);
  ASSERT_TRUE(g.validate().is_ok());
  auto parts = partition(g, h);
  ASSERT_TRUE(parts.is_ok()) << parts.status().message();
  ASSERT_EQ(parts->size(), 3u);
  const std::vector<std::string> want{"relu", "sigmoid", "tanh"};
  for (size_t k = 0; k < 3; ++k) {
    SCOPED_TRACE(k);
    ASSERT_EQ((*parts)[k].ops.size(), 1u);
    EXPECT_NE(g.nodes()[(*parts)[k].ops[0]].name.find(want[k]), std::string::npos)
        << g.nodes()[(*parts)[k].ops[0]].name;
    EXPECT_EQ((*parts)[k].supported, k != 1);
  }
  EXPECT_NE((*parts)[1].reason.find("accepted this graph at check_support but built no plan"),
            std::string::npos)
      << (*parts)[1].reason;
  EXPECT_NE((*parts)[1].reason.find("failed to build"), std::string::npos) << (*parts)[1].reason;
}

// Two components: the one the engine takes whole is one partition; the other, with a refused
// op, is grown op by op as before.
TEST_F(PartitionTest, ComponentsAreAskedWholeThenOpByOp) {
  picky.r.modes = {PointwiseMode::Sigmoid};
  Graph g;
  g.set_name("two").set_io_data_type(DataType::Float);
  auto x1 = g.tensor(f32("X1", {2, 3}).set_stride({3, 1}));
  auto x2 = g.tensor(f32("X2", {2, 3}).set_stride({3, 1}));
  g.relu(g.unary(PointwiseMode::Tanh, x1, {.name = "t1"}), {.name = "r1"})->set_output(true);
  g.relu(g.unary(PointwiseMode::Sigmoid, x2, {.name = "s2"}), {.name = "r2"})->set_output(true);
  ASSERT_TRUE(g.validate().is_ok());
  auto parts = partition(g, h);
  ASSERT_TRUE(parts.is_ok()) << parts.status().message();
  std::vector<Names> got;
  for (const Partition& p : *parts) got.push_back(names_of(g, p));
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<Names>{{"r2"}, {"s2"}, {"t1", "r1"}}));
}

}  // namespace
}  // namespace dnngraph
