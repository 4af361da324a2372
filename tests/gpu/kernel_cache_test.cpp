// Dynamic shapes with one kernel cache shared by graphs of several shapes, built from several
// threads at once; the cache serialized and loaded again; refused bytes give a clear error.
#include <thread>

#include "harness.hpp"

namespace dnngraph::gpu_test {
namespace {

// conv 3x3 bf16 NHWC of batch `n` with dynamic shapes and the cache `kc`.
std::function<void(Graph&)> conv(int64_t n, const KernelCachePtr& kc) {
  return [n, kc](Graph& g) {
    g.set_io_data_type(DataType::BFloat16).set_dynamic_shape_enabled(true);
    g.set_kernel_cache(kc);
    ir::ConvFpropAttrs a;
    a.set_padding({1, 1}).set_stride({1, 1}).set_dilation({1, 1});
    auto y = g.conv_fprop(input(g, "X", {n, 16, 8, 8}, DataType::BFloat16, true),
                          input(g, "W", {32, 16, 3, 3}, DataType::BFloat16, true), a);
    finish(y, "Y", {n, 32, 8, 8}, DataType::BFloat16, true);
  };
}

TEST(GpuKernelCache, DynamicShapesShareOneCacheAcrossThreads) {
  DNNGRAPH_REQUIRE_GPU();
  auto kc = KernelCache::create();
  EXPECT_FALSE(kc->in_use());
  expect_matches_reference(conv(2, kc), {.min_abs = 2e-2});
  EXPECT_TRUE(kc->in_use());
  std::vector<std::thread> threads;
  for (int64_t n : {3, 4, 5, 6})
    threads.emplace_back([n, &kc] {
      expect_matches_reference(conv(n, kc),
                               {.min_abs = 2e-2, .seed = static_cast<uint32_t>(7 + n)});
    });
  for (auto& t : threads) t.join();

  auto bytes = kc->serialize();
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  ASSERT_FALSE(bytes->empty());
  auto again = KernelCache::from_bytes(bytes.value());
  expect_matches_reference(conv(9, again), {.min_abs = 2e-2});
  EXPECT_TRUE(again->in_use());
}

TEST(GpuKernelCache, RefusedBytesSayWhatToDo) {
  DNNGRAPH_REQUIRE_GPU();
  GpuRun run;
  Status s = run.prepare(conv(2, KernelCache::from_bytes("not a kernel cache")), {});
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("kernel cache"), std::string::npos) << s.message();
}

TEST(GpuKernelCache, StaticShapeGraphsIgnoreTheCache) {
  DNNGRAPH_REQUIRE_GPU();
  auto kc = KernelCache::create();
  expect_matches_reference(
      [&](Graph& g) {
        conv(2, kc)(g);
        g.set_dynamic_shape_enabled(false);
      },
      {.min_abs = 2e-2});
  EXPECT_FALSE(kc->in_use());
}

}  // namespace
}  // namespace dnngraph::gpu_test
