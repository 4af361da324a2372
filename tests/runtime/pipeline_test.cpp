// The build pipeline and execute-time validation on the reference engine.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "common/add_relu.hpp"
#include "dnngraph/dnngraph.hpp"

namespace dnngraph {
namespace {

using test::AddRelu;
using test::cpu;
using test::random_vec;

TEST(Pipeline, RunsAndMatchesHandComputedValues) {
  AddRelu t;
  auto h = cpu();
  ASSERT_TRUE(t.g.build(h).is_ok());
  EXPECT_EQ(t.g.get_execution_plan_count(), 1);
  auto a = random_vec(24, 1), b = random_vec(24, 2);
  std::vector<float> y(24, std::numeric_limits<float>::quiet_NaN());
  std::vector<char> ws(static_cast<size_t>(std::max<int64_t>(t.g.get_workspace_size().value(), 1)));
  VariantPack pack{{1, a.data()}, {2, b.data()}, {3, y.data()}};
  Status s = t.g.execute(*h, pack, ws.data(), static_cast<int64_t>(ws.size()));
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  for (size_t i = 0; i < 24; ++i) EXPECT_FLOAT_EQ(y[i], std::max(a[i] + b[i], 0.f)) << i;
}

TEST(Pipeline, StepsOutOfOrderAreErrors) {
  AddRelu t;
  Status s = t.g.check_support();
  EXPECT_EQ(s.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(s.message().find("create_execution_plans"), std::string::npos) << s.message();
  auto ws = t.g.get_workspace_size();
  EXPECT_FALSE(ws.is_ok());
}

class BadPack : public ::testing::Test {
 protected:
  void SetUp() override {
    h = cpu();
    ASSERT_TRUE(t.g.build(h).is_ok());
    ws.resize(static_cast<size_t>(t.g.get_workspace_size().value()) + 1);
  }
  // Runs `pack` and checks the error names `fragment` and that Y was not written.
  void expect_rejected(VariantPack pack, const std::string& fragment, int64_t ws_bytes = -1) {
    std::vector<float> before = y;
    if (pack.count(3)) pack[3] = y.data();
    Status s =
        t.g.execute(*h, pack, ws.data(), ws_bytes < 0 ? static_cast<int64_t>(ws.size()) : ws_bytes);
    EXPECT_EQ(s.code(), ErrorCode::InvalidArgument) << s.to_string();
    EXPECT_NE(s.message().find(fragment), std::string::npos) << s.message();
    EXPECT_EQ(std::memcmp(before.data(), y.data(), y.size() * sizeof(float)), 0)
        << "output written by a rejected execute";
  }
  AddRelu t;
  HandlePtr h;
  std::vector<char> ws;
  std::vector<float> a = random_vec(24, 3), b = random_vec(24, 4), y = random_vec(24, 5);
};

TEST_F(BadPack, MissingUidNamesTheTensor) {
  expect_rejected({{1, a.data()}, {3, y.data()}}, "'B'");
}

TEST_F(BadPack, NullPointerNamesTheTensor) {
  expect_rejected({{1, a.data()}, {2, nullptr}, {3, y.data()}}, "'B' (uid 2) has a null pointer");
}

TEST_F(BadPack, UnknownUid) {
  expect_rejected({{1, a.data()}, {2, b.data()}, {3, y.data()}, {77, a.data()}}, "uid 77");
}

TEST_F(BadPack, WorkspaceTooSmall) {
  const int64_t need = t.g.get_workspace_size().value();
  ASSERT_GT(need, 0) << "the reference engine keeps virtual tensors in the workspace";
  expect_rejected({{1, a.data()}, {2, b.data()}, {3, y.data()}}, "workspace too small", need - 1);
}

TEST_F(BadPack, WrongDeviceHandle) {
  // A handle object on another device kind must be refused before anything runs.
  Handle gpu_like(Device::cuda(0));
  std::vector<float> before = y;
  Status s = t.g.execute(gpu_like, {{1, a.data()}, {2, b.data()}, {3, y.data()}}, ws.data());
  EXPECT_EQ(s.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(s.message().find("cuda:0"), std::string::npos) << s.message();
  EXPECT_EQ(before, y);
}

TEST(Pipeline, PlanIndexOutOfRange) {
  AddRelu t;
  auto h = cpu();
  ASSERT_TRUE(t.g.build(h).is_ok());
  Status s = t.g.build_plan_at_index(5);
  EXPECT_EQ(s.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(s.message().find("out of range"), std::string::npos);
}

TEST(Pipeline, SerializeRoundTripRunsTheSameGraph) {
  AddRelu t;
  auto h = cpu();
  ASSERT_TRUE(t.g.build(h).is_ok());
  auto blob = t.g.serialize();
  ASSERT_TRUE(blob.is_ok()) << blob.status().to_string();
  Graph g2;
  Status s = g2.deserialize(h, *blob);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  auto a = random_vec(24, 7), b = random_vec(24, 8);
  std::vector<float> y(24, std::numeric_limits<float>::quiet_NaN());
  std::vector<char> ws(static_cast<size_t>(g2.get_workspace_size().value()));
  s = g2.execute(*h, {{1, a.data()}, {2, b.data()}, {3, y.data()}}, ws.data());
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  for (size_t i = 0; i < 24; ++i) EXPECT_FLOAT_EQ(y[i], std::max(a[i] + b[i], 0.f));
}

TEST(Pipeline, DeserializeRejectsGarbage) {
  Graph g;
  Status s = g.deserialize(cpu(), "{not json");
  EXPECT_EQ(s.code(), ErrorCode::InvalidArgument);
  s = g.deserialize(cpu(), R"({"format":"dnngraph-built-graph","version":99})");
  EXPECT_NE(s.message().find("99"), std::string::npos) << s.message();
}

// A handle on cuda:0 without a GPU: validate() makes no backend call.
HandlePtr gpu_like() { return std::make_shared<Handle>(Device::cuda(0)); }

// EXPECTs the CPU engine to accept `g` and validate() on a CUDA handle to refuse it
// (NotSupported) with every part in its message; ok instead when no engine of this build runs
// on CUDA.
void expect_refused_on_cuda_only(Graph& g, std::initializer_list<const char*> parts) {
  EXPECT_TRUE(g.validate(cpu()).is_ok());
  Status s = g.validate(gpu_like());
  if (!cudnn_info().built) {
    EXPECT_TRUE(s.is_ok()) << "no engine of this build runs on cuda: " << s.to_string();
    return;
  }
  EXPECT_EQ(s.code(), ErrorCode::NotSupported) << s.to_string();
  for (const char* part : parts)
    EXPECT_NE(s.message().find(part), std::string::npos) << part << " not in: " << s.message();
}

// validate(handle) applies the rules the engine of that handle knows without a backend call:
// the cuDNN engine refuses what the frontend refuses at validate() (a bottom-right causal mask
// with s_q > s_kv and no padding mask); the CPU engine runs it.
TEST(Pipeline, ValidateWithAHandleAppliesThatEnginesRules) {
  auto make = [](bool padding) {
    auto g = std::make_unique<Graph>();
    g->set_io_data_type(DataType::Half);
    auto in = [&](const char* name, std::vector<int64_t> dim, DataType t) {
      const auto stride = ir::packed_strides(dim);
      return g->tensor(ir::TensorAttrs()
                           .set_name(name)
                           .set_dim(std::move(dim))
                           .set_stride(stride)
                           .set_data_type(t));
    };
    auto q = in("q", {1, 2, 24, 8}, DataType::Half), k = in("k", {1, 2, 16, 8}, DataType::Half);
    auto v = in("v", {1, 2, 16, 8}, DataType::Half);
    ir::SdpaAttrs a;
    a.causal = true;
    a.diagonal_alignment = DiagonalAlignment::BottomRight;
    ir::SdpaInputs extra;
    if (padding) {
      a.padding_mask = true;
      extra.seq_len_q = in("len_q", {1, 1, 1, 1}, DataType::Int32);
      extra.seq_len_kv = in("len_kv", {1, 1, 1, 1}, DataType::Int32);
    }
    auto out = g->sdpa(q, k, v, a, extra, {"attn"});
    out[0]->set_output(true);
    return g;
  };
  auto g = make(false);
  EXPECT_TRUE(g->validate(nullptr).is_ok());
  expect_refused_on_cuda_only(*g,
                              {"sdpa 'attn'", "bottom-right right bound (causal) with s_q > s_kv"});
  EXPECT_TRUE(make(true)->validate(gpu_like()).is_ok());
}

// Attention rows off a 16-byte boundary (Q [1,2,16,16] bf16 read from rows of 17: a stride of
// 34 bytes) are refused for cuDNN, which reads them wrongly, naming Q and the stride; the CPU
// engine runs the graph, and rows of 24 (48 bytes) pass on CUDA too.
TEST(Pipeline, AttentionRowsOffSixteenBytesAreRefusedForCuda) {
  auto make = [](int64_t row) {
    auto g = std::make_unique<Graph>();
    g->set_io_data_type(DataType::BFloat16);
    auto in = [&](const char* name, std::vector<int64_t> stride) {
      return g->tensor(ir::TensorAttrs()
                           .set_name(name)
                           .set_dim({1, 2, 16, 16})
                           .set_stride(std::move(stride))
                           .set_data_type(DataType::BFloat16));
    };
    auto q = in("q", {2 * 16 * row, 16 * row, row, 1});
    auto k = in("k", {512, 256, 16, 1}), v = in("v", {512, 256, 16, 1});
    auto out = g->sdpa(q, k, v, ir::SdpaAttrs{}, {}, {"attn"});
    out[0]->set_output(true);
    return g;
  };
  expect_refused_on_cuda_only(*make(17), {"sdpa 'attn'", "Q ", "a stride of 17 elements (34 bytes)",
                                          "not a multiple of 16 bytes"});
  EXPECT_TRUE(make(24)->validate(gpu_like()).is_ok());
}

TEST(Pipeline, CudaHandleWithoutGpuFailsPolitely) {
  auto info = system_info();
  if (!info.gpus.empty()) GTEST_SKIP() << "a GPU is present";
  auto h = Handle::create(Device::cuda(0));
  ASSERT_FALSE(h.is_ok());
  EXPECT_EQ(h.status().code(), ErrorCode::NotSupported);
  const std::string msg = h.status().message();
  // Why (in the user's terms, as system_info reports it) and the way out, once.
  ASSERT_FALSE(info.gpu_error.empty());
  EXPECT_NE(msg.find("cannot create a handle on cuda:0: " + info.gpu_error + "; "),
            std::string::npos)
      << msg;
  const std::string hint = "use Handle::create(Device::cpu()) for the reference engine";
  ASSERT_NE(msg.find(hint), std::string::npos) << msg;
  EXPECT_EQ(msg.find(hint), msg.rfind(hint)) << msg;
  EXPECT_EQ(msg.find("insufficient"), std::string::npos) << msg;  // cudart's words
}

}  // namespace
}  // namespace dnngraph
