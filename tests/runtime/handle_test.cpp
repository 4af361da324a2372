// Handles: typed per-handle engine state made once under concurrency, streams set while other
// threads execute, and the engine registry. The Threaded tests are the ones `make test-tsan`
// runs under ThreadSanitizer.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "dnngraph/dnngraph.hpp"
#include "engines/registry.hpp"

namespace dnngraph {
namespace {

struct CountedState final : EngineState {
  explicit CountedState(int v) : value(v) {}
  int value;
};
struct OtherState final : EngineState {};

TEST(HandleThreaded, EngineStateIsMadeOnceWhenThreadsRace) {
  auto h = Handle::create(Device::cpu()).value();
  std::atomic<int> made{0};
  constexpr int kThreads = 8;
  std::vector<CountedState*> seen(kThreads, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        auto s = h->engine_state<CountedState>([&]() -> Result<std::unique_ptr<CountedState>> {
          ++made;
          return std::make_unique<CountedState>(42);
        });
        ASSERT_TRUE(s.is_ok()) << s.status().to_string();
        ASSERT_EQ(s.value()->value, 42);
        seen[t] = s.value();
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(made.load(), 1);
  for (CountedState* p : seen) EXPECT_EQ(p, seen[0]);
}

TEST(Handle, EngineStateFailureLeavesNothingBehind) {
  auto h = Handle::create(Device::cpu()).value();
  auto failed = h->engine_state<CountedState>([]() -> Result<std::unique_ptr<CountedState>> {
    return make_error(ErrorCode::BackendError, "cannot make the state");
  });
  ASSERT_FALSE(failed.is_ok());
  EXPECT_EQ(failed.status().message(), "cannot make the state");
  auto made = h->engine_state<CountedState>(
      []() -> Result<std::unique_ptr<CountedState>> { return std::make_unique<CountedState>(7); });
  ASSERT_TRUE(made.is_ok());
  EXPECT_EQ(made.value()->value, 7);
}

TEST(Handle, EngineStateIsPerTypeAndPerHandle) {
  auto h1 = Handle::create(Device::cpu()).value();
  auto h2 = Handle::create(Device::cpu()).value();
  auto make = [v = 0]() mutable -> Result<std::unique_ptr<CountedState>> {
    return std::make_unique<CountedState>(++v);
  };
  CountedState* a = h1->engine_state<CountedState>(make).value();
  CountedState* b = h2->engine_state<CountedState>(make).value();
  EXPECT_NE(a, b);
  EXPECT_EQ(h1->engine_state<CountedState>(make).value(), a);
  auto other = h1->engine_state<OtherState>(
      []() -> Result<std::unique_ptr<OtherState>> { return std::make_unique<OtherState>(); });
  ASSERT_TRUE(other.is_ok());
  EXPECT_NE(static_cast<void*>(other.value()), static_cast<void*>(a));
}

TEST(Handle, StreamEpochMovesOnlyWhenTheStreamChanges) {
  auto h = Handle::create(Device::cpu()).value();
  const uint64_t e0 = h->stream_epoch();
  int a = 0, b = 0;
  h->set_stream(&a);
  EXPECT_EQ(h->stream(), &a);
  EXPECT_EQ(h->stream_epoch(), e0 + 1);
  h->set_stream(&a);
  EXPECT_EQ(h->stream_epoch(), e0 + 1);
  h->set_stream(&b);
  EXPECT_EQ(h->stream_epoch(), e0 + 2);
}

// Several threads execute one built graph on one handle while another changes its stream.
TEST(HandleThreaded, ExecutesShareAHandleWhileItsStreamChanges) {
  Graph g;
  g.set_name("mul_tanh").set_io_data_type(DataType::Float);
  auto a = g.tensor(ir::TensorAttrs().set_name("A").set_dim({4, 8}).set_stride({8, 1}).set_uid(1));
  auto b = g.tensor(ir::TensorAttrs().set_name("B").set_dim({4, 8}).set_stride({8, 1}).set_uid(2));
  auto y = g.unary(PointwiseMode::Tanh, g.mul(a, b));
  y->set_output(true).set_name("Y").set_uid(3);
  auto h = Handle::create(Device::cpu()).value();
  ASSERT_TRUE(g.build(h).is_ok());
  const int64_t ws_bytes = g.get_workspace_size().value();

  constexpr int kThreads = 4;
  std::atomic<bool> stop{false};
  std::thread streamer([&] {
    int streams[2];
    for (int i = 0; !stop.load(); ++i) h->set_stream(&streams[i % 2]);
  });
  std::vector<std::thread> threads;
  std::vector<int> wrong(kThreads, 0);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 gen(static_cast<uint32_t>(100 + t));
      std::uniform_real_distribution<float> d(-2.f, 2.f);
      std::vector<float> av(32), bv(32), yv(32);
      std::vector<char> ws(static_cast<size_t>(std::max<int64_t>(ws_bytes, 1)));
      for (int i = 0; i < 50; ++i) {
        for (float& v : av) v = d(gen);
        for (float& v : bv) v = d(gen);
        std::fill(yv.begin(), yv.end(), std::numeric_limits<float>::quiet_NaN());
        VariantPack pack{{1, av.data()}, {2, bv.data()}, {3, yv.data()}};
        if (!g.execute(*h, pack, ws.data(), static_cast<int64_t>(ws.size())).is_ok()) {
          ++wrong[t];
          continue;
        }
        for (size_t k = 0; k < 32; ++k)
          if (std::abs(yv[k] - std::tanh(av[k] * bv[k])) > 1e-5f) ++wrong[t];
      }
    });
  for (auto& th : threads) th.join();
  stop = true;
  streamer.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t;
}

TEST(EngineRegistry, EnginesRegisterThemselvesInRankOrder) {
  std::vector<Engine*> engines = registered_engines();
  ASSERT_FALSE(engines.empty());
  EXPECT_EQ(engines.front()->name(), "reference");
  EXPECT_EQ(find_engine("reference"), engines.front());
  EXPECT_EQ(find_engine("no such engine"), nullptr);
  const SystemInfo info = system_info();
  ASSERT_EQ(info.engines.size(), engines.size());
  for (size_t i = 0; i < engines.size(); ++i) EXPECT_EQ(info.engines[i].name, engines[i]->name());
  // The cuDNN engine registers itself only when it was compiled in.
  EXPECT_EQ(find_engine("cudnn") != nullptr, cudnn_info().built);
}

}  // namespace
}  // namespace dnngraph
