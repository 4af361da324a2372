// Engines by index (Graph::get_engine_count / get_knobs_for_engine / create_execution_plan):
// the reference engine's one knob-less engine runs a graph end to end; a fake engine with knobs
// shows what the runtime passes down and how it orders, de-duplicates and reports.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/add_relu.hpp"
#include "dnngraph/dnngraph.hpp"
#include "engines/registry.hpp"

namespace dnngraph {
namespace {

TEST(EngineKnobs, ReferenceEngineHasOneEngineWithoutKnobsAndItRuns) {
  test::AddRelu t;
  auto h = test::cpu();
  ASSERT_TRUE(t.g.build_operation_graph(h).is_ok());
  auto count = t.g.get_engine_count();
  ASSERT_TRUE(count.is_ok()) << count.status().message();
  EXPECT_EQ(*count, 1);
  auto knobs = t.g.get_knobs_for_engine(0);
  ASSERT_TRUE(knobs.is_ok()) << knobs.status().message();
  EXPECT_TRUE(knobs->empty());
  ASSERT_TRUE(t.g.create_execution_plan(0).is_ok());
  ASSERT_TRUE(t.g.check_support().is_ok());
  ASSERT_TRUE(t.g.build_plans().is_ok());
  EXPECT_EQ(t.g.get_execution_plan_count(), 1);
  EXPECT_EQ(t.g.candidates().at(0).info.engine_id, 0);

  const auto a = test::random_vec(24, 1), b = test::random_vec(24, 2);
  std::vector<float> y(24, std::numeric_limits<float>::quiet_NaN());
  std::vector<unsigned char> ws(static_cast<size_t>(t.g.get_workspace_size().value()) + 1);
  Status s = t.g.execute(*h, {{1, (void*)a.data()}, {2, (void*)b.data()}, {3, y.data()}}, ws.data(),
                         static_cast<int64_t>(ws.size()));
  ASSERT_TRUE(s.is_ok()) << s.message();
  for (size_t i = 0; i < y.size(); ++i) EXPECT_FLOAT_EQ(y[i], std::max(a[i] + b[i], 0.f)) << i;
}

TEST(EngineKnobs, SerializedGraphsKeepTheEngineAndKnobsOfTheirPlan) {
  test::AddRelu t;
  auto h = test::cpu();
  ASSERT_TRUE(t.g.build(h).is_ok());
  auto blob = t.g.serialize();
  ASSERT_TRUE(blob.is_ok()) << blob.status().message();
  EXPECT_NE(blob->find("\"engine_id\":0"), std::string::npos) << *blob;
  EXPECT_NE(blob->find("\"knobs\":{}"), std::string::npos) << *blob;
  Graph back;
  ASSERT_TRUE(back.deserialize(h, *blob).is_ok());
  EXPECT_EQ(back.candidates().at(0).info.engine_id, 0);
}

TEST(EngineKnobs, BadIndexKnobsOrStageAreClearErrors) {
  test::AddRelu t;
  auto h = test::cpu();
  Status early = t.g.create_execution_plan(0);
  EXPECT_FALSE(early.is_ok());
  EXPECT_NE(early.message().find("build_operation_graph"), std::string::npos) << early.message();
  EXPECT_FALSE(t.g.get_engine_count().is_ok());
  ASSERT_TRUE(t.g.build_operation_graph(h).is_ok());
  auto out_of_range = t.g.get_knobs_for_engine(1);
  ASSERT_FALSE(out_of_range.is_ok());
  EXPECT_EQ(out_of_range.status().code(), ErrorCode::InvalidArgument);
  EXPECT_NE(out_of_range.status().message().find("get_engine_count()"), std::string::npos);
  Status knob = t.g.create_execution_plan(0, {{"KERNEL_CFG", 3}});
  ASSERT_FALSE(knob.is_ok());
  EXPECT_EQ(knob.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(knob.message().find("KERNEL_CFG"), std::string::npos) << knob.message();
  EXPECT_NE(knob.message().find("add_relu"), std::string::npos) << knob.message();
  EXPECT_FALSE(t.g.create_execution_plan(-1).is_ok());
}

// Three engines: 0 takes KERNEL_CFG in {0, 2, 4}, 1 refuses every graph, 2 has no knobs.
class KnobCandidate final : public Candidate {
 public:
  explicit KnobCandidate(CandidateInfo info) : info_(std::move(info)) {}
  const CandidateInfo& info() const override { return info_; }
  Status check_support() override { return Status::ok(); }
  Result<std::unique_ptr<Plan>> build() override {
    return make_error(ErrorCode::NotSupported, "not built in this test");
  }

 private:
  CandidateInfo info_;
};

class KnobLowered final : public LoweredGraph {
 public:
  Result<std::vector<std::unique_ptr<Candidate>>> candidates(HeurMode) override {
    std::vector<std::unique_ptr<Candidate>> out;
    CandidateInfo i;
    i.name = "heuristic";
    out.push_back(std::make_unique<KnobCandidate>(i));
    return out;
  }
  Result<int64_t> engine_count() override { return 3; }
  Result<std::vector<KnobInfo>> engine_knobs(int64_t e) override {
    if (e == 1) return make_error(ErrorCode::NotSupported, "engine 1 cannot run this graph");
    if (e == 0) return std::vector<KnobInfo>{{"KERNEL_CFG", 0, 4, 2}};
    return std::vector<KnobInfo>{};
  }
  Result<std::unique_ptr<Candidate>> engine_candidate(int64_t e, const KnobChoices& k) override {
    DNNGRAPH_ASSIGN_OR_RETURN(auto known, engine_knobs(e));
    CandidateInfo i;
    i.engine_id = e;
    i.knobs = k;
    i.name = "e" + std::to_string(e);
    for (const auto& [n, v] : k) {
      if (known.empty() || n != known[0].name || v % 2 || v > 4)
        return make_error(ErrorCode::NotSupported, "engine ", e, " refuses ", n, "=", v);
      i.name += " " + n + "=" + std::to_string(v);
    }
    return std::unique_ptr<Candidate>(std::make_unique<KnobCandidate>(i));
  }
};

class KnobEngine final : public Engine {
 public:
  std::string_view name() const override { return "knobs"; }
  bool runs_on(const Device& d) const override { return d.kind == Device::Kind::CPU; }
  Result<std::unique_ptr<LoweredGraph>> lower(const ir::ValidatedGraphPtr&, Handle&) override {
    return std::unique_ptr<LoweredGraph>(std::make_unique<KnobLowered>());
  }
};

struct FakeKnobs : ::testing::Test {
  KnobEngine engine;
  test::AddRelu t;
  HandlePtr h = test::cpu();
  void SetUp() override {
    register_engine(&engine);
    ASSERT_TRUE(t.g.build_operation_graph(h).is_ok());
  }
  void TearDown() override { unregister_engine(&engine); }
};

TEST_F(FakeKnobs, EveryValueOfEveryKnobBecomesACandidateInOrder) {
  ASSERT_EQ(t.g.get_engine_count().value(), 3);
  int made = 0;
  for (int64_t e = 0; e < 3; ++e) {
    auto knobs = t.g.get_knobs_for_engine(e);
    if (!knobs.is_ok()) {
      EXPECT_EQ(e, 1);
      EXPECT_EQ(knobs.status().code(), ErrorCode::NotSupported);
      EXPECT_NE(knobs.status().message().find("add_relu"), std::string::npos);
      continue;
    }
    if (knobs->empty()) {
      ASSERT_TRUE(t.g.create_execution_plan(e).is_ok());
      ++made;
    }
    for (const KnobInfo& k : *knobs)
      for (int64_t v = k.min_value; v <= k.max_value; v += k.stride) {
        ASSERT_TRUE(t.g.create_execution_plan(e, {{k.name, v}}).is_ok());
        ++made;
      }
  }
  EXPECT_EQ(made, 4);
  ASSERT_TRUE(t.g.create_execution_plan(0, {{"KERNEL_CFG", 2}}).is_ok());  // a duplicate
  Status refused = t.g.create_execution_plan(0, {{"KERNEL_CFG", 3}});
  EXPECT_EQ(refused.code(), ErrorCode::NotSupported);
  ASSERT_TRUE(t.g.check_support().is_ok());
  ASSERT_EQ(t.g.get_execution_plan_count(), 4);
  std::vector<std::string> names;
  for (const auto& c : t.g.candidates()) names.push_back(c.info.name);
  EXPECT_EQ(names, (std::vector<std::string>{"e0 KERNEL_CFG=0", "e0 KERNEL_CFG=2",
                                             "e0 KERNEL_CFG=4", "e2"}));
  EXPECT_EQ(t.g.candidates()[1].info.knobs, (KnobChoices{{"KERNEL_CFG", 2}}));
}

TEST_F(FakeKnobs, AppendsAfterTheHeuristicsCandidates) {
  ASSERT_TRUE(t.g.create_execution_plans({HeurMode::A}).is_ok());
  ASSERT_TRUE(t.g.create_execution_plan(2).is_ok());
  ASSERT_TRUE(t.g.check_support().is_ok());
  ASSERT_EQ(t.g.get_execution_plan_count(), 2);
  EXPECT_EQ(t.g.candidates()[0].info.name, "heuristic");
  EXPECT_EQ(t.g.candidates()[1].info.name, "e2");
  // A new create_execution_plans starts over.
  ASSERT_TRUE(t.g.create_execution_plans({HeurMode::A}).is_ok());
  ASSERT_TRUE(t.g.check_support().is_ok());
  EXPECT_EQ(t.g.get_execution_plan_count(), 1);
}

}  // namespace
}  // namespace dnngraph
