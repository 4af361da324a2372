// Device properties and deviceless (ahead-of-time) builds on the CPU machine: the H200's
// properties (tests/data/devprop_h200.json, measured with the frontend's
// create_device_properties(0).serialize()) parse and compare; bad JSON is a clear error; a
// deviceless build of an H200 plan either succeeds (a machine with the CUDA driver) and
// serializes with its target, or says why it cannot (no cuDNN, no driver library).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/test_data.hpp"
#include "dnngraph/dnngraph.hpp"
#include "dnngraph/engines/cudnn.hpp"
#include "dnngraph/engines/device_properties.hpp"

namespace dnngraph {
namespace {

std::string fixture() { return test::read_test_data("devprop_h200.json"); }

// `text` with the first `"key":value` replaced by `"key":replacement`.
std::string with_field(std::string text, const std::string& key, const std::string& replacement) {
  const std::string tag = "\"" + key + "\":";
  const size_t at = text.find(tag);
  EXPECT_NE(at, std::string::npos) << key;
  const size_t from = at + tag.size();
  size_t to = from;
  while (to < text.size() && text[to] != ',' && text[to] != '}') ++to;
  return text.replace(from, to - from, replacement);
}

TEST(DeviceProperties, TheH200FixtureParsesAndRoundTrips) {
  const std::string text = fixture();
  auto p = DeviceProperties::from_json(text);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  const DeviceProperties& d = **p;
  EXPECT_EQ(d.device_name(), "NVIDIA H200");
  EXPECT_EQ(d.device_version(), 900);
  EXPECT_EQ(d.compute_capability(), "9.0");
  EXPECT_EQ(d.sm_count(), 132);
  EXPECT_EQ(d.device_id(), 0);
  EXPECT_EQ(d.max_shared_memory_per_block_optin(), 232448);
  EXPECT_EQ(d.describe(), "NVIDIA H200 (compute capability 9.0, 132 SMs)");
  EXPECT_EQ(d.to_json(), text);
  auto again = DeviceProperties::from_json(d.to_json());
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ((*again)->differences(d), "");
  EXPECT_TRUE((*again)->compatible_with(d));
}

TEST(DeviceProperties, BadJsonSaysWhatIsWrong) {
  auto syntax = DeviceProperties::from_json("{\"deviceVer\": 900,");
  ASSERT_FALSE(syntax.is_ok());
  EXPECT_EQ(syntax.status().code(), ErrorCode::InvalidArgument);
  EXPECT_NE(syntax.status().message().find("does not parse"), std::string::npos)
      << syntax.status().message();

  auto array = DeviceProperties::from_json("[900, 132]");
  ASSERT_FALSE(array.is_ok());
  EXPECT_NE(array.status().message().find("expected an object, found array"), std::string::npos)
      << array.status().message();

  auto missing = DeviceProperties::from_json("{\"multiProcessorCount\": 132}");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("'deviceVer' is missing"), std::string::npos)
      << missing.status().message();

  auto typed = DeviceProperties::from_json(with_field(fixture(), "multiProcessorCount", "\"x\""));
  ASSERT_FALSE(typed.is_ok());
  EXPECT_NE(typed.status().message().find("'multiProcessorCount' must be an integer, found \"x\""),
            std::string::npos)
      << typed.status().message();

  auto zero = DeviceProperties::from_json(with_field(fixture(), "deviceVer", "0"));
  ASSERT_FALSE(zero.is_ok());
  EXPECT_NE(zero.status().message().find("must be positive"), std::string::npos);
}

TEST(DeviceProperties, DifferencesNameTheComputeCapability) {
  auto h200 = DeviceProperties::from_json(fixture()).value();
  auto a100 =
      DeviceProperties::from_json(with_field(with_field(with_field(fixture(), "deviceVer", "800"),
                                                        "multiProcessorCount", "108"),
                                             "deviceName", "\"NVIDIA A100\""))
          .value();
  EXPECT_FALSE(h200->compatible_with(*a100));
  EXPECT_EQ(h200->differences(*a100),
            "compute capability 9.0 in the target, 8.0 on the device, SM count 132 in the "
            "target, 108 on the device, name 'NVIDIA H200' in the target, 'NVIDIA A100' on the "
            "device");
  // Same architecture, fewer SMs: the plan still runs, the difference is still reported.
  auto smaller = DeviceProperties::from_json(with_field(fixture(), "multiProcessorCount", "114"));
  ASSERT_TRUE(smaller.is_ok());
  EXPECT_TRUE(h200->compatible_with(**smaller));
  EXPECT_EQ(h200->differences(**smaller), "SM count 132 in the target, 114 on the device");
}

TEST(DeviceProperties, DevicelessHandlesCarryTheirTarget) {
  auto none = Handle::create_deviceless(nullptr);
  ASSERT_FALSE(none.is_ok());
  EXPECT_EQ(none.status().code(), ErrorCode::InvalidArgument);
  auto props = DeviceProperties::from_json(with_field(fixture(), "cudaDeviceId", "1")).value();
  auto h = Handle::create_deviceless(props);
  ASSERT_TRUE(h.is_ok()) << h.status().message();
  EXPECT_EQ((*h)->target(), props);
  EXPECT_EQ((*h)->device(), Device::cuda(1));
  auto back = DeviceProperties::from_handle(**h);
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(*back, props);
  auto cpu = Handle::create(Device::cpu()).value();
  EXPECT_EQ(cpu->target(), nullptr);
  auto from_cpu = DeviceProperties::from_handle(*cpu);
  ASSERT_FALSE(from_cpu.is_ok());
  EXPECT_NE(from_cpu.status().message().find("cpu"), std::string::npos);
}

// Y = A @ B, fp16 in, fp32 compute: a graph every cuDNN 9 engine library has engines for.
void matmul_graph(Graph& g) {
  g.set_name("aot_matmul")
      .set_io_data_type(DataType::Half)
      .set_intermediate_data_type(DataType::Float)
      .set_compute_data_type(DataType::Float);
  auto a = g.tensor(ir::TensorAttrs().set_name("A").set_dim({1, 64, 32}).set_stride({2048, 32, 1}));
  auto b = g.tensor(ir::TensorAttrs().set_name("B").set_dim({1, 32, 48}).set_stride({1536, 48, 1}));
  auto y = g.matmul(a, b);
  y->set_output(true).set_name("Y").set_data_type(DataType::Half);
}

// The goal is a real H200 plan built here; what this machine allows decides which outcome is
// checked: cuDNN absent, the driver library absent (cuDNN 9.19 needs it to finalize any engine
// config: measured, docs/cudnn-engine.md), or a built, serializable plan.
TEST(DeviceProperties, DevicelessBuildOfAnH200PlanSucceedsOrSaysWhy) {
  auto props = DeviceProperties::from_json(fixture()).value();
  Graph g;
  matmul_graph(g);
  Status s = g.build_operation_graph(props);
  const CudnnInfo info = cudnn_info();
  if (!info.loaded) {
    ASSERT_FALSE(s.is_ok());
    EXPECT_EQ(s.code(), ErrorCode::NotSupported) << s.message();
    EXPECT_NE(s.message().find("cuDNN"), std::string::npos) << s.message();
    return;
  }
  if (!s.is_ok()) {
    EXPECT_EQ(s.code(), ErrorCode::NotSupported) << s.message();
    EXPECT_NE(s.message().find("libcuda.so.1"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("NVIDIA H200 (compute capability 9.0"), std::string::npos)
        << s.message();
    return;
  }
  ASSERT_TRUE(g.create_execution_plans({HeurMode::A, HeurMode::Fallback}).is_ok());
  ASSERT_TRUE(g.check_support().is_ok());
  Status built = g.build_plans();
  ASSERT_TRUE(built.is_ok()) << built.message();
  auto blob = g.serialize();
  ASSERT_TRUE(blob.is_ok()) << blob.status().message();
  EXPECT_NE(blob->find("\"target\""), std::string::npos);
  EXPECT_NE(blob->find("NVIDIA H200"), std::string::npos);
  // Built without a device: nothing runs it until it is deserialized onto one.
  auto cpu = Handle::create(Device::cpu()).value();
  Status run = g.execute(*cpu, {}, nullptr);
  ASSERT_FALSE(run.is_ok());
  EXPECT_NE(run.message().find("built without a device"), std::string::npos) << run.message();
}

TEST(DeviceProperties, CudnnChecksTheJsonItIsGiven) {
  if (!cudnn_info().loaded) GTEST_SKIP() << "cuDNN is not loadable here: " << cudnn_info().error;
  // Parses for dnngraph (the fields it reads are there) but lacks what cuDNN needs.
  auto thin = DeviceProperties::from_json(
                  "{\"deviceVer\":900,\"multiProcessorCount\":132,\"deviceName\":\"thin\"}")
                  .value();
  Graph g;
  matmul_graph(g);
  Status s = g.build_operation_graph(thin);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), ErrorCode::InvalidArgument) << s.message();
  EXPECT_NE(s.message().find("cuDNN does not accept this device properties JSON"),
            std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace dnngraph
