// Pieces of the test engines that stand in for cuDNN in the runtime tests (autotune, plan
// cache), whose candidates are the tests' own, and the fixture that registers one.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "dnngraph/dnngraph.hpp"
#include "dnngraph/plan_cache.hpp"
#include "engines/registry.hpp"

namespace dnngraph::test {

// A lowered graph that proposes candidates C(state, 0), ..., C(state, N - 1) for every
// heuristics mode.
template <class C, class State, int N = 3>
class ProposesCandidates final : public LoweredGraph {
 public:
  explicit ProposesCandidates(State& s) : s_(s) {}
  Result<std::vector<std::unique_ptr<Candidate>>> candidates(HeurMode) override {
    std::vector<std::unique_ptr<Candidate>> v;
    for (int i = 0; i < N; ++i) v.push_back(std::make_unique<C>(s_, i));
    return v;
  }

 private:
  State& s_;
};

// The lowering of such an engine: every graph to ProposesCandidates<C, State>.
template <class C, class State>
Result<std::unique_ptr<LoweredGraph>> propose(State& s) {
  return std::unique_ptr<LoweredGraph>(std::make_unique<ProposesCandidates<C, State>>(s));
}

// A new directory under the test temporary directory, named `prefix` and a random number.
inline std::string fresh_dir(const std::string& prefix) {
  auto d = std::filesystem::path(::testing::TempDir()) /
           (prefix + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(d);
  return d.string();
}

// A test whose engine E is registered and whose plan cache lives in a fresh directory of its
// own (DNNGRAPH_CACHE_DIR, DNNGRAPH_CACHE unset), removed afterwards.
template <class E>
struct EngineTest : ::testing::Test {
  E engine;
  HandlePtr h = Handle::create(Device::cpu()).value();
  std::string dir = fresh_dir("dnngraph_engine_");
  void SetUp() override {
    setenv("DNNGRAPH_CACHE_DIR", dir.c_str(), 1);
    unsetenv("DNNGRAPH_CACHE");
    PlanCache::reset_global();
    register_engine(&engine);
  }
  void TearDown() override {
    unregister_engine(&engine);
    unsetenv("DNNGRAPH_CACHE_DIR");
    unsetenv("DNNGRAPH_CACHE");
    PlanCache::reset_global();
    std::filesystem::remove_all(dir);
  }
};

}  // namespace dnngraph::test
