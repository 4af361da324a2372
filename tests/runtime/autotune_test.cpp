// The autotuner and the plan filters without a GPU: an engine whose candidates take known
// times stands in for cuDNN (the tuner must pick the fastest, reuse its recorded choice without
// timing anything, respect the budget, the workspace and the filters, rotate input copies), and
// the reference engine is tuned for real (one candidate, timed, results checked).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <random>
#include <set>

#include "dnngraph/dnngraph.hpp"
#include "dnngraph/plan_cache.hpp"
#include "engines/registry.hpp"
#include "runtime/fake_engine.hpp"

namespace dnngraph {
namespace {

struct Record {
  int64_t executions = 0;
  std::set<const void*> inputs_seen;
};

void spin_us(double us) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double, std::micro>(us);
  while (std::chrono::steady_clock::now() < end) {
  }
}

// Candidate i takes kMicros[i] per call, needs 64 * i bytes of workspace and writes i + 1 to
// Y[0] (so a test sees which plan ran).
constexpr double kMicros[] = {900, 150, 500};

class TimedPlan final : public Plan {
 public:
  TimedPlan(Record& r, int i) : r_(r), i_(i) {}
  std::string name() const override { return "t" + std::to_string(i_); }
  int64_t workspace_size() const override { return 64 * i_; }
  Status execute(Handle&, const VariantPack& pack, void*) override {
    ++r_.executions;
    r_.inputs_seen.insert(pack.at(1));
    spin_us(kMicros[i_]);
    static_cast<float*>(pack.at(2))[0] = static_cast<float>(i_ + 1);
    return Status::ok();
  }

 private:
  Record& r_;
  int i_;
};

class TimedCandidate final : public Candidate {
 public:
  TimedCandidate(Record& r, int i) : r_(r), i_(i) {
    info_.engine = "timed";
    info_.name = "t" + std::to_string(i) + " K=" + std::to_string(i);
    info_.numerical_notes = {i == 2 ? "TENSOR_CORE" : "FP32"};
    info_.behavior_notes = {i == 0 ? "RUNTIME_COMPILATION" : "SUPPORTS_CUDA_GRAPH_NATIVE_API"};
  }
  const CandidateInfo& info() const override { return info_; }
  Status check_support() override { return Status::ok(); }
  Result<std::unique_ptr<Plan>> build() override {
    return std::unique_ptr<Plan>(std::make_unique<TimedPlan>(r_, i_));
  }

 private:
  Record& r_;
  int i_;
  CandidateInfo info_;
};

class TimedEngine final : public Engine {
 public:
  Record r;
  std::string_view name() const override { return "timed"; }
  bool runs_on(const Device& d) const override { return d.kind == Device::Kind::CPU; }
  Result<std::unique_ptr<LoweredGraph>> lower(const ir::ValidatedGraphPtr&, Handle&) override {
    return test::propose<TimedCandidate>(r);
  }
  Result<std::unique_ptr<PlanTimer>> make_timer(Handle&) override { return make_host_timer(); }
};

template <class F>
AutotuneOptions options(F f) {
  AutotuneOptions o;
  f(o);
  return o;
}

struct Tune : test::EngineTest<TimedEngine> {
  std::vector<float> x = std::vector<float>(6, 0.5f), y = std::vector<float>(6, -1.f);
  std::vector<char> ws = std::vector<char>(256);
  VariantPack pack{{1, x.data()}, {2, y.data()}};
  static void make(Graph& g, int64_t n = 2) {
    g.set_name("tuned").set_io_data_type(DataType::Float);
    auto t =
        g.tensor(ir::TensorAttrs().set_name("X").set_dim({n, 3}).set_stride({3, 1}).set_uid(1));
    g.relu(t)->set_output(true).set_name("Y").set_uid(2);
  }
  void plan(Graph& g) {
    ASSERT_TRUE(g.build_operation_graph(h).is_ok());
    ASSERT_TRUE(g.create_execution_plans({HeurMode::A}).is_ok());
  }
  Result<AutotuneReport> tune(Graph& g, AutotuneOptions o = {}) {
    o.iterations = 4;
    o.warmup = 1;
    return g.autotune(*h, pack, ws.data(), static_cast<int64_t>(ws.size()), o);
  }
};

TEST_F(Tune, PicksTheFastestCandidateAndReportsEach) {
  Graph g;
  make(g);
  plan(g);
  auto r = tune(g);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->candidates.size(), 3u);
  EXPECT_EQ(r->selected_name, "t1 K=1");
  EXPECT_EQ(g.selected_plan_index(), r->selected);
  EXPECT_FALSE(r->from_cache);
  for (int i = 0; i < 3; ++i) {
    const auto& c = r->candidates[static_cast<size_t>(i)];
    EXPECT_TRUE(c.status.is_ok()) << c.status.to_string();
    EXPECT_GE(c.runs, 4);
    EXPECT_EQ(c.workspace_size, 64 * i);
    // Spinning takes at least the time asked for; the median stays near it.
    EXPECT_GE(c.median_ms, kMicros[i] / 1000.0 * 0.99) << c.name;
    EXPECT_LE(c.min_ms, c.median_ms);
  }
  EXPECT_GE(r->timed_runs, 12);
  EXPECT_EQ(r->flush_bytes, 0);  // host timer: nothing to flush
  ASSERT_TRUE(g.execute(*h, pack, ws.data()).is_ok());
  EXPECT_EQ(y[0], 2.f);  // t1 ran
}

TEST_F(Tune, ASecondTuneReusesTheRecordedChoiceWithoutTiming) {
  Graph a;
  make(a);
  plan(a);
  ASSERT_TRUE(tune(a).is_ok());
  const int64_t runs = engine.r.executions;
  Graph b;
  make(b);
  plan(b);
  auto r = tune(b);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_TRUE(r->from_cache);
  EXPECT_EQ(r->timed_runs, 0);
  EXPECT_EQ(engine.r.executions, runs);  // nothing ran
  EXPECT_EQ(r->selected_name, "t1 K=1");
  EXPECT_GT(r->selected_ms, 0);
  ASSERT_TRUE(b.execute(*h, pack, ws.data()).is_ok());
  EXPECT_EQ(y[0], 2.f);
  // Another shape is another graph: timed again.
  Graph c;
  make(c, 3);
  plan(c);
  std::vector<float> x3(9, 1.f), y3(9);
  VariantPack p3{{1, x3.data()}, {2, y3.data()}};
  auto r3 = c.autotune(*h, p3, ws.data(), 256, AutotuneOptions{});
  ASSERT_TRUE(r3.is_ok());
  EXPECT_FALSE(r3->from_cache);
  // use_cache = false times again.
  AutotuneOptions o;
  o.use_cache = false;
  auto r4 = tune(b, o);
  ASSERT_TRUE(r4.is_ok());
  EXPECT_FALSE(r4->from_cache);
  EXPECT_GT(r4->timed_runs, 0);
}

#ifdef DNNGRAPH_WITH_SQLITE
TEST_F(Tune, ANewProcessReadsTheChoiceFromDisk) {
  Graph a;
  make(a);
  plan(a);
  ASSERT_TRUE(tune(a).is_ok());
  PlanCache::reset_global();  // memory forgotten, as in a new process
  Graph b;
  make(b);
  plan(b);
  const int64_t runs = engine.r.executions;
  auto r = tune(b);
  ASSERT_TRUE(r.is_ok());
  EXPECT_TRUE(r->from_cache);
  EXPECT_EQ(engine.r.executions, runs);
  EXPECT_EQ(PlanCache::global()->stats().disk_hits, 1);
}
#endif

TEST_F(Tune, TheBudgetLeavesTheRestUntimed) {
  Graph g;
  make(g);
  plan(g);
  AutotuneOptions o;
  o.budget_ms = 0.5;  // spent during the first candidate (0.9 ms a call)
  auto r = tune(g, o);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_TRUE(r->budget_spent);
  EXPECT_EQ(r->selected_name, "t0 K=0");  // the only one timed
  EXPECT_EQ(r->candidates[0].runs, 1);
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_FALSE(r->candidates[i].status.is_ok());
    EXPECT_NE(r->candidates[i].status.message().find("budget"), std::string::npos);
  }
}

TEST_F(Tune, CandidatesNeedingMoreWorkspaceAreNotTimed) {
  Graph g;
  make(g);
  plan(g);
  EXPECT_EQ(g.get_autotune_workspace_size().value(), 128);
  auto r = g.autotune(*h, pack, ws.data(), 64, AutotuneOptions{});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->selected_name, "t1 K=1");
  EXPECT_NE(r->candidates[2].status.message().find("needs 128 bytes of workspace"),
            std::string::npos)
      << r->candidates[2].status.message();
  auto none =
      g.autotune(*h, pack, nullptr, 0, options([](AutotuneOptions& o) { o.use_cache = false; }));
  ASSERT_TRUE(none.is_ok());
  EXPECT_EQ(none->selected_name, "t0 K=0");  // the only one without workspace
}

TEST_F(Tune, FiltersDecideWhatIsTunedAndKeyTheCache) {
  Graph g;
  make(g);
  g.deselect_engines({"t1"});  // by engine id
  plan(g);
  auto r = tune(g);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->candidates.size(), 2u);
  EXPECT_EQ(r->selected_name, "t2 K=2");
  Graph u;  // unfiltered: its own cache entry, so it is timed
  make(u);
  plan(u);
  auto ru = tune(u);
  ASSERT_TRUE(ru.is_ok());
  EXPECT_FALSE(ru->from_cache);
  EXPECT_EQ(ru->selected_name, "t1 K=1");
}

TEST_F(Tune, InputCopiesRotate) {
  Graph g;
  make(g);
  plan(g);
  AutotuneOptions o;
  o.rotate_inputs = 2;
  o.use_cache = false;
  auto r = tune(g, o);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->rotated_copies, 2);
  EXPECT_EQ(engine.r.inputs_seen.size(), 3u);  // the caller's X and two copies
  // A budget too small for one copy: none.
  engine.r.inputs_seen.clear();
  o.rotate_budget_bytes = 8;
  r = tune(g, o);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->rotated_copies, 0);
  EXPECT_EQ(engine.r.inputs_seen.size(), 1u);
}

TEST_F(Tune, BadOptionsAndOrderAreErrors) {
  Graph g;
  make(g);
  auto early = tune(g);
  ASSERT_FALSE(early.is_ok());
  EXPECT_NE(early.status().message().find("build_operation_graph"), std::string::npos);
  plan(g);
  for (AutotuneOptions o : {options([](AutotuneOptions& o) { o.warmup = -1; }),
                            options([](AutotuneOptions& o) { o.iterations = 0; }),
                            options([](AutotuneOptions& o) { o.budget_ms = -1; }),
                            options([](AutotuneOptions& o) { o.rotate_inputs = -2; })}) {
    auto r = g.autotune(*h, pack, ws.data(), 256, o);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), ErrorCode::InvalidArgument);
    EXPECT_NE(r.status().message().find("out of range"), std::string::npos);
  }
  VariantPack missing{{1, x.data()}};
  auto r = g.autotune(*h, missing, ws.data(), 256, AutotuneOptions{});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("'Y'"), std::string::npos) << r.status().message();
}

// ---- plan filters on the pipeline
TEST_F(Tune, FiltersSkipCandidatesWithTheReason) {
  Graph g;
  make(g);
  g.deselect_behavior_notes({"RUNTIME_COMPILATION"}).select_numeric_notes({"TENSOR_CORE"});
  plan(g);
  ASSERT_TRUE(g.check_support().is_ok());
  ASSERT_EQ(g.get_execution_plan_count(), 1);
  ASSERT_TRUE(g.build_plans().is_ok());
  EXPECT_EQ(g.candidates()[0].support.message().find("deselected") != std::string::npos, true);
  EXPECT_NE(g.candidates()[1].support.message().find("TENSOR_CORE"), std::string::npos);
  ASSERT_TRUE(g.execute(*h, pack, ws.data()).is_ok());
  EXPECT_EQ(y[0], 3.f);
  // Changing a filter after check_support re-checks: check_support must run again.
  g.deselect_numeric_notes({"TENSOR_CORE"});
  EXPECT_FALSE(g.build_plans().is_ok());
  Status s = g.check_support();
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), ErrorCode::NotSupported);
  EXPECT_NE(s.message().find("deselect_numeric_notes"), std::string::npos) << s.message();
}

TEST_F(Tune, WorkspaceLimitKnownOnlyOnceBuilt) {
  Graph g;
  make(g);
  g.deselect_workspace_greater_than(64);
  plan(g);
  ASSERT_TRUE(g.check_support().is_ok());
  ASSERT_TRUE(g.build_plans(BuildPlanPolicy::All).is_ok());
  Status s = g.build_plan_at_index(2);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("needs 128 bytes of workspace"), std::string::npos) << s.message();
  EXPECT_FALSE(g.candidates()[2].built);
  EXPECT_EQ(g.plan_filters().max_workspace, 64);
}

// ---- the reference engine, tuned for real
TEST(TuneReference, OneCandidateTimedWithCorrectResults) {
  setenv("DNNGRAPH_CACHE", "0", 1);
  PlanCache::reset_global();
  auto h = Handle::create(Device::cpu()).value();
  Graph g;
  g.set_name("ref_tune").set_io_data_type(DataType::Float);
  auto a = g.tensor(
      ir::TensorAttrs().set_name("A").set_dim({1, 4, 4}).set_stride({16, 4, 1}).set_uid(1));
  auto y = g.relu(g.matmul(a, a));
  y->set_output(true).set_name("Y").set_uid(2);
  ASSERT_TRUE(g.build(h).is_ok());
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> av(16), yv(16, std::numeric_limits<float>::quiet_NaN());
  for (float& v : av) v = d(gen);
  const int64_t need = g.get_autotune_workspace_size().value();
  std::vector<char> ws(static_cast<size_t>(std::max<int64_t>(need, 1)));
  VariantPack pack{{1, av.data()}, {2, yv.data()}};
  AutotuneOptions o;
  o.rotate_inputs = 1;
  auto r = g.autotune(*h, pack, ws.data(), need, o);
  unsetenv("DNNGRAPH_CACHE");
  PlanCache::reset_global();
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->candidates.size(), 1u);
  EXPECT_EQ(r->selected_name, "reference");
  EXPECT_GT(r->candidates[0].median_ms, 0);
  EXPECT_EQ(r->rotated_copies, 1);
  ASSERT_TRUE(g.execute(*h, pack, ws.data(), need).is_ok());
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      double s = 0;
      for (int k = 0; k < 4; ++k) s += double(av[i * 4 + k]) * av[k * 4 + j];
      EXPECT_NEAR(yv[i * 4 + j], std::max(s, 0.0), 1e-5);
    }
}

TEST(CudaGraphs, OnTheReferenceEngineAClearErrorAndExecuteFallsBack) {
  auto h = Handle::create(Device::cpu()).value();
  Graph g;
  g.set_name("cg").set_io_data_type(DataType::Float);
  auto a = g.tensor(ir::TensorAttrs().set_name("A").set_dim({2, 3}).set_stride({3, 1}).set_uid(1));
  g.relu(a)->set_output(true).set_name("Y").set_uid(2);
  std::vector<float> av{-1.5f, 2.f, 0.25f, -3.f, 4.5f, 1.f}, yv(6, -7.f);
  VariantPack pack{{1, av.data()}, {2, yv.data()}};
  int fake_graph = 0;
  Status early = g.populate_cuda_graph(*h, pack, nullptr, &fake_graph);
  EXPECT_NE(early.message().find("before build_plans"), std::string::npos) << early.message();
  ASSERT_TRUE(g.build(h).is_ok());
  Status s = g.populate_cuda_graph(*h, pack, nullptr, &fake_graph);
  EXPECT_EQ(s.code(), ErrorCode::NotSupported);
  EXPECT_NE(s.message().find("cannot record CUDA graphs"), std::string::npos) << s.message();
  s = g.update_cuda_graph(*h, pack, nullptr, nullptr);
  EXPECT_EQ(s.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(s.message().find("null"), std::string::npos) << s.message();
  g.set_cuda_graph_execute(true);
  EXPECT_TRUE(g.cuda_graph_execute());
  EXPECT_EQ(g.cuda_graph_execute_mode(), CudaGraphExecute::Always);
  ASSERT_TRUE(g.execute(*h, pack, nullptr).is_ok());
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(yv[i], std::max(av[i], 0.f));
  g.set_cuda_graph_execute(CudaGraphExecute::Repeated);
  EXPECT_EQ(g.cuda_graph_execute_mode(), CudaGraphExecute::Repeated);
  for (int k = 0; k < 3; ++k) {  // the same pointers again and again: still direct on the CPU
    std::fill(yv.begin(), yv.end(), -7.f);
    ASSERT_TRUE(g.execute(*h, pack, nullptr).is_ok());
    for (size_t i = 0; i < 6; ++i) EXPECT_EQ(yv[i], std::max(av[i], 0.f));
  }
  const CudaGraphExecuteStats st = g.cuda_graph_execute_stats();
  EXPECT_EQ(st.replayed + st.recorded + st.direct, 0);  // the reference engine records nothing
  g.set_cuda_graph_execute(false);
  EXPECT_FALSE(g.cuda_graph_execute());
}

}  // namespace
}  // namespace dnngraph
