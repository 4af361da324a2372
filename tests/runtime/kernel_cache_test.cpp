// KernelCache without a GPU: bytes, files, errors, and the reference engine ignoring it.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <thread>

#include "dnngraph/dnngraph.hpp"

namespace dnngraph {
namespace {

std::string temp_path(const char* tag) {
  return ::testing::TempDir() + "dnngraph_kc_" + tag + std::to_string(std::random_device{}());
}

TEST(KernelCache, EmptyCacheHasNothingToSerialize) {
  auto kc = KernelCache::create();
  EXPECT_FALSE(kc->in_use());
  auto b = kc->serialize();
  ASSERT_FALSE(b.is_ok());
  EXPECT_NE(b.status().message().find("dynamic shapes"), std::string::npos);
  EXPECT_FALSE(kc->save(temp_path("empty")).is_ok());
}

TEST(KernelCache, BytesAndFilesRoundTrip) {
  const std::string payload = "{\"cache\": [1, 2, 3]}\n\x01\x02";
  auto kc = KernelCache::from_engine_bytes("cudnn", payload);
  auto bytes = kc->serialize();
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  auto again = KernelCache::from_bytes(bytes.value());
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_EQ(again.value()->initial_bytes(), payload);
  EXPECT_EQ(again.value()->initial_engine(), "cudnn");
  EXPECT_EQ(again.value()->serialize().value(), bytes.value());
  const std::string path = temp_path("file");
  ASSERT_TRUE(kc->save(path).is_ok());
  auto loaded = KernelCache::load(path);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  EXPECT_EQ(loaded.value()->serialize().value(), bytes.value());
  std::remove(path.c_str());
}

TEST(KernelCache, ForeignTruncatedOrDamagedBytesAreRefused) {
  auto expect_refused = [](const std::string& bytes, const char* why) {
    auto r = KernelCache::from_bytes(bytes);
    ASSERT_FALSE(r.is_ok()) << why;
    EXPECT_EQ(r.status().code(), ErrorCode::InvalidArgument);
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("Delete the file"), std::string::npos);
  };
  expect_refused("not a kernel cache", "header");
  const std::string good =
      KernelCache::from_engine_bytes("cudnn", std::string(300, 'k'))->serialize().value();
  expect_refused(good.substr(0, good.size() - 1), "truncated");
  std::string flipped = good;
  flipped.back() = 'j';
  expect_refused(flipped, "checksum");
  expect_refused(good.substr(0, 30), "cut off");
}

TEST(KernelCache, LoadErrorsNameTheFile) {
  const std::string missing = temp_path("missing");
  auto r = KernelCache::load(missing);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find(missing), std::string::npos);
  const std::string empty = temp_path("emptyfile");
  std::ofstream(empty).close();
  r = KernelCache::load(empty);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("empty"), std::string::npos);
  std::remove(empty.c_str());
}

TEST(KernelCache, ConcurrentSavesLeaveAWholeFile) {
  auto kc = KernelCache::from_engine_bytes("cudnn", std::string(1 << 16, 'k'));
  const std::string bytes = kc->serialize().value();
  const std::string path = temp_path("race");
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; ++i) ts.emplace_back([&] { EXPECT_TRUE(kc->save(path).is_ok()); });
  for (auto& t : ts) t.join();
  EXPECT_EQ(KernelCache::load(path).value()->serialize().value(), bytes);
  std::remove(path.c_str());
}

// The frontend's in-place deserialize(): a fresh cache takes another's bytes (or an engine's own
// form) and gives back the same bytes; garbage, empty payloads and a second load are refused and
// leave the cache as it was.
TEST(KernelCache, DeserializeInPlaceRoundTrip) {
  const std::string payload = "{\"kernels\": [4, 5]}\n\x03";
  const std::string bytes = KernelCache::from_engine_bytes("cudnn", payload)->serialize().value();
  auto kc = KernelCache::create();
  ASSERT_TRUE(kc->deserialize(bytes).is_ok());
  EXPECT_EQ(kc->initial_engine(), "cudnn");
  EXPECT_EQ(kc->initial_bytes(), payload);
  EXPECT_FALSE(kc->in_use());
  EXPECT_EQ(kc->serialize().value(), bytes);

  Status again = kc->deserialize(bytes);
  EXPECT_EQ(again.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(again.message().find("already holds kernels of engine 'cudnn'"), std::string::npos)
      << again.message();
  EXPECT_NE(again.message().find("new cache"), std::string::npos) << again.message();
  Status from_bytes_too = KernelCache::from_bytes(bytes).value()->deserialize(bytes);
  EXPECT_NE(from_bytes_too.message().find("already holds"), std::string::npos);

  auto fresh = KernelCache::create();
  Status garbage = fresh->deserialize("not a kernel cache");
  EXPECT_EQ(garbage.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(garbage.message().find("header"), std::string::npos) << garbage.message();
  Status damaged = fresh->deserialize(bytes.substr(0, bytes.size() - 1));
  EXPECT_NE(damaged.message().find("truncated"), std::string::npos) << damaged.message();
  Status empty = fresh->deserialize_engine_bytes("cudnn", "");
  EXPECT_EQ(empty.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(empty.message().find("no kernels"), std::string::npos) << empty.message();
  EXPECT_FALSE(fresh->serialize().is_ok());  // the refusals left it empty

  ASSERT_TRUE(fresh->deserialize_engine_bytes("cudnn", payload).is_ok());
  EXPECT_EQ(fresh->serialize().value(), bytes);
}

// Threads racing to fill one cache: exactly one wins, the others are told it holds kernels.
TEST(KernelCache, ConcurrentDeserializeLoadsOnce) {
  auto kc = KernelCache::create();
  std::vector<std::string> payloads;
  for (int i = 0; i < 8; ++i) payloads.push_back("{\"kernels\": [" + std::to_string(i) + "]}");
  std::atomic<int> ok{0};
  std::vector<std::thread> ts;
  for (const auto& p : payloads)
    ts.emplace_back([&kc, &ok, p] {
      const std::string bytes = KernelCache::from_engine_bytes("cudnn", p)->serialize().value();
      if (kc->deserialize(bytes).is_ok()) ++ok;
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), 1);
  EXPECT_NE(std::find(payloads.begin(), payloads.end(), kc->initial_bytes()), payloads.end());
}

// Once an engine has set the cache up, it is that engine's: deserialize() is refused.
TEST(KernelCache, DeserializeIntoACacheInUseIsRefused) {
  struct Fake final : KernelCacheBackend {
    std::string_view engine() const override { return "fake"; }
    Result<std::string> serialize() const override { return std::string("{}"); }
  };
  auto kc = KernelCache::create();
  kc->backend() = std::make_unique<Fake>();
  ASSERT_TRUE(kc->in_use());
  Status s = kc->deserialize_engine_bytes("cudnn", "{}");
  EXPECT_EQ(s.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(s.message().find("engine 'fake' already uses"), std::string::npos) << s.message();
  EXPECT_TRUE(kc->initial_bytes().empty());
}

TEST(KernelCache, ReferenceEngineRunsDynamicGraphsAndLeavesTheCacheUnused) {
  auto kc = KernelCache::create();
  auto h = Handle::create(Device::cpu()).value();
  std::mt19937 gen(5);
  std::uniform_real_distribution<float> d(-2.f, 2.f);
  for (int64_t n : {2, 3}) {
    Graph g;
    g.set_name("dyn").set_io_data_type(DataType::Float).set_dynamic_shape_enabled(true);
    g.set_kernel_cache(kc);
    EXPECT_EQ(g.kernel_cache(), kc);
    auto x = g.tensor(ir::TensorAttrs().set_name("X").set_dim({n, 4}).set_stride({4, 1}));
    auto y = g.relu(x);
    y->set_output(true).set_name("Y");
    ASSERT_TRUE(g.build(h).is_ok());
    std::vector<float> xs(static_cast<size_t>(n * 4)), ys(xs.size(), -1234.f);
    for (float& v : xs) v = d(gen);
    std::vector<char> ws(static_cast<size_t>(std::max<int64_t>(g.get_workspace_size().value(), 1)));
    ASSERT_TRUE(g.execute(*h, {{x->uid, xs.data()}, {y->uid, ys.data()}}, ws.data()).is_ok());
    for (size_t i = 0; i < xs.size(); ++i) EXPECT_FLOAT_EQ(ys[i], std::max(xs[i], 0.f));
  }
  EXPECT_FALSE(kc->in_use());
}

// A graph given a cache before the cache is filled in place builds and runs with it on the
// reference engine, which compiles nothing: the loaded kernels stay there for a GPU engine.
TEST(KernelCache, DeserializedCacheOnTheReferenceEngineKeepsItsKernels) {
  auto kc = KernelCache::create();
  Graph g;
  g.set_name("dyn").set_io_data_type(DataType::Float).set_dynamic_shape_enabled(true);
  g.set_kernel_cache(kc);
  const std::string bytes =
      KernelCache::from_engine_bytes("cudnn", "{\"kernels\": []}")->serialize().value();
  ASSERT_TRUE(kc->deserialize(bytes).is_ok());
  auto x = g.tensor(ir::TensorAttrs().set_name("X").set_dim({3, 2}).set_stride({2, 1}));
  auto y = g.unary(PointwiseMode::Exp, x);
  y->set_output(true).set_name("Y");
  auto h = Handle::create(Device::cpu()).value();
  ASSERT_TRUE(g.build(h).is_ok());
  std::vector<float> xs = {-1.5f, 0.25f, 2.f, -0.75f, 1.f, 0.5f}, ys(xs.size(), -1234.f);
  std::vector<char> ws(static_cast<size_t>(std::max<int64_t>(g.get_workspace_size().value(), 1)));
  ASSERT_TRUE(g.execute(*h, {{x->uid, xs.data()}, {y->uid, ys.data()}}, ws.data()).is_ok());
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_NEAR(ys[i], std::exp(xs[i]), 1e-6f * ys[i]);
  EXPECT_FALSE(kc->in_use());
  EXPECT_EQ(kc->serialize().value(), bytes);
}

}  // namespace
}  // namespace dnngraph
