// The SM count target through the pipeline without a GPU: the reference engine ignores it (the
// same results, bit for bit, as without it, and the values a plain fp64 loop gives), and a
// deviceless cuDNN build refuses a target above its GPU's SM count, naming both numbers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/test_data.hpp"
#include "dnngraph/dnngraph.hpp"
#include "dnngraph/engines/cudnn.hpp"
#include "dnngraph/engines/device_properties.hpp"

namespace dnngraph {
namespace {

constexpr int64_t kB = 3, kM = 17, kK = 29, kN = 11;

// Y = relu(A @ B) in fp32, A [3,17,29], B [3,29,11], uids 1, 2, 3.
void matmul_relu(Graph& g, int32_t sm_count) {
  g.set_name("mm_relu").set_io_data_type(DataType::Float).set_sm_count(sm_count);
  auto a = g.tensor(ir::TensorAttrs()
                        .set_name("A")
                        .set_dim({kB, kM, kK})
                        .set_stride({kM * kK, kK, 1})
                        .set_uid(1));
  auto b = g.tensor(ir::TensorAttrs()
                        .set_name("B")
                        .set_dim({kB, kK, kN})
                        .set_stride({kK * kN, kN, 1})
                        .set_uid(2));
  auto y = g.relu(g.matmul(a, b, ir::MatmulAttrs()));
  y->set_output(true).set_name("Y").set_uid(3);
}

std::vector<float> run_on_cpu(int32_t sm_count, const std::vector<float>& a,
                              const std::vector<float>& b) {
  auto h = Handle::create(Device::cpu()).value();
  Graph g;
  matmul_relu(g, sm_count);
  Status s = g.build(h);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  for (const auto& c : g.candidates()) EXPECT_EQ(c.info.sm_count_target, -1) << c.info.name;
  std::vector<float> y(static_cast<size_t>(kB * kM * kN), std::numeric_limits<float>::quiet_NaN());
  std::vector<char> ws(static_cast<size_t>(std::max<int64_t>(g.get_workspace_size().value(), 1)));
  s = g.execute(
      *h, {{1, const_cast<float*>(a.data())}, {2, const_cast<float*>(b.data())}, {3, y.data()}},
      ws.data(), static_cast<int64_t>(ws.size()));
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return y;
}

TEST(SmCountReference, ResultsDoNotDependOnTheTarget) {
  std::random_device rd;  // fresh inputs each run: the result must not depend on them either
  const uint32_t seed = rd();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> a(static_cast<size_t>(kB * kM * kK)), b(static_cast<size_t>(kB * kK * kN));
  for (float& x : a) x = d(gen);
  for (float& x : b) x = d(gen);

  const std::vector<float> unset = run_on_cpu(Graph::kAllSms, a, b);
  // 100000: more SMs than any GPU has; a GPU scheduling hint means nothing to the CPU engine.
  for (int32_t n : {1, 8, 100000}) {
    SCOPED_TRACE(n);
    const std::vector<float> y = run_on_cpu(n, a, b);
    ASSERT_EQ(y.size(), unset.size());
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_EQ(std::memcmp(&y[i], &unset[i], sizeof(float)), 0)
          << "element " << i << ": " << y[i] << " vs " << unset[i];
  }
  for (int64_t bi = 0; bi < kB; ++bi)
    for (int64_t m = 0; m < kM; ++m)
      for (int64_t n = 0; n < kN; ++n) {
        double acc = 0;
        for (int64_t k = 0; k < kK; ++k)
          acc += static_cast<double>(a[static_cast<size_t>((bi * kM + m) * kK + k)]) *
                 b[static_cast<size_t>((bi * kK + k) * kN + n)];
        const double want = std::max(acc, 0.0);
        const float got = unset[static_cast<size_t>((bi * kM + m) * kN + n)];
        ASSERT_NEAR(got, want, 1e-5 * std::max(1.0, std::fabs(want))) << bi << "," << m << "," << n;
      }
}

TEST(SmCountReference, AnInvalidTargetIsRefusedAtBuild) {
  auto h = Handle::create(Device::cpu()).value();
  Graph g;
  matmul_relu(g, 0);
  Status s = g.build(h);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), ErrorCode::InvalidGraph) << s.to_string();
  EXPECT_NE(s.message().find("graph 'mm_relu': sm_count 0"), std::string::npos) << s.message();
}

std::string h200_properties() { return test::read_test_data("devprop_h200.json"); }

// The H200 has 132 SMs (tests/data/devprop_h200.json). A larger target is refused before cuDNN
// is asked; 132 and fewer are not refused for their SM count (the build then goes as far as
// this machine allows: docs/cudnn-engine.md, "Deviceless builds").
TEST(SmCountDeviceless, ATargetAboveTheGpusSmCountIsRefused) {
  if (!cudnn_info().built) GTEST_SKIP() << "this build has no cuDNN engine";
  if (!cudnn_info().loaded) GTEST_SKIP() << "cuDNN is not loadable here: " << cudnn_info().error;
  auto props = DeviceProperties::from_json(h200_properties()).value();
  ASSERT_EQ(props->sm_count(), 132);
  Graph g;
  matmul_relu(g, 133);
  Status s = g.build_operation_graph(props);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), ErrorCode::InvalidArgument) << s.to_string();
  for (const char* part : {"graph 'mm_relu'", "sm_count 133", "NVIDIA H200", "has 132",
                           "at most 132", "leave it unset"})
    EXPECT_NE(s.message().find(part), std::string::npos) << part << " | " << s.message();

  for (int32_t n : {132, 8}) {
    SCOPED_TRACE(n);
    Graph ok;
    matmul_relu(ok, n);
    Status t = ok.build_operation_graph(props);
    if (t.is_ok()) continue;  // a machine with the driver library: lowered for the H200
    EXPECT_EQ(t.message().find("sm_count"), std::string::npos) << t.message();
    EXPECT_NE(t.message().find("libcuda.so.1"), std::string::npos) << t.message();
  }
}

}  // namespace
}  // namespace dnngraph
