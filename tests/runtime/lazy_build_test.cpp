// The pipeline checks and builds candidates lazily, as the cuDNN frontend does: check_support
// stops at the first supported candidate, HEURISTICS_CHOICE builds only what it uses, and the
// plan count and the candidate reports still cover every candidate. A counting engine
// registered ahead of the built-in ones shows what was called.
#include <gtest/gtest.h>

#include <set>

#include "dnngraph/dnngraph.hpp"
#include "engines/registry.hpp"

namespace dnngraph {
namespace {

struct Counters {
  int checks = 0, builds = 0;
  std::set<int> unsupported;       // check_support refuses these candidates
  std::set<int> failing_builds;    // build() fails for these
  std::set<HeurMode> empty_modes;  // candidates() refuses these modes
  int count = 6;
};

class CountingPlan final : public Plan {
 public:
  explicit CountingPlan(int i) : i_(i) {}
  std::string name() const override { return "c" + std::to_string(i_); }
  int64_t workspace_size() const override { return 16 * i_; }
  Status execute(Handle&, const VariantPack&, void*) override { return Status::ok(); }

 private:
  int i_;
};

class CountingCandidate final : public Candidate {
 public:
  CountingCandidate(Counters& c, int i) : c_(c), i_(i) {
    info_.engine = "counting";
    info_.name = "c" + std::to_string(i);
  }
  const CandidateInfo& info() const override { return info_; }
  Status check_support() override {
    ++c_.checks;
    if (c_.unsupported.count(i_))
      return make_error(ErrorCode::NotSupported, "candidate c", i_, " refuses the graph");
    return Status::ok();
  }
  Result<std::unique_ptr<Plan>> build() override {
    ++c_.builds;
    if (c_.failing_builds.count(i_))
      return make_error(ErrorCode::NotSupported, "candidate c", i_, " failed to build");
    return std::unique_ptr<Plan>(std::make_unique<CountingPlan>(i_));
  }

 private:
  Counters& c_;
  int i_;
  CandidateInfo info_;
};

class CountingLowered final : public LoweredGraph {
 public:
  explicit CountingLowered(Counters& c) : c_(c) {}
  Result<std::vector<std::unique_ptr<Candidate>>> candidates(HeurMode m) override {
    if (c_.empty_modes.count(m))
      return make_error(ErrorCode::NotSupported, "heuristics ", static_cast<int>(m),
                        " proposed none");
    std::vector<std::unique_ptr<Candidate>> out;
    for (int i = 0; i < c_.count; ++i) out.push_back(std::make_unique<CountingCandidate>(c_, i));
    return out;
  }

 private:
  Counters& c_;
};

class CountingEngine final : public Engine {
 public:
  Counters c;
  std::string_view name() const override { return "counting"; }
  bool runs_on(const Device& d) const override { return d.kind == Device::Kind::CPU; }
  Result<std::unique_ptr<LoweredGraph>> lower(const ir::ValidatedGraphPtr&, Handle&) override {
    return std::unique_ptr<LoweredGraph>(std::make_unique<CountingLowered>(c));
  }
};

// Registers a fresh counting engine for one test.
struct LazyBuild : ::testing::Test {
  CountingEngine engine;
  Graph g;
  HandlePtr h = Handle::create(Device::cpu()).value();
  void SetUp() override {
    register_engine(&engine);
    g.set_name("lazy").set_io_data_type(DataType::Float);
    auto x = g.tensor(ir::TensorAttrs().set_name("X").set_dim({2, 3}).set_stride({3, 1}));
    g.relu(x)->set_output(true).set_name("Y");
  }
  void TearDown() override { unregister_engine(&engine); }
  void plan() {
    ASSERT_TRUE(g.build_operation_graph(h).is_ok());
    ASSERT_TRUE(g.create_execution_plans({HeurMode::A}).is_ok());
  }
};

TEST_F(LazyBuild, CheckSupportStopsAtTheFirstSupportedCandidate) {
  engine.c.unsupported = {0, 1};
  plan();
  ASSERT_TRUE(g.check_support().is_ok());
  EXPECT_EQ(engine.c.checks, 3);  // c0, c1 refused, c2 accepted; c3..c5 untouched
  EXPECT_EQ(engine.c.builds, 0);
}

TEST_F(LazyBuild, HeuristicsChoiceBuildsOnlyTheFirstThatBuilds) {
  engine.c.unsupported = {0};
  engine.c.failing_builds = {1};
  plan();
  ASSERT_TRUE(g.check_support().is_ok());
  ASSERT_TRUE(g.build_plans(BuildPlanPolicy::HeuristicsChoice).is_ok());
  EXPECT_EQ(engine.c.builds, 2);  // c1 failed, c2 built
  EXPECT_EQ(engine.c.checks, 3);
  EXPECT_EQ(g.selected_plan_index(), 1);  // index among supported candidates: c1, c2, ...
  EXPECT_EQ(g.get_workspace_size().value(), 32);
}

// [A, FALLBACK] where FALLBACK proposes nothing builds from A's candidates (on the H200 every
// sdpa_backward built from Python failed this way); only when every mode fails is it an error.
TEST_F(LazyBuild, AModeThatProposesNothingIsSkipped) {
  engine.c.empty_modes = {HeurMode::Fallback};
  ASSERT_TRUE(g.build_operation_graph(h).is_ok());
  ASSERT_TRUE(g.create_execution_plans({HeurMode::A, HeurMode::Fallback}).is_ok());
  ASSERT_TRUE(g.check_support().is_ok());
  EXPECT_EQ(g.candidates().size(), 6u);
  ASSERT_TRUE(g.create_execution_plans({HeurMode::Fallback, HeurMode::A}).is_ok());
  ASSERT_TRUE(g.check_support().is_ok());
  EXPECT_EQ(g.candidates().size(), 6u);
  const Status s = g.create_execution_plans({HeurMode::Fallback});
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("proposed none"), std::string::npos) << s.message();
}

TEST_F(LazyBuild, PlanCountAndReportsCoverEveryCandidate) {
  engine.c.unsupported = {0, 3};
  plan();
  ASSERT_TRUE(g.check_support().is_ok());
  ASSERT_TRUE(g.build_plans().is_ok());
  EXPECT_EQ(engine.c.builds, 1);
  EXPECT_EQ(g.get_execution_plan_count(), 4);  // c1, c2, c4, c5
  EXPECT_EQ(engine.c.checks, 6);
  ASSERT_EQ(g.candidates().size(), 6u);
  EXPECT_FALSE(g.candidates()[0].support.is_ok());
  EXPECT_NE(g.candidates()[3].support.message().find("c3 refuses"), std::string::npos);
  EXPECT_TRUE(g.candidates()[1].built);
  EXPECT_FALSE(g.candidates()[2].built);
  // A later index builds on demand, in the same numbering.
  ASSERT_TRUE(g.build_plan_at_index(2).is_ok());
  EXPECT_EQ(g.get_workspace_size_plan_at_index(2).value(), 16 * 4);
  EXPECT_EQ(engine.c.builds, 2);
}

TEST_F(LazyBuild, BuildPlanAtIndexChecksOnlyAsFarAsNeeded) {
  engine.c.unsupported = {1};
  plan();
  ASSERT_TRUE(g.check_support().is_ok());
  ASSERT_TRUE(g.build_plan_at_index(2).is_ok());  // c0, c2, c3: index 2 is c3
  EXPECT_EQ(engine.c.checks, 4);
  EXPECT_EQ(g.get_workspace_size_plan_at_index(2).value(), 48);
  Status s = g.build_plan_at_index(9);
  EXPECT_EQ(s.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(s.message().find("[0, 5)"), std::string::npos) << s.message();
}

TEST_F(LazyBuild, AllBuildsEverySupportedCandidate) {
  engine.c.unsupported = {2};
  engine.c.failing_builds = {4};
  plan();
  ASSERT_TRUE(g.check_support().is_ok());
  ASSERT_TRUE(g.build_plans(BuildPlanPolicy::All).is_ok());
  EXPECT_EQ(engine.c.checks, 6);
  EXPECT_EQ(engine.c.builds, 5);
  EXPECT_EQ(g.selected_plan_index(), 0);
  int built = 0;
  for (const auto& c : g.candidates()) built += c.built;
  EXPECT_EQ(built, 4);
}

TEST_F(LazyBuild, NothingSupportedListsEveryReason) {
  engine.c.unsupported = {0, 1, 2, 3, 4, 5};
  plan();
  Status s = g.check_support();
  EXPECT_EQ(s.code(), ErrorCode::NotSupported);
  EXPECT_NE(s.message().find("c5 refuses"), std::string::npos) << s.message();
  EXPECT_EQ(g.get_execution_plan_count(), 0);
}

TEST_F(LazyBuild, NothingBuildsIsAnError) {
  engine.c.failing_builds = {0, 1, 2, 3, 4, 5};
  plan();
  ASSERT_TRUE(g.check_support().is_ok());
  Status s = g.build_plans();
  EXPECT_EQ(s.code(), ErrorCode::NotSupported);
  EXPECT_NE(s.message().find("c5 failed to build"), std::string::npos) << s.message();
  EXPECT_EQ(engine.c.builds, 6);
}

}  // namespace
}  // namespace dnngraph
