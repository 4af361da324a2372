// The plan cache without a GPU: the SQLite store (round trip, corrupt rows, a corrupt file,
// 8 processes at once), the LRU, and Graph::build restoring a plan from it (an engine that
// serializes its plans stands in for cuDNN).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "dnngraph/dnngraph.hpp"
#include "dnngraph/plan_cache.hpp"
#include "engines/registry.hpp"
#include "runtime/fake_engine.hpp"

#ifdef DNNGRAPH_WITH_SQLITE
#include <sqlite3.h>
#endif

namespace dnngraph {
namespace {

std::string temp_dir(const char* tag) {
  auto d = std::filesystem::path(::testing::TempDir()) /
           ("dnngraph_pc_" + std::string(tag) + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(d);
  return d.string();
}

PlanCacheEntry entry(int i) {
  return {"eng" + std::to_string(i), 0.5 * i, std::string(1000 + i, static_cast<char>('a' + i))};
}

TEST(PlanCacheLru, EvictsTheLeastRecentlyUsed) {
  PlanCache c(2, "");
  c.put("a", entry(1));
  c.put("b", entry(2));
  ASSERT_TRUE(c.get("a"));  // a is now the most recent
  c.put("c", entry(3));     // evicts b
  EXPECT_FALSE(c.get("b"));
  ASSERT_TRUE(c.get("a"));
  EXPECT_EQ(c.get("c")->engine_config, "eng3");
  EXPECT_EQ(c.stats().memory_hits, 3);
  EXPECT_EQ(c.stats().misses, 1);
  EXPECT_EQ(c.disk_path(), "");
}

#ifdef DNNGRAPH_WITH_SQLITE
TEST(PlanStore, RoundTripAndErase) {
  const std::string dir = temp_dir("rt");
  auto s = PlanStore::open(dir + "/p.sqlite3");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  ASSERT_TRUE((*s)->put("k1", entry(1)).is_ok());
  ASSERT_TRUE((*s)->put("k2", entry(2)).is_ok());
  ASSERT_TRUE((*s)->put("k2", entry(3)).is_ok());  // replaced
  EXPECT_EQ((*s)->size().value(), 2);
  auto g = (*s)->get("k2");
  ASSERT_TRUE(g.is_ok() && g->has_value());
  EXPECT_EQ((*g)->engine_config, "eng3");
  EXPECT_EQ((*g)->time_ms, 1.5);
  EXPECT_EQ((*g)->plan, entry(3).plan);
  EXPECT_FALSE((*s)->get("absent")->has_value());
  ASSERT_TRUE((*s)->erase("k1").is_ok());
  EXPECT_FALSE((*s)->get("k1")->has_value());
  std::filesystem::remove_all(dir);
}

TEST(PlanStore, BoundedByBytesDropsTheLeastRecentlyUsed) {
  const std::string dir = temp_dir("bound");
  const int64_t row = 1013;  // key "kN", "engN", 1000+N bytes of plan: about this much each
  auto s = PlanStore::open(dir + "/p.sqlite3", 10 * row + 400).value();
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(s->put("k" + std::to_string(i), entry(i)).is_ok());
  EXPECT_EQ(s->size().value(), 10);               // under the bound: nothing dropped
  ASSERT_TRUE(s->get("k0").value().has_value());  // k0 used again: now the most recent
  ASSERT_TRUE(s->put("k10", entry(10)).is_ok());  // past the bound: down to 90% of it
  EXPECT_LE(s->bytes().value(), 9 * row + 360);
  EXPECT_TRUE(s->get("k0").value().has_value());
  EXPECT_FALSE(s->get("k1").value().has_value());  // the least recently used went first
  EXPECT_FALSE(s->get("k2").value().has_value());
  EXPECT_TRUE(s->get("k3").value().has_value());
  EXPECT_TRUE(s->get("k10").value().has_value());
  for (int i = 11; i < 200; ++i) {  // a stream of new shapes: the file stays bounded
    ASSERT_TRUE(s->put("k" + std::to_string(i), entry(i % 20)).is_ok());
    ASSERT_LE(s->bytes().value(), 10 * row + 400) << i;
  }
  EXPECT_TRUE(s->get("k199").value().has_value());
  std::filesystem::remove_all(dir);
}

// The bound's measure is a running total kept by triggers: it must equal the rows' bytes after
// inserts, replacements, updates by another connection and deletes, and start from the rows a
// file already holds.
TEST(PlanStore, TheBytesAreARunningTotalOfTheRows) {
  const std::string dir = temp_dir("total");
  const std::string path = dir + "/p.sqlite3";
  auto exact = [&] {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db,
                                 "SELECT COALESCE(SUM(LENGTH(key) + LENGTH(engine_config) + "
                                 "LENGTH(plan)), 0) FROM plans",
                                 -1, &st, nullptr),
              SQLITE_OK);
    EXPECT_EQ(sqlite3_step(st), SQLITE_ROW);
    const int64_t n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return n;
  };
  {  // rows written before the total existed
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "CREATE TABLE plans (key TEXT PRIMARY KEY, engine_config TEXT NOT NULL, "
                           "time_ms REAL NOT NULL, plan BLOB NOT NULL, checksum INTEGER NOT NULL, "
                           "created INTEGER NOT NULL DEFAULT 0, used INTEGER NOT NULL DEFAULT 0);"
                           "INSERT INTO plans (key, engine_config, time_ms, plan, checksum) "
                           "VALUES ('old', 'eng7', 1.0, x'00112233', 0)",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  auto s = PlanStore::open(path).value();
  EXPECT_EQ(s->bytes().value(), 3 + 4 + 4);
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    const std::string key = "k" + std::to_string(rng() % 40);  // replacements among new rows
    if (rng() % 5 == 0)
      ASSERT_TRUE(s->erase(key).is_ok());
    else
      ASSERT_TRUE(s->put(key, entry(static_cast<int>(rng() % 30))).is_ok());
  }
  {  // another connection rewrites a plan in place
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "UPDATE plans SET plan = x'00' WHERE key = 'old'", nullptr, nullptr,
                           nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  EXPECT_EQ(s->bytes().value(), exact());
  EXPECT_GT(s->bytes().value(), 0);
  std::filesystem::remove_all(dir);
}

TEST(PlanStore, AFileWithoutLastUseTimesGainsThem) {
  const std::string dir = temp_dir("old");
  const std::string path = dir + "/p.sqlite3";
  {  // the table as files written before the bound have it, with one row
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "CREATE TABLE plans (key TEXT PRIMARY KEY, engine_config TEXT NOT NULL, "
                           "time_ms REAL NOT NULL, plan BLOB NOT NULL, checksum INTEGER NOT NULL, "
                           "created INTEGER NOT NULL DEFAULT (strftime('%s','now')))",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
    auto s = PlanStore::open(path).value();  // unbounded: adds the column all the same
    ASSERT_TRUE(s->put("old", entry(1)).is_ok());
  }
  auto s = PlanStore::open(path, 3 * 1013).value();
  EXPECT_TRUE(s->get("old").value().has_value());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(s->put("n" + std::to_string(i), entry(i)).is_ok());
  EXPECT_LE(s->bytes().value(), 3 * 1013);
  EXPECT_FALSE(s->get("old").value().has_value());
  EXPECT_TRUE(s->get("n4").value().has_value());
  auto again = PlanStore::open(path, 3 * 1013);  // a second open finds the column there
  EXPECT_TRUE(again.is_ok()) << again.status().to_string();
  std::filesystem::remove_all(dir);
}

TEST(PlanStore, TheGlobalCacheTakesItsBoundFromTheEnvironment) {
  const std::string dir = temp_dir("envbound");
  const char* mode = std::getenv("DNNGRAPH_CACHE");
  const std::string saved = mode ? mode : "";
  unsetenv("DNNGRAPH_CACHE");  // the disk cache on, whatever the caller's environment says
  setenv("DNNGRAPH_CACHE_DIR", dir.c_str(), 1);
  setenv("DNNGRAPH_CACHE_DISK_MB", "1", 1);
  PlanCache::reset_global();
  PlanCache* c = PlanCache::global();
  ASSERT_NE(c, nullptr);
  const PlanCacheEntry big{"eng", -1, std::string(300 * 1024, 'p')};  // 300 KB each
  for (int i = 0; i < 8; ++i) c->put("k" + std::to_string(i), big);
  auto store = PlanStore::open(c->disk_path()).value();
  EXPECT_LE(store->bytes().value(), 1 << 20);
  EXPECT_GE(store->size().value(), 2);
  setenv("DNNGRAPH_CACHE_DISK_MB", "lots", 1);  // not a number: a warning, the default bound
  PlanCache::reset_global();
  testing::internal::CaptureStderr();
  EXPECT_NE(PlanCache::global(), nullptr);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("DNNGRAPH_CACHE_DISK_MB='lots' is not a number of megabytes"),
            std::string::npos)
      << err;
  unsetenv("DNNGRAPH_CACHE_DISK_MB");
  unsetenv("DNNGRAPH_CACHE_DIR");
  if (mode) setenv("DNNGRAPH_CACHE", saved.c_str(), 1);
  PlanCache::reset_global();
  std::filesystem::remove_all(dir);
}

TEST(PlanStore, CorruptRowIsDroppedWithAWarning) {
  const std::string dir = temp_dir("row");
  const std::string path = dir + "/p.sqlite3";
  {
    auto s = PlanStore::open(path).value();
    ASSERT_TRUE(s->put("k", entry(4)).is_ok());
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE plans SET plan = X'00112233' WHERE key = 'k'", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto s = PlanStore::open(path).value();
  std::string warning;
  auto g = s->get("k", &warning);
  ASSERT_TRUE(g.is_ok());
  EXPECT_FALSE(g->has_value());
  EXPECT_NE(warning.find("corrupt"), std::string::npos) << warning;
  EXPECT_EQ(s->size().value(), 0);  // dropped
  std::filesystem::remove_all(dir);
}

TEST(PlanStore, ACorruptFileIsMovedAsideAndReplaced) {
  const std::string dir = temp_dir("file");
  {
    std::ofstream f(dir + "/plans.sqlite3", std::ios::binary);
    f << std::string(4096, '\x5a');  // not a database
  }
  ::testing::internal::CaptureStderr();  // the warning this test expects
  PlanCache c(4, dir);
  const std::string warned = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warned.find("[dnngraph] warning: plan cache: '" + dir +
                        "/plans.sqlite3' is not a usable plan cache"),
            std::string::npos)
      << warned;
  EXPECT_NE(warned.find("moved to '" + dir + "/plans.sqlite3.corrupt."), std::string::npos)
      << warned;
  ASSERT_NE(c.disk_path(), "");
  c.put("k", entry(5));
  PlanCache again(4, dir);  // a new process, in effect
  auto g = again.get("k");
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->plan, entry(5).plan);
  int aside = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir))
    aside += f.path().filename().string().find(".corrupt.") != std::string::npos;
  EXPECT_EQ(aside, 1);
  std::filesystem::remove_all(dir);
}

TEST(PlanStore, EightProcessesAtOnce) {
  const std::string dir = temp_dir("procs");
  std::vector<pid_t> kids;
  for (int p = 0; p < 8; ++p) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      PlanCache c(4, dir);  // all open (and maybe create) the file together
      int bad = c.disk_path().empty() ? 1 : 0;
      for (int i = 0; i < 40; ++i) {
        const std::string key = "k" + std::to_string(i % 10);
        c.put(key, entry(i % 10));
        PlanCache fresh(1, dir);
        auto g = fresh.get(key);
        if (g && g->plan != entry(i % 10).plan) bad = 1;
      }
      if (c.stats().dropped) bad = 1;
      _exit(bad);
    }
    kids.push_back(pid);
  }
  for (pid_t k : kids) {
    int st = 0;
    ASSERT_EQ(waitpid(k, &st, 0), k);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
  }
  auto s = PlanStore::open(dir + "/plans.sqlite3").value();
  EXPECT_EQ(s->size().value(), 10);
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(s->get("k" + std::to_string(i)).value()->plan, entry(i).plan);
  std::filesystem::remove_all(dir);
}
#endif

// ---- Graph::build with the cache: an engine whose plans serialize to their candidate index.
struct Calls {
  int builds = 0, loads = 0;
  bool refuse_loads = false;
  int32_t lowered_sm_count = 0;  // the SM count target of the last graph lowered or restored
};

class SerialPlan final : public Plan {
 public:
  explicit SerialPlan(int i) : i_(i) {}
  std::string name() const override { return "s" + std::to_string(i_); }
  int64_t workspace_size() const override { return 8 * (i_ + 1); }
  Status execute(Handle&, const VariantPack&, void*) override { return Status::ok(); }
  Result<std::string> serialize() const override { return "plan-" + std::to_string(i_); }

 private:
  int i_;
};

class SerialCandidate final : public Candidate {
 public:
  SerialCandidate(Calls& c, int i) : c_(c), i_(i) { info_.name = "s" + std::to_string(i); }
  const CandidateInfo& info() const override { return info_; }
  Status check_support() override {
    return i_ == 0 ? make_error(ErrorCode::NotSupported, "no") : Status::ok();
  }
  Result<std::unique_ptr<Plan>> build() override {
    ++c_.builds;
    return std::unique_ptr<Plan>(std::make_unique<SerialPlan>(i_));
  }

 private:
  Calls& c_;
  int i_;
  CandidateInfo info_;
};

class SerialLowered final : public LoweredGraph {
 public:
  explicit SerialLowered(Calls& c) : c_(c) {}
  Result<std::vector<std::unique_ptr<Candidate>>> candidates(HeurMode) override {
    std::vector<std::unique_ptr<Candidate>> v;
    for (int i = 0; i < 3; ++i) v.push_back(std::make_unique<SerialCandidate>(c_, i));
    return v;
  }
  Result<int64_t> engine_count() override { return 3; }
  Result<std::unique_ptr<Candidate>> engine_candidate(int64_t engine, const KnobChoices&) override {
    return std::unique_ptr<Candidate>(
        std::make_unique<SerialCandidate>(c_, static_cast<int>(engine)));
  }

 private:
  Calls& c_;
};

class SerialEngine final : public Engine {
 public:
  Calls c;
  std::string_view name() const override { return "serial"; }
  bool runs_on(const Device& d) const override { return d.kind == Device::Kind::CPU; }
  bool loads_plans() const override { return true; }
  Result<std::unique_ptr<LoweredGraph>> lower(const ir::ValidatedGraphPtr& g, Handle&) override {
    c.lowered_sm_count = g->sm_count();
    return std::unique_ptr<LoweredGraph>(std::make_unique<SerialLowered>(c));
  }
  Result<std::unique_ptr<Plan>> deserialize_plan(const ir::ValidatedGraphPtr& g, Handle&,
                                                 std::string_view bytes) override {
    ++c.loads;
    c.lowered_sm_count = g->sm_count();
    if (c.refuse_loads || bytes.substr(0, 5) != "plan-")
      return make_error(ErrorCode::NotSupported, "refused");
    return std::unique_ptr<Plan>(std::make_unique<SerialPlan>(std::atoi(bytes.data() + 5)));
  }
};

struct CachedBuild : test::EngineTest<SerialEngine> {
  static void make(Graph& g, int64_t n) {
    g.set_name("cached").set_io_data_type(DataType::Float);
    auto x = g.tensor(ir::TensorAttrs().set_name("X").set_dim({n, 3}).set_stride({3, 1}));
    g.relu(x)->set_output(true).set_name("Y");
  }
};

TEST_F(CachedBuild, ASecondBuildRestoresThePlan) {
  Graph a;
  make(a, 2);
  ASSERT_TRUE(a.build(h).is_ok());
  EXPECT_EQ(engine.c.builds, 1);
  Graph b;
  make(b, 2);
  ASSERT_TRUE(b.build(h).is_ok());
  EXPECT_EQ(engine.c.builds, 1);  // nothing built: restored
  EXPECT_EQ(engine.c.loads, 1);
  EXPECT_EQ(b.get_workspace_size().value(), 16);  // candidate s1
  EXPECT_EQ(b.candidates().at(0).info.name, "s1");
  Graph other;  // another shape: another key
  make(other, 3);
  ASSERT_TRUE(other.build(h).is_ok());
  EXPECT_EQ(engine.c.builds, 2);
}

// The key ends with the graph's fingerprint, which holds the SM count target: a plan built for
// one target is never restored for another (or for none), and the engine sees the target.
TEST_F(CachedBuild, AnotherSmCountTargetIsAnotherPlan) {
  auto build = [&](int32_t sm_count) {
    Graph g;
    make(g, 9);
    g.set_sm_count(sm_count);
    Status s = g.build(h);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_EQ(engine.c.lowered_sm_count, sm_count);
  };
  build(Graph::kAllSms);
  EXPECT_EQ(engine.c.builds, 1);
  build(8);
  EXPECT_EQ(engine.c.builds, 2);  // not the unset graph's plan
  build(32);
  EXPECT_EQ(engine.c.builds, 3);  // not the plan for 8
  EXPECT_EQ(engine.c.loads, 0);
  build(8);
  EXPECT_EQ(engine.c.builds, 3);  // the plan for 8, restored
  EXPECT_EQ(engine.c.loads, 1);
  build(Graph::kAllSms);
  EXPECT_EQ(engine.c.builds, 3);
  EXPECT_EQ(engine.c.loads, 2);
}

TEST_F(CachedBuild, ANewProcessReadsTheDisk) {
  Graph a;
  make(a, 4);
  ASSERT_TRUE(a.build(h).is_ok());
  PlanCache::reset_global();  // memory forgotten, as in a new process
  Graph b;
  make(b, 4);
  ASSERT_TRUE(b.build(h).is_ok());
  EXPECT_EQ(engine.c.builds, 1);
  EXPECT_EQ(PlanCache::global()->stats().disk_hits, 1);
}

TEST_F(CachedBuild, ARefusedPlanIsDroppedAndRebuilt) {
  Graph a;
  make(a, 5);
  ASSERT_TRUE(a.build(h).is_ok());
  engine.c.refuse_loads = true;
  Graph b;
  make(b, 5);
  ::testing::internal::CaptureStderr();  // the warning this test expects
  const Status built = b.build(h);
  const std::string warned = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(built.is_ok()) << built.to_string();
  EXPECT_NE(warned.find("[dnngraph] warning: plan cache: the stored plan of graph 'cached' could "
                        "not be restored (refused); the entry was dropped and the graph is "
                        "built again"),
            std::string::npos)
      << warned;
  EXPECT_EQ(engine.c.builds, 2);
  EXPECT_EQ(PlanCache::global()->stats().dropped, 1);
}

// The frontend's five steps share build()'s entries: HEURISTICS_CHOICE in build_plans restores
// what build() or an earlier step-by-step build stored (also from disk), instead of compiling.
TEST_F(CachedBuild, TheStepByStepFormUsesTheCache) {
  auto steps = [&](Graph& g, BuildPlanPolicy policy = BuildPlanPolicy::HeuristicsChoice) {
    make(g, 11);
    ASSERT_TRUE(g.build_operation_graph(h).is_ok());
    ASSERT_TRUE(g.create_execution_plans({HeurMode::A, HeurMode::Fallback}).is_ok());
    ASSERT_TRUE(g.check_support().is_ok());
    const Status s = g.build_plans(policy);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_EQ(g.get_workspace_size().value(), 16);  // candidate s1
  };
  Graph a;
  steps(a);
  EXPECT_EQ(engine.c.builds, 1);
  EXPECT_EQ(PlanCache::global()->stats().stores, 1);
  PlanCache::reset_global();  // a new process: the disk only
  Graph b;
  steps(b);
  EXPECT_EQ(engine.c.builds, 1);  // restored, not built
  EXPECT_EQ(engine.c.loads, 1);
  EXPECT_EQ(PlanCache::global()->stats().disk_hits, 1);
  Graph c;  // build() finds the step-by-step entry (one key for both forms)
  make(c, 11);
  ASSERT_TRUE(c.build(h).is_ok());
  EXPECT_EQ(engine.c.builds, 1);
  EXPECT_EQ(engine.c.loads, 2);
  Graph d;  // ALL builds every supported candidate and is never cached
  steps(d, BuildPlanPolicy::All);
  EXPECT_EQ(engine.c.builds, 3);
  EXPECT_EQ(engine.c.loads, 2);
  Graph e;  // other heuristics modes: another key
  make(e, 11);
  ASSERT_TRUE(e.build_operation_graph(h).is_ok());
  ASSERT_TRUE(e.create_execution_plans({HeurMode::B}).is_ok());
  ASSERT_TRUE(e.check_support().is_ok());
  ASSERT_TRUE(e.build_plans().is_ok());
  EXPECT_EQ(engine.c.builds, 4);
  // A candidate chosen by engine index: s2 is built, not the stored s1 restored, and not
  // stored under the heuristics' key (a later build() still restores s1).
  Graph f;
  make(f, 11);
  ASSERT_TRUE(f.build_operation_graph(h).is_ok());
  ASSERT_TRUE(f.create_execution_plan(2).is_ok());
  ASSERT_TRUE(f.check_support().is_ok());
  ASSERT_TRUE(f.build_plans().is_ok());
  EXPECT_EQ(engine.c.builds, 5);
  EXPECT_EQ(engine.c.loads, 2);
  EXPECT_EQ(f.get_workspace_size().value(), 24);  // candidate s2
  Graph g;
  make(g, 11);
  ASSERT_TRUE(g.build(h).is_ok());
  EXPECT_EQ(engine.c.loads, 3);
  EXPECT_EQ(g.get_workspace_size().value(), 16);  // s1
}

TEST_F(CachedBuild, DisabledByTheEnvironmentAndForAll) {
  setenv("DNNGRAPH_CACHE", "0", 1);
  PlanCache::reset_global();
  for (int i = 0; i < 2; ++i) {
    Graph g;
    make(g, 6);
    ASSERT_TRUE(g.build(h).is_ok());
  }
  EXPECT_EQ(engine.c.builds, 2);
  unsetenv("DNNGRAPH_CACHE");
  PlanCache::reset_global();
  for (int i = 0; i < 2; ++i) {
    Graph g;
    make(g, 7);
    ASSERT_TRUE(g.build(h, {HeurMode::A}, BuildPlanPolicy::All).is_ok());
  }
  EXPECT_EQ(engine.c.builds, 6);  // ALL builds s1 and s2 each time, never cached
  EXPECT_EQ(engine.c.loads, 0);
}

}  // namespace
}  // namespace dnngraph
