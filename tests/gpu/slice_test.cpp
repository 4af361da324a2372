// Slice on the cuDNN engine as a strided view of a graph input (src/engines/cudnn/view.cpp).
// CudnnSliceView.* run without a GPU (the offset, strides and alignment, and the canonical
// views); GpuSlice.* compare with the reference engine on the GPU (poisoned outputs), and check
// the refusals, the alignment check at execute, serialize/deserialize, the plan cache, CUDA
// graphs and the autotuner on graphs with such slices.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "dnngraph/plan_cache.hpp"
#include "engines/cudnn/canonicalize.hpp"
#include "engines/cudnn/view.hpp"
#include "harness.hpp"

namespace dnngraph::gpu_test {
namespace {

// The op table makes slice, and only ops with a window, a window op.
static_assert(cudnn::is_window_op(ir::OpKind::Slice));
static_assert(!cudnn::is_window_op(ir::OpKind::Transpose) &&
              !cudnn::is_window_op(ir::OpKind::Matmul));

// The cuDNN view of slice `a` of an input with strides `x_stride` and element type `type`.
Result<cudnn::WindowView> slice_view(const std::vector<int64_t>& x_stride, const ir::SliceAttrs& a,
                                     DataType type) {
  const std::optional<ir::StridedWindow> w = a.window(x_stride);
  if (!w) return make_error(ErrorCode::InvalidArgument, "no window");
  return cudnn::window_view(*w, type);
}

// ---------------------------------------------------------------- without a GPU

TEST(CudnnSliceView, OffsetStridesAndAlignment) {
  // A [4,64,96] packed: strides [6144, 96, 1].
  const std::vector<int64_t> s{6144, 96, 1};
  auto v = slice_view(s, ir::SliceAttrs{{0, 8, 16}, {4, 40, 80}, {}}, DataType::BFloat16);
  ASSERT_TRUE(v.is_ok()) << v.status().to_string();
  EXPECT_EQ(v->stride, s);
  EXPECT_EQ(v->element_offset, 8 * 96 + 16);
  EXPECT_EQ(v->byte_offset, (8 * 96 + 16) * 2);  // 1568 = 98 * 16
  EXPECT_EQ(v->alignment, 16);

  // Steps multiply the strides; the offset counts the starts only.
  v = slice_view(s, ir::SliceAttrs{{1, 3, 5}, {4, 64, 96}, {1, 2, 3}}, DataType::BFloat16);
  ASSERT_TRUE(v.is_ok());
  EXPECT_EQ(v->stride, (std::vector<int64_t>{6144, 192, 3}));
  EXPECT_EQ(v->element_offset, 6144 + 3 * 96 + 5);
  EXPECT_EQ(v->byte_offset, (6144 + 3 * 96 + 5) * 2);  // 12874: 2 * odd
  EXPECT_EQ(v->alignment, 2);

  // Non-packed input strides are kept (a channels-last input).
  v = slice_view({512, 1, 64}, ir::SliceAttrs{{0, 4, 2}, {2, 8, 8}, {}}, DataType::Float);
  ASSERT_TRUE(v.is_ok());
  EXPECT_EQ(v->stride, (std::vector<int64_t>{512, 1, 64}));
  EXPECT_EQ(v->byte_offset, (4 + 2 * 64) * 4);  // 528 = 33 * 16
  EXPECT_EQ(v->alignment, 16);

  // int8 at an odd element: 1 byte; float at 2 elements: 8 bytes; offset 0: 16.
  EXPECT_EQ(slice_view({128, 1}, ir::SliceAttrs{{0, 3}, {4, 128}, {}}, DataType::Int8)->alignment,
            1);
  EXPECT_EQ(slice_view({128, 1}, ir::SliceAttrs{{0, 2}, {4, 128}, {}}, DataType::Float)->alignment,
            8);
  EXPECT_EQ(slice_view({128, 1}, ir::SliceAttrs{{0, 0}, {4, 8}, {}}, DataType::Half)->alignment,
            16);
}

TEST(CudnnSliceView, RefusesFp4AndMismatchedAttributes) {
  auto fp4 = slice_view({128, 1}, ir::SliceAttrs{{0, 2}, {4, 128}, {}}, DataType::FP4_E2M1);
  EXPECT_EQ(fp4.status().code(), ErrorCode::NotSupported);
  EXPECT_NE(fp4.status().message().find("FP4_E2M1"), std::string::npos);
  // Attributes without one entry per dim of the input have no window.
  EXPECT_FALSE((ir::SliceAttrs{{0}, {4}, {}}.window(std::vector<int64_t>{128, 1})));
  EXPECT_FALSE((ir::SliceAttrs{{0, 0}, {4, 4}, {1}}.window(std::vector<int64_t>{128, 1})));
}

// A bf16 graph (fp32 compute) whose output C, bf16, is the matmul of the two operands that
// `operands` makes in it.
using Operands = std::function<std::pair<ir::Tensor, ir::Tensor>(Graph&)>;
std::function<void(Graph&)> bf16_matmul(Operands operands) {
  return [operands](Graph& g) {
    g.set_io_data_type(DataType::BFloat16);
    g.set_compute_data_type(DataType::Float);
    auto [a, b] = operands(g);
    auto c = g.matmul(a, b, {}, {"matmul", DataType::Float});
    c->set_output(true).set_name("C").set_data_type(DataType::BFloat16);
  };
}

// Batched matmul of slices of two graph inputs: A[:, 8:40, 16:80] x B[:, 16:80, 8:40].
std::function<void(Graph&)> matmul_of_slices(std::vector<int64_t> a_dim, ir::SliceAttrs as,
                                             std::vector<int64_t> b_dim, ir::SliceAttrs bs) {
  return bf16_matmul([=](Graph& g) {
    auto a = g.slice(input(g, "A", a_dim, DataType::BFloat16), as, {"A_slice"});
    auto b = g.slice(input(g, "B", b_dim, DataType::BFloat16), bs, {"B_slice"});
    return std::pair{a, b};
  });
}

// A[:, 8:40, 16:80] x B[:, 16:80, 8:40] of A [4, 64, 96] and B [4, 96, 48].
std::function<void(Graph&)> a_slice_by_b_slice() {
  return matmul_of_slices({4, 64, 96}, ir::SliceAttrs{{0, 8, 16}, {4, 40, 80}, {}}, {4, 96, 48},
                          ir::SliceAttrs{{0, 16, 8}, {4, 80, 40}, {}});
}

const ir::TensorAttrs* in_snapshot(const ir::ValidatedGraph& vg, const ir::Tensor& t) {
  return vg.find_tensor_by_uid(t->uid).get();
}

TEST(CudnnSliceView, CanonicalViewIsTheInputsMemoryWithBatchDimsFolded) {
  // Rank 4: a matmul graph folds its batch dims; the slice's view has A's strides (not the
  // packed ones the graph gives the slice) and folds where A's memory is contiguous.
  Graph g;
  g.set_io_data_type(DataType::BFloat16);
  auto a = g.slice(input(g, "A", {2, 3, 64, 96}, DataType::BFloat16),
                   ir::SliceAttrs{{0, 0, 8, 16}, {2, 3, 40, 80}, {}}, {"A_slice"});
  auto b = input(g, "B", {2, 3, 64, 32}, DataType::BFloat16);
  g.matmul(a, b, {}, {"mm"})->set_output(true).set_name("C");
  ASSERT_TRUE(g.validate().is_ok());
  const ir::ValidatedGraphPtr vg = g.validated();
  auto views = cudnn::canonicalize(*vg);
  ASSERT_TRUE(views.is_ok()) << views.status().to_string();
  const auto& va = views->at(in_snapshot(*vg, a));
  EXPECT_EQ(va.dim, (std::vector<int64_t>{6, 32, 64}));
  EXPECT_EQ(va.stride, (std::vector<int64_t>{6144, 96, 1}));
  EXPECT_EQ(views->at(in_snapshot(*vg, b)).dim, (std::vector<int64_t>{6, 64, 32}));
}

TEST(CudnnSliceView, CanonicalViewOfASliceFeedingPointwise) {
  // Rank 3 without broadcast: as it is (pointwise-only once the slice is a view).
  Graph g;
  g.set_io_data_type(DataType::Float);
  auto x = input(g, "X", {4, 64, 96}, DataType::Float);
  auto s = g.slice(x, ir::SliceAttrs{{0, 8, 16}, {4, 40, 80}, {}}, {"cut"});
  auto z = input(g, "Z", {4, 32, 64}, DataType::Float);
  g.add(s, z, {"add"})->set_output(true).set_name("Y");
  ASSERT_TRUE(g.validate().is_ok());
  const ir::ValidatedGraphPtr vg = g.validated();
  auto views = cudnn::canonicalize(*vg);
  ASSERT_TRUE(views.is_ok()) << views.status().to_string();
  EXPECT_EQ(views->at(in_snapshot(*vg, s)).dim, (std::vector<int64_t>{4, 32, 64}));
  EXPECT_EQ(views->at(in_snapshot(*vg, s)).stride, (std::vector<int64_t>{6144, 96, 1}));
  EXPECT_EQ(views->at(in_snapshot(*vg, z)).stride, (std::vector<int64_t>{2048, 64, 1}));
}

// ---------------------------------------------------------------- on the GPU

TEST(GpuSlice, MatmulOfTwoInputSlicesBf16) {
  DNNGRAPH_REQUIRE_GPU();
  expect_matches_reference(a_slice_by_b_slice());
}

TEST(GpuSlice, FrontendTestSlicesBf16) {
  // The cuDNN frontend's test_slice.py (test_int8_bf16_matmul_slice): Batch 16, M 32, N 64,
  // K 128; A[8:, 16:, :], B[8:, :, 32:] (both bf16 there, despite the test's name).
  DNNGRAPH_REQUIRE_GPU();
  expect_matches_reference(
      matmul_of_slices({16, 32, 128}, ir::SliceAttrs{{8, 16, 0}, {16, 32, 128}, {}}, {16, 128, 64},
                       ir::SliceAttrs{{8, 0, 32}, {16, 128, 64}, {}}));
}

TEST(GpuSlice, Int8SliceCastToBf16ThenMatmul) {
  // An int8 A sliced, cast to bf16 by an identity (the frontend's int8 x bf16 matmul form:
  // test_matmul_bias_relu.py's test_int8_bf16_matmul), times a slice of a bf16 B.
  DNNGRAPH_REQUIRE_GPU();
  expect_matches_reference(bf16_matmul([](Graph& g) {
    auto a = g.slice(input(g, "A", {16, 32, 128}, DataType::Int8),
                     ir::SliceAttrs{{8, 16, 0}, {16, 32, 128}, {}}, {"A_slice"});
    auto a16 = g.unary(PointwiseMode::Identity, a, {"cast", DataType::Float});
    a16->set_data_type(DataType::BFloat16);
    auto b = g.slice(input(g, "B", {16, 128, 64}, DataType::BFloat16),
                     ir::SliceAttrs{{8, 0, 32}, {16, 128, 64}, {}}, {"B_slice"});
    return std::pair{a16, b};
  }));
}

TEST(GpuSlice, SliceFeedsPointwise) {
  DNNGRAPH_REQUIRE_GPU();
  expect_matches_reference([](Graph& g) {
    g.set_io_data_type(DataType::Float);
    auto s = g.slice(input(g, "X", {4, 64, 96}, DataType::Float),
                     ir::SliceAttrs{{0, 8, 16}, {4, 40, 80}, {}}, {"cut"});
    auto z = input(g, "Z", {4, 32, 64}, DataType::Float);
    g.relu(g.add(s, z, {"add"}), {"relu"})->set_output(true).set_name("Y");
  });
}

TEST(GpuSlice, StepsOnOuterDims) {
  // Steps 2 on the batch and M dims of A: strides [2 * 6144, 2 * 96, 1].
  DNNGRAPH_REQUIRE_GPU();
  expect_matches_reference(
      matmul_of_slices({4, 64, 96}, ir::SliceAttrs{{0, 1, 16}, {4, 64, 80}, {2, 2, 1}}, {2, 96, 48},
                       ir::SliceAttrs{{0, 16, 8}, {2, 80, 40}, {}}));
}

TEST(GpuSlice, InputAlsoReadDirectly) {
  // A[:, 16:48, :] x A: A is read by the matmul itself (bound) and through the view.
  DNNGRAPH_REQUIRE_GPU();
  expect_matches_reference(bf16_matmul([](Graph& g) {
    auto a = input(g, "A", {4, 64, 64}, DataType::BFloat16);
    auto rows = g.slice(a, ir::SliceAttrs{{0, 16, 0}, {4, 48, 64}, {}}, {"rows"});
    return std::pair{rows, a};
  }));
}

TEST(GpuSlice, RefusedSlicesSayWhy) {
  DNNGRAPH_REQUIRE_GPU();
  auto h = Handle::create(Device::cuda(0)).value();
  {
    Graph g;  // a slice of a matmul's output
    g.set_io_data_type(DataType::BFloat16);
    auto c = g.matmul(input(g, "A", {4, 64, 96}, DataType::BFloat16),
                      input(g, "B", {4, 96, 48}, DataType::BFloat16), {}, {"mm"});
    auto s = g.slice(c, ir::SliceAttrs{{0, 0, 0}, {4, 32, 48}, {}}, {"cut"});
    g.relu(s, {"relu"})->set_output(true).set_name("Y");
    Status st = g.build(h, {HeurMode::A});
    EXPECT_EQ(st.code(), ErrorCode::NotSupported) << st.to_string();
    EXPECT_NE(st.message().find("slice 'cut'"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("is written by matmul 'mm'"), std::string::npos) << st.message();
  }
  {
    Graph g;  // a slice into a graph output
    g.set_io_data_type(DataType::Float);
    auto s = g.slice(input(g, "X", {4, 64, 96}, DataType::Float),
                     ir::SliceAttrs{{0, 8, 16}, {4, 40, 80}, {}}, {"cut"});
    s->set_output(true).set_name("Y");
    Status st = g.build(h, {HeurMode::A});
    EXPECT_EQ(st.code(), ErrorCode::NotSupported) << st.to_string();
    EXPECT_NE(st.message().find("is a graph output"), std::string::npos) << st.message();
  }
}

TEST(GpuSlice, SourceAlignedToLessThanTheViewDeclaresIsRefusedAtExecute) {
  // The view's offset (1568 bytes) is a multiple of 16, so its descriptor declares 16; A bound
  // 2 bytes past an allocation puts the view at 2 mod 16: refused, nothing launched.
  DNNGRAPH_REQUIRE_GPU();
  const auto make = a_slice_by_b_slice();
  GpuRun run;
  ASSERT_TRUE(run.prepare(make, CompareOptions{}).is_ok());
  void* big = nullptr;
  ASSERT_EQ(cudaMalloc(&big, 4 * 64 * 96 * 2 + 16), cudaSuccess);
  auto a = run.g.find_tensor_by_name("A");
  ASSERT_TRUE(a);
  VariantPack pack = run.pack;
  pack[a->uid] = static_cast<char*>(big) + 2;
  Status s = run.g.execute(*run.handle, pack, run.dev.ws, run.ws);
  EXPECT_EQ(s.code(), ErrorCode::InvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("slice output 'A_slice"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("is a view of tensor 'A'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("aligned to less than the 16 bytes"), std::string::npos)
      << s.message();
  cudaFree(big);
  // The same graph with A where it belongs still runs.
  EXPECT_TRUE(run.g.execute(*run.handle, run.pack, run.dev.ws, run.ws).is_ok());
}

TEST(GpuSlice, UnalignedOffsetIsRefused) {
  // A[:, 8:40, 1:65]: the window starts (8 * 96 + 1) * 2 bytes in, not a multiple of 16. Built
  // with a 2-byte alignment, cuDNN 9.19 on the H200 took the plan and then failed inside
  // cuBLASLt at execute; such views are refused when the graph is validated with a GPU handle.
  DNNGRAPH_REQUIRE_GPU();
  auto r =
      run_and_compare(matmul_of_slices({4, 64, 96}, ir::SliceAttrs{{0, 8, 1}, {4, 40, 65}, {}},
                                       {4, 96, 48}, ir::SliceAttrs{{0, 16, 8}, {4, 80, 40}, {}}));
  EXPECT_EQ(r.status.code(), ErrorCode::NotSupported) << r.status.to_string();
  EXPECT_NE(r.status.message().find("not a multiple of 16 bytes"), std::string::npos)
      << r.status.message();
}

// Outputs of `run`'s buffers after one execute of `g` with `p` (poisoned first).
std::vector<std::vector<unsigned char>> outputs_after(GpuRun& run, Graph& g, const VariantPack& p) {
  return outputs_after(run, [&] { return g.execute(*run.handle, p, run.dev.ws, run.ws); });
}

TEST(GpuSlice, SerializeDeserializeAndPlanCacheRestoreTheView) {
  DNNGRAPH_REQUIRE_GPU();
  MemoryCache cache;
  const auto make = a_slice_by_b_slice();
  GpuRun run;
  ASSERT_TRUE(run.prepare(make, CompareOptions{}).is_ok());
  ASSERT_TRUE(run.run_once().is_ok());
  auto r = compare_with_reference(run, make, CompareOptions{});
  EXPECT_EQ(r.mismatches, 0) << r.first_mismatch;
  const auto want = outputs_after(run, run.g, run.pack);

  auto bytes = run.g.serialize();
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  Graph restored;
  make(restored);
  Status s = restored.deserialize(run.handle, bytes.value());
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(outputs_after(run, restored, run.pack), want);

  // A second build of the same graph: from the plan cache (one candidate, the cached plan).
  Graph again;
  make(again);
  ASSERT_TRUE(again.build(run.handle, {HeurMode::A}).is_ok());
  EXPECT_EQ(again.candidates().size(), 1u);
  EXPECT_EQ(outputs_after(run, again, run.pack), want);
}

TEST(GpuSlice, CudaGraphAndAutotuneBindTheView) {
  DNNGRAPH_REQUIRE_GPU();
  MemoryCache cache;
  const auto make = a_slice_by_b_slice();
  GpuRun run;
  ASSERT_TRUE(run.prepare(make, CompareOptions{}).is_ok());
  const auto want = outputs_after(run, run.g, run.pack);

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_NO_FATAL_FAILURE(make_cuda_graph(run, graph, exec));
  const auto got = outputs_after_launch(run, exec);
  EXPECT_EQ(got, want);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);

  // The autotuner's own buffers (one per graph tensor the caller binds: none for the view).
  AutotuneOptions opts;
  opts.iterations = 5;
  opts.rotate_inputs = 2;
  const int64_t ws = run.g.get_autotune_workspace_size().value();
  void* w = nullptr;
  if (ws > 0) {
    ASSERT_EQ(cudaMalloc(&w, static_cast<size_t>(ws)), cudaSuccess);
  }
  auto tuned = run.g.autotune(*run.handle, run.pack, w, ws, opts);
  ASSERT_TRUE(tuned.is_ok()) << tuned.status().to_string();
  EXPECT_FALSE(tuned->selected_name.empty());
  if (w) cudaFree(w);
  ASSERT_TRUE(run.run_once().is_ok());
  auto r = compare_with_reference(run, make, CompareOptions{});
  EXPECT_EQ(r.mismatches, 0) << r.first_mismatch;
}

}  // namespace
}  // namespace dnngraph::gpu_test
