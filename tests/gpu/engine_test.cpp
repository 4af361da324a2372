// The cuDNN engine's own behaviour: loading, shape canonicalization (runs without a GPU),
// candidates and their names, execute-time validation (nothing launched on bad input), stream
// changes, several threads on one plan, plan serialization.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "engines/cudnn/canonicalize.hpp"
#include "engines/cudnn/loader.hpp"
#include "harness.hpp"

namespace dnngraph::gpu_test {
namespace {

template <class T>
cudaError_t dmalloc(T** p, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(p), bytes);
}

// The validated snapshot's copy of a builder tensor (the one an engine sees).
const ir::TensorAttrs* in_snapshot(const ir::ValidatedGraph& vg, const ir::Tensor& t) {
  return vg.find_tensor_by_uid(t->uid).get();
}

TEST(CudnnLoader, ReportsVersionOrReason) {
  const auto& info = cudnn::load_info();
  if (info.loaded) {
    EXPECT_EQ(info.version / 10000, 9);
    EXPECT_FALSE(info.path.empty());
    EXPECT_EQ(backend_version(), info.version);
  } else {
    EXPECT_FALSE(info.error.empty());
    EXPECT_NE(info.error.find("cuDNN"), std::string::npos) << info.error;
  }
}

TEST(CudnnCanonicalize, TwoDPointwiseGetsRankThree) {
  Graph g;
  g.set_io_data_type(DataType::Float);
  auto x = input(g, "X", {64, 64}, DataType::Float);
  auto y = g.relu(x);
  y->set_output(true).set_name("Y");
  ASSERT_TRUE(g.validate().is_ok());
  const ir::ValidatedGraphPtr vg = g.validated();
  auto views = cudnn::canonicalize(*vg);
  ASSERT_TRUE(views.is_ok()) << views.status().to_string();
  const auto& vx = views->at(in_snapshot(*vg, x));
  EXPECT_EQ(vx.dim.size(), 3u);
  int64_t vol = 1;
  for (int64_t d : vx.dim) vol *= d;
  EXPECT_EQ(vol, 64 * 64);
}

TEST(CudnnCanonicalize, RankThreePointwiseGoesAsIs) {
  // Folding [1,64,64] to [1,1,4096] left an fp8 SiLU-and-mul without an engine; the frontend
  // gives cuDNN the dims as they are.
  Graph g;
  g.set_io_data_type(DataType::Float);
  auto x = input(g, "X", {1, 64, 64}, DataType::Float);
  auto y = g.mul(g.unary(PointwiseMode::Silu, x), x);
  y->set_output(true).set_name("Y");
  ASSERT_TRUE(g.validate().is_ok());
  const ir::ValidatedGraphPtr vg = g.validated();
  auto views = cudnn::canonicalize(*vg);
  ASSERT_TRUE(views.is_ok()) << views.status().to_string();
  EXPECT_EQ(views->at(in_snapshot(*vg, x)).dim, (std::vector<int64_t>{1, 64, 64}));
  EXPECT_EQ(views->at(in_snapshot(*vg, x)).stride, (std::vector<int64_t>{4096, 64, 1}));
}

TEST(CudnnCanonicalize, RankThreeBroadcastOverTheBatchFolds) {
  // Unfolded, cuDNN 9.19 left every batch but the first of (X[2,128,256] + B[1,1,256]) * X
  // unwritten on the H200 (SUCCESS returned): a graph whose inputs broadcast is folded.
  Graph g;
  g.set_io_data_type(DataType::Float);
  auto x = input(g, "X", {2, 128, 256}, DataType::Float);
  auto b = input(g, "B", {1, 1, 256}, DataType::Float);
  auto y = g.mul(g.add(x, b), x);
  y->set_output(true).set_name("Y");
  ASSERT_TRUE(g.validate().is_ok());
  const ir::ValidatedGraphPtr vg = g.validated();
  auto views = cudnn::canonicalize(*vg);
  ASSERT_TRUE(views.is_ok()) << views.status().to_string();
  EXPECT_EQ(views->at(in_snapshot(*vg, x)).dim, (std::vector<int64_t>{1, 256, 256}));
  EXPECT_EQ(views->at(in_snapshot(*vg, b)).dim, (std::vector<int64_t>{1, 1, 256}));
  EXPECT_EQ(views->at(in_snapshot(*vg, y)).dim, (std::vector<int64_t>{1, 256, 256}));
}

// A pointwise-only graph whose tensors fold into one row: 2^18 elements ([4,64,32,32]) were exact
// on the H200, [32,64,56,56] and [64,256,14,14] failed there (one at execute, poisoning the CUDA
// context): longer rows are refused before cuDNN sees them.
ir::ValidatedGraphPtr relu_backward_graph(std::vector<int64_t> dims, bool channels_last) {
  Graph g;
  g.set_io_data_type(DataType::BFloat16);
  auto dy = input(g, "dY", dims, DataType::BFloat16, channels_last);
  auto x = input(g, "X", dims, DataType::BFloat16, channels_last);
  auto dx = g.binary(PointwiseMode::ReluBwd, dy, x);
  dx->set_output(true).set_name("dX").set_dim(dims).set_stride(strides_for(dims, channels_last));
  EXPECT_TRUE(g.validate().is_ok());
  return g.validated();
}

TEST(CudnnCanonicalize, PointwiseRowsUpToTwoToTheEighteenFold) {
  auto views = cudnn::canonicalize(*relu_backward_graph({4, 64, 32, 32}, false));
  ASSERT_TRUE(views.is_ok()) << views.status().message();
}

TEST(CudnnCanonicalize, LongerPointwiseRowsAreRefused) {
  for (bool cl : {true, false}) {
    auto views = cudnn::canonicalize(*relu_backward_graph({32, 64, 56, 56}, cl));
    ASSERT_FALSE(views.is_ok());
    EXPECT_EQ(views.status().code(), ErrorCode::NotSupported);
    EXPECT_NE(views.status().message().find("6422528"), std::string::npos)
        << views.status().message();
  }
}

TEST(CudnnCanonicalize, FourDNhwcBiasFoldsToThreeD) {
  Graph g;
  g.set_io_data_type(DataType::Float);
  auto x = input(g, "X", {2, 16, 5, 7}, DataType::Float, true);
  auto b = input(g, "B", {1, 16, 1, 1}, DataType::Float, true);
  auto y = g.add(x, b);
  y->set_output(true)
      .set_name("Y")
      .set_dim({2, 16, 5, 7})
      .set_stride(strides_for({2, 16, 5, 7}, true));
  ASSERT_TRUE(g.validate().is_ok());
  const ir::ValidatedGraphPtr vg = g.validated();
  auto views = cudnn::canonicalize(*vg);
  ASSERT_TRUE(views.is_ok());
  const auto& vx = views->at(in_snapshot(*vg, x));
  const auto& vb = views->at(in_snapshot(*vg, b));
  // N*H*W folded, channels innermost: [1, 70, 16] with the bias [1, 1, 16].
  EXPECT_EQ(vx.dim, (std::vector<int64_t>{1, 70, 16}));
  EXPECT_EQ(vx.stride, (std::vector<int64_t>{1120, 16, 1}));
  EXPECT_EQ(vb.dim, (std::vector<int64_t>{1, 1, 16}));
}

TEST(CudnnCanonicalize, MergesOnlyDimsWithTheSameBroadcastPattern) {
  Graph g;
  g.set_io_data_type(DataType::Float);
  auto x = input(g, "X", {4, 6, 8, 10, 3}, DataType::Float);
  auto b = input(g, "B", {1, 6, 1, 1, 3}, DataType::Float);
  auto y = g.add(x, b);
  y->set_output(true).set_name("Y");
  ASSERT_TRUE(g.validate().is_ok());
  const ir::ValidatedGraphPtr vg = g.validated();
  auto views = cudnn::canonicalize(*vg);
  ASSERT_TRUE(views.is_ok()) << views.status().to_string();
  // H and W merge (B broadcasts over both); N, C and the innermost dim cannot.
  EXPECT_EQ(views->at(in_snapshot(*vg, x)).dim, (std::vector<int64_t>{4, 6, 80, 3}));
  EXPECT_EQ(views->at(in_snapshot(*vg, x)).stride, (std::vector<int64_t>{1440, 240, 3, 1}));
  EXPECT_EQ(views->at(in_snapshot(*vg, b)).dim, (std::vector<int64_t>{1, 6, 1, 3}));
}

TEST(CudnnCanonicalize, InnermostBroadcastIsRejected) {
  // cuDNN 9.19 computed X[4,33,40] + B[1,33,1] wrongly on the H200 (every row but the first).
  Graph g;
  g.set_io_data_type(DataType::Float);
  auto x = input(g, "X", {4, 33, 40}, DataType::Float);
  auto b = input(g, "B", {1, 33, 1}, DataType::Float);
  auto y = g.add(x, b);
  y->set_output(true).set_name("Y");
  ASSERT_TRUE(g.validate().is_ok());
  const ir::ValidatedGraphPtr vg = g.validated();
  auto views = cudnn::canonicalize(*vg);
  ASSERT_FALSE(views.is_ok());
  EXPECT_EQ(views.status().code(), ErrorCode::NotSupported);
  EXPECT_NE(views.status().message().find("'B'"), std::string::npos) << views.status().message();
  EXPECT_NE(views.status().message().find("innermost"), std::string::npos);
}

TEST(CudnnCanonicalize, ScalarsAndOuterBroadcastsAreKept) {
  Graph g;
  g.set_io_data_type(DataType::Float);
  auto x = input(g, "X", {4, 33, 40}, DataType::Float);
  auto b = input(g, "B", {4, 1, 40}, DataType::Float);
  auto alpha = g.scalar(ir::Scalar::of_float(2.0), "alpha");
  auto y = g.mul(g.add(x, b), alpha);
  y->set_output(true).set_name("Y");
  ASSERT_TRUE(g.validate().is_ok());
  const ir::ValidatedGraphPtr vg = g.validated();
  auto views = cudnn::canonicalize(*vg);
  ASSERT_TRUE(views.is_ok()) << views.status().to_string();
  EXPECT_EQ(views->at(in_snapshot(*vg, x)).dim, (std::vector<int64_t>{4, 33, 40}));
  EXPECT_EQ(views->at(in_snapshot(*vg, b)).dim, (std::vector<int64_t>{4, 1, 40}));
  EXPECT_EQ(views->at(in_snapshot(*vg, alpha)).dim, (std::vector<int64_t>{1, 1, 1}));
}

TEST(CudnnCanonicalize, EveryDimBroadcastIsRejected) {
  Graph g;
  g.set_io_data_type(DataType::Float);
  auto a = input(g, "A", {4, 1, 5}, DataType::Float);
  auto b = input(g, "B", {1, 6, 5}, DataType::Float);
  auto c = input(g, "C", {4, 6, 1}, DataType::Float);
  auto y = g.add(g.add(a, b), c);
  y->set_output(true).set_name("Y");
  ASSERT_TRUE(g.validate().is_ok()) << g.validate().to_string();
  const ir::ValidatedGraphPtr vg = g.validated();
  auto views = cudnn::canonicalize(*vg);
  ASSERT_FALSE(views.is_ok());
  EXPECT_EQ(views.status().code(), ErrorCode::NotSupported);
  EXPECT_NE(views.status().message().find("broadcast"), std::string::npos);
}

TEST(CudnnCanonicalize, MatmulBatchDimsFold) {
  Graph g;
  g.set_io_data_type(DataType::BFloat16);
  auto a = input(g, "A", {2, 3, 16, 32}, DataType::BFloat16);
  auto b = input(g, "B", {2, 3, 32, 8}, DataType::BFloat16);
  auto y = g.matmul(a, b);
  y->set_output(true).set_name("C");
  ASSERT_TRUE(g.validate().is_ok());
  const ir::ValidatedGraphPtr vg = g.validated();
  auto views = cudnn::canonicalize(*vg);
  ASSERT_TRUE(views.is_ok());
  EXPECT_EQ(views->at(in_snapshot(*vg, a)).dim, (std::vector<int64_t>{6, 16, 32}));
  EXPECT_EQ(views->at(in_snapshot(*vg, b)).dim, (std::vector<int64_t>{6, 32, 8}));
  EXPECT_EQ(views->at(in_snapshot(*vg, y)).dim, (std::vector<int64_t>{6, 16, 8}));
}

struct ReluGraph {
  Graph g;
  ir::Tensor x, y;
  explicit ReluGraph(std::vector<int64_t> dim = {4, 256}) {
    g.set_name("relu").set_io_data_type(DataType::Float);
    x = input(g, "X", dim, DataType::Float);
    y = g.relu(x);
    y->set_output(true).set_name("Y");
  }
};

TEST(CudnnEngine, CandidatesAreNamedAndDeduplicated) {
  DNNGRAPH_REQUIRE_GPU();
  ReluGraph r;
  auto h = Handle::create(Device::cuda(0)).value();
  ASSERT_TRUE(r.g.build_operation_graph(h).is_ok());
  ASSERT_TRUE(r.g.create_execution_plans({HeurMode::A, HeurMode::B, HeurMode::Fallback}).is_ok());
  (void)r.g.check_support();
  ASSERT_FALSE(r.g.candidates().empty());
  std::set<std::string> names;
  for (const auto& c : r.g.candidates()) {
    EXPECT_EQ(c.info.engine, "cudnn");
    EXPECT_EQ(c.info.name.rfind("eng", 0), 0u) << c.info.name;
    EXPECT_TRUE(names.insert(c.info.name).second) << "duplicate " << c.info.name;
  }
}

TEST(CudnnEngine, ExecuteRejectsBadPointersWithoutLaunching) {
  DNNGRAPH_REQUIRE_GPU();
  ReluGraph r;
  auto h = Handle::create(Device::cuda(0)).value();
  ASSERT_TRUE(r.g.build(h).is_ok());
  const size_t bytes = 4 * 256 * sizeof(float);
  char *x = nullptr, *y = nullptr;
  ASSERT_EQ(dmalloc(&x, bytes + 64), cudaSuccess);
  ASSERT_EQ(dmalloc(&y, bytes + 64), cudaSuccess);
  ASSERT_EQ(cudaMemset(x, 0x3f, bytes + 64), cudaSuccess);
  ASSERT_EQ(cudaMemset(y, 0xff, bytes + 64), cudaSuccess);  // NaN poison
  void* ws = nullptr;
  const int64_t wsz = r.g.get_workspace_size().value();
  if (wsz > 0) {
    ASSERT_EQ(dmalloc(&ws, static_cast<size_t>(wsz)), cudaSuccess);
  }

  // Under-aligned output pointer.
  Status s = r.g.execute(*h, {{r.x->uid, x}, {r.y->uid, y + 4}}, ws, wsz);
  EXPECT_EQ(s.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(s.message().find("'Y'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("aligned"), std::string::npos) << s.message();
  // Host pointer.
  std::vector<float> host(4 * 256, 1.0f);
  s = r.g.execute(*h, {{r.x->uid, host.data()}, {r.y->uid, y}}, ws, wsz);
  EXPECT_EQ(s.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(s.message().find("'X'"), std::string::npos) << s.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  // Nothing was written.
  std::vector<uint32_t> out(4 * 256);
  ASSERT_EQ(cudaMemcpy(out.data(), y, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  for (uint32_t v : out) ASSERT_EQ(v, 0xffffffffu);
  // A good call then works and writes relu(x).
  ASSERT_TRUE(r.g.execute(*h, {{r.x->uid, x}, {r.y->uid, y}}, ws, wsz).is_ok());
  std::vector<float> got(4 * 256);
  ASSERT_EQ(cudaMemcpy(got.data(), y, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  float want;
  uint32_t bits = 0x3f3f3f3f;
  std::memcpy(&want, &bits, 4);
  for (float v : got) ASSERT_EQ(v, want);
  cudaFree(x);
  cudaFree(y);
  if (ws) cudaFree(ws);
}

// Pointers alternating between two sets of buffers (the layers of a model sharing one plan):
// every call writes its own output, and a host pointer after them is still refused.
TEST(CudnnEngine, AlternatingPointersAreBoundEachCallAndAHostPointerStaysRefused) {
  DNNGRAPH_REQUIRE_GPU();
  ReluGraph r;
  auto h = Handle::create(Device::cuda(0)).value();
  ASSERT_TRUE(r.g.build(h).is_ok());
  const size_t n = 4 * 256, bytes = n * sizeof(float);
  std::vector<float> xs[2] = {std::vector<float>(n), std::vector<float>(n)};
  for (size_t i = 0; i < n; ++i) {
    xs[0][i] = static_cast<float>(i % 7) - 3.0f;
    xs[1][i] = 2.0f - static_cast<float>(i % 5);
  }
  float *x[2] = {nullptr, nullptr}, *y[2] = {nullptr, nullptr};
  for (int k = 0; k < 2; ++k) {
    ASSERT_EQ(dmalloc(&x[k], bytes), cudaSuccess);
    ASSERT_EQ(dmalloc(&y[k], bytes), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(x[k], xs[k].data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
  }
  void* ws = nullptr;
  const int64_t wsz = r.g.get_workspace_size().value();
  if (wsz > 0) {
    ASSERT_EQ(dmalloc(&ws, static_cast<size_t>(wsz)), cudaSuccess);
  }
  for (int call = 0; call < 6; ++call) {
    const int k = call % 2;
    ASSERT_EQ(cudaMemset(y[k], 0xff, bytes), cudaSuccess);  // NaN poison
    ASSERT_TRUE(r.g.execute(*h, {{r.x->uid, x[k]}, {r.y->uid, y[k]}}, ws, wsz).is_ok());
    std::vector<float> got(n);
    ASSERT_EQ(cudaMemcpy(got.data(), y[k], bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], std::max(xs[k][i], 0.0f)) << call << " " << i;
  }
  std::vector<float> host(n, 1.0f);
  Status s = r.g.execute(*h, {{r.x->uid, host.data()}, {r.y->uid, y[0]}}, ws, wsz);
  EXPECT_EQ(s.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(s.message().find("host memory"), std::string::npos) << s.message();
  for (int k = 0; k < 2; ++k) cudaFree(x[k]), cudaFree(y[k]);
  if (ws) cudaFree(ws);
}

TEST(CudnnEngine, StreamChangesAndThreads) {
  DNNGRAPH_REQUIRE_GPU();
  ReluGraph r({8, 1024});
  auto h = Handle::create(Device::cuda(0)).value();
  ASSERT_TRUE(r.g.build(h).is_ok());
  const size_t n = 8 * 1024;
  std::vector<float> hx(n);
  for (size_t i = 0; i < n; ++i) hx[i] = static_cast<float>(static_cast<int>(i % 17) - 8);
  float* x = nullptr;
  ASSERT_EQ(dmalloc(&x, n * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(x, hx.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
  const int64_t wsz = r.g.get_workspace_size().value();
  constexpr int kThreads = 4;
  std::vector<float*> ys(kThreads);
  std::vector<void*> wss(kThreads, nullptr);
  std::vector<cudaStream_t> streams(kThreads);
  std::vector<HandlePtr> handles(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(dmalloc(&ys[t], n * 4), cudaSuccess);
    ASSERT_EQ(cudaMemset(ys[t], 0xff, n * 4), cudaSuccess);
    if (wsz > 0) {
      ASSERT_EQ(dmalloc(&wss[t], static_cast<size_t>(wsz)), cudaSuccess);
    }
    ASSERT_EQ(cudaStreamCreate(&streams[t]), cudaSuccess);
    handles[t] = Handle::create(Device::cuda(0)).value();
    handles[t]->set_stream(streams[t]);
  }
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i)
        if (!r.g.execute(*handles[t], {{r.x->uid, x}, {r.y->uid, ys[t]}}, wss[t], wsz))
          ++failures[t];
    });
  for (auto& th : threads) th.join();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(failures[t], 0);
    std::vector<float> got(n);
    ASSERT_EQ(cudaMemcpy(got.data(), ys[t], n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(got[i], std::max(hx[i], 0.0f)) << "thread " << t << " i " << i;
    cudaFree(ys[t]);
    if (wss[t]) cudaFree(wss[t]);
    cudaStreamDestroy(streams[t]);
  }
  cudaFree(x);
}

TEST(CudnnEngine, SerializedPlanRoundTrips) {
  DNNGRAPH_REQUIRE_GPU();
  ReluGraph r({16, 64});
  auto h = Handle::create(Device::cuda(0)).value();
  ASSERT_TRUE(r.g.build(h).is_ok());
  auto bytes = r.g.serialize();
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  ReluGraph r2({16, 64});
  Status s = r2.g.deserialize(h, bytes.value());
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  const size_t n = 16 * 64;
  std::vector<float> hx(n);
  for (size_t i = 0; i < n; ++i) hx[i] = static_cast<float>(static_cast<int>(i % 5) - 2);
  float *x = nullptr, *y = nullptr;
  ASSERT_EQ(dmalloc(&x, n * 4), cudaSuccess);
  ASSERT_EQ(dmalloc(&y, n * 4), cudaSuccess);
  cudaMemcpy(x, hx.data(), n * 4, cudaMemcpyHostToDevice);
  cudaMemset(y, 0xff, n * 4);
  const int64_t wsz = r2.g.get_workspace_size().value();
  void* ws = nullptr;
  if (wsz > 0) dmalloc(&ws, static_cast<size_t>(wsz));
  auto x2 = r2.g.find_tensor_by_name("X"), y2 = r2.g.find_tensor_by_name("Y");
  ASSERT_TRUE(x2 && y2);
  s = r2.g.execute(*h, {{x2->uid, x}, {y2->uid, y}}, ws, wsz);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  std::vector<float> got(n);
  cudaMemcpy(got.data(), y, n * 4, cudaMemcpyDeviceToHost);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], std::max(hx[i], 0.0f));
  cudaFree(x);
  cudaFree(y);
  if (ws) cudaFree(ws);
}

}  // namespace
}  // namespace dnngraph::gpu_test
