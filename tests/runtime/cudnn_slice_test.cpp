// Which slices the cuDNN engine lowers (as a strided view of a graph input read by other ops)
// and the refusals of the others, through Graph::validate(handle), which applies the engine's
// backend-free rules without a GPU. The lowering itself runs in tests/gpu/slice_test.cpp.
#include <gtest/gtest.h>

#include "dnngraph/dnngraph.hpp"
#include "dnngraph/engines/cudnn.hpp"

namespace dnngraph {
namespace {

ir::Tensor input(Graph& g, const char* name, std::vector<int64_t> dim,
                 DataType t = DataType::BFloat16) {
  const auto stride = ir::packed_strides(dim);
  return g.tensor(
      ir::TensorAttrs().set_name(name).set_dim(std::move(dim)).set_stride(stride).set_data_type(t));
}

ir::SliceAttrs window(std::vector<int64_t> start, std::vector<int64_t> end) {
  ir::SliceAttrs a;
  a.start = std::move(start);
  a.end = std::move(end);
  return a;
}

// What validate() on a CUDA handle says: ok when the cuDNN engine's precheck passes (or no
// engine of this build runs on CUDA, then `built` is false).
Status on_cuda(Graph& g, bool& built) {
  built = cudnn_info().built;
  auto gpu_like = std::make_shared<Handle>(Device::cuda(0));  // no GPU needed: no backend call
  EXPECT_TRUE(g.validate(nullptr).is_ok());
  return g.validate(gpu_like);
}

// EXPECTs validate() on a CUDA handle to refuse `g` (NotSupported) with every part in its
// message; ok instead when no engine of this build runs on CUDA.
void expect_refused_on_cuda(Graph& g, std::initializer_list<const char*> parts) {
  bool built = false;
  Status s = on_cuda(g, built);
  if (!built) {
    EXPECT_TRUE(s.is_ok()) << "no engine of this build runs on cuda: " << s.to_string();
    return;
  }
  EXPECT_EQ(s.code(), ErrorCode::NotSupported) << s.to_string();
  for (const char* part : parts)
    EXPECT_NE(s.message().find(part), std::string::npos) << part << " not in: " << s.message();
}

TEST(CudnnSlice, SliceOfAGraphInputFeedingAMatmulPassesThePrecheck) {
  Graph g;
  g.set_io_data_type(DataType::BFloat16);
  auto a = g.slice(input(g, "A", {4, 64, 96}), window({0, 8, 16}, {4, 40, 80}), {"a_slice"});
  auto b = g.slice(input(g, "B", {4, 96, 48}), window({0, 16, 8}, {4, 80, 40}), {"b_slice"});
  g.matmul(a, b, {}, {"mm", DataType::Float})->set_output(true).set_name("C");
  bool built = false;
  Status s = on_cuda(g, built);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
}

TEST(CudnnSlice, SliceOfAnOpsOutputIsRefusedSayingWhatIsLowered) {
  Graph g;
  g.set_io_data_type(DataType::Float);
  auto r = g.relu(input(g, "X", {4, 64, 96}, DataType::Float), {"r"});
  auto s0 = g.slice(r, window({0, 8, 16}, {4, 40, 80}), {"cut"});
  g.relu(s0, {"r2"})->set_output(true).set_name("Y");
  expect_refused_on_cuda(g, {"slice 'cut'", "is written by pointwise 'r'",
                             "lowers a slice only as a strided view of a graph input",
                             "make the sliced tensor a graph input", "reference engine"});
}

TEST(CudnnSlice, SliceIntoAGraphOutputIsRefusedSayingWhatToDo) {
  Graph g;
  g.set_io_data_type(DataType::Float);
  auto y = g.slice(input(g, "X", {4, 64, 96}, DataType::Float), window({0, 8, 16}, {4, 40, 80}),
                   {"cut"});
  y->set_output(true).set_name("Y");
  expect_refused_on_cuda(g, {"slice 'cut'", "'Y'", "is a graph output", "read the window of 'X'",
                             "feed the slice to the op that needs it"});
}

TEST(CudnnSlice, AWindowNotStartingOnA16ByteBoundaryIsRefused) {
  Graph g;
  g.set_io_data_type(DataType::BFloat16);
  // A[:, 8:40, 1:65] of bf16 [4, 64, 96]: starts (8 * 96 + 1) * 2 = 1538 bytes in.
  auto a = g.slice(input(g, "A", {4, 64, 96}), window({0, 8, 1}, {4, 40, 65}), {"a_slice"});
  auto b = g.slice(input(g, "B", {4, 96, 48}), window({0, 16, 8}, {4, 80, 40}), {"b_slice"});
  g.matmul(a, b, {}, {"mm", DataType::Float})->set_output(true).set_name("C");
  expect_refused_on_cuda(g, {"slice 'a_slice'", "starts 1538 bytes into", "not a multiple of 16"});
}

TEST(CudnnSlice, TheReferenceEngineStillRunsTheRefusedForms) {
  // The refusals are the cuDNN engine's alone: a CPU handle runs a slice into a graph output.
  Graph g;
  g.set_io_data_type(DataType::Float);
  auto x = input(g, "X", {2, 3, 4}, DataType::Float);
  ir::SliceAttrs a = window({1, 0, 1}, {2, 3, 4});
  a.stride = {1, 2, 2};
  auto y = g.slice(x, a, {"cut"});
  y->set_output(true).set_name("Y");
  auto h = Handle::create(Device::cpu()).value();
  ASSERT_TRUE(g.build(h).is_ok());
  std::vector<float> hx(24), hy(4, -1.0f);
  for (size_t i = 0; i < hx.size(); ++i) hx[i] = static_cast<float>(i);
  std::vector<unsigned char> ws(
      static_cast<size_t>(std::max<int64_t>(g.get_workspace_size().value(), 1)));
  ASSERT_TRUE(g.execute(*h, {{x->uid, hx.data()}, {y->uid, hy.data()}}, ws.data(),
                        static_cast<int64_t>(ws.size()))
                  .is_ok());
  // X[1, 0:3:2, 1:4:2]: elements 12 + {0, 8} + {1, 3}.
  EXPECT_EQ(hy, (std::vector<float>{13, 15, 21, 23}));
}

}  // namespace
}  // namespace dnngraph
