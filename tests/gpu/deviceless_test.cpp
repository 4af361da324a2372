// Deviceless (ahead-of-time) builds on the GPU: properties read from the live device travel as
// JSON text, a graph is built for them with no handle, serialized, deserialized with a handle on
// the GPU, executed and compared with the reference engine; the refusals name what is wrong.
#include <cctype>
#include <cstdio>

#include "dnngraph/engines/device_properties.hpp"
#include "harness.hpp"

namespace dnngraph::gpu_test {
namespace {

void matmul_bias_relu(Graph& g) {
  const DataType t = DataType::Half;
  g.set_name("aot_matmul_bias_relu").set_io_data_type(t);
  auto a = input(g, "A", {2, 64, 32}, t);
  auto b = input(g, "B", {2, 32, 48}, t);
  auto bias = input(g, "Bias", {1, 1, 48}, t);
  finish(g.relu(g.add(g.matmul(a, b), bias)), "Y", {2, 64, 48}, t);
}

// The live device's properties, through their JSON text (as if saved on the GPU machine and
// read back on a build machine).
Result<DevicePropertiesPtr> live_properties_as_text() {
  DNNGRAPH_ASSIGN_OR_RETURN(auto live, DeviceProperties::from_device(0));
  return DeviceProperties::from_json(live->to_json());
}

// Builds deviceless, checks that the deviceless graph refuses to run, serializes it and
// deserializes it onto `h`.
Status build_deviceless_then_deserialize(Graph& g, const HandlePtr& h, std::string* bytes) {
  DNNGRAPH_ASSIGN_OR_RETURN(auto props, live_properties_as_text());
  DNNGRAPH_TRY(g.build_operation_graph(props));
  DNNGRAPH_TRY(g.create_execution_plans({HeurMode::A, HeurMode::Fallback}));
  DNNGRAPH_TRY(g.check_support());
  DNNGRAPH_TRY(g.build_plans());
  Status run = g.execute(*h, {}, nullptr);
  if (run.is_ok() || run.message().find("built without a device") == std::string::npos)
    return make_error(ErrorCode::Internal,
                      "a deviceless graph ran or failed otherwise: ", run.message());
  DNNGRAPH_ASSIGN_OR_RETURN(*bytes, g.serialize());
  return g.deserialize(h, *bytes);
}

TEST(GpuDeviceless, BuiltWithoutTheDeviceThenDeserializedRunsAndMatches) {
  DNNGRAPH_REQUIRE_GPU();
  if (backend_version() < 90800) GTEST_SKIP() << "device properties need cuDNN 9.8";
  std::string bytes;
  CompareOptions o{.min_abs = 2e-2};
  o.build = [&](Graph& g, const HandlePtr& h) {
    return build_deviceless_then_deserialize(g, h, &bytes);
  };
  RunReport r = run_and_compare(matmul_bias_relu, o);
  std::printf(
      "DEVICELESS_RESULT matmul+bias+relu fp16: plan %s, %zu bytes serialized, %lld "
      "compared, %lld mismatches, max abs err %g\n",
      r.plan_name.c_str(), bytes.size(), static_cast<long long>(r.compared),
      static_cast<long long>(r.mismatches), r.max_abs_err);
  ASSERT_TRUE(r.status.is_ok()) << r.status.message();
  EXPECT_NE(bytes.find("\"target\""), std::string::npos);
  EXPECT_GT(r.compared, 0);
  EXPECT_EQ(r.mismatches, 0) << r.first_mismatch;
}

TEST(GpuDeviceless, ADeviceOfAnotherComputeCapabilityIsRefusedSayingWhatDiffers) {
  DNNGRAPH_REQUIRE_GPU();
  if (backend_version() < 90800) GTEST_SKIP() << "device properties need cuDNN 9.8";
  auto h = Handle::create(Device::cuda(0)).value();
  auto props = live_properties_as_text();
  ASSERT_TRUE(props.is_ok()) << props.status().message();
  Graph g;
  matmul_bias_relu(g);
  Status built = g.build_operation_graph(*props);
  if (built.is_ok()) built = g.create_execution_plans({HeurMode::A, HeurMode::Fallback});
  if (built.is_ok()) built = g.check_support();
  if (built.is_ok()) built = g.build_plans();
  ASSERT_TRUE(built.is_ok()) << built.message();
  auto bytes = g.serialize();
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().message();
  // The same blob claiming another architecture (the stored target, edited).
  const std::string key = "\\\"deviceVer\\\":";  // inside the JSON string "target"
  std::string other = *bytes;
  const size_t at = other.find(key);
  ASSERT_NE(at, std::string::npos) << other.substr(0, 300);
  const size_t from = at + key.size();
  size_t to = from;
  while (to < other.size() && std::isdigit(static_cast<unsigned char>(other[to]))) ++to;
  const bool is_80 = other.substr(from, to - from) == "800";
  other.replace(from, to - from, is_80 ? "900" : "800");
  Graph back;
  Status s = back.deserialize(h, other);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), ErrorCode::InvalidArgument) << s.message();
  EXPECT_NE(s.message().find(is_80 ? "compute capability 9.0 in the target"
                                   : "compute capability 8.0 in the target"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("built ahead of time"), std::string::npos) << s.message();
  // The unedited blob deserializes.
  Graph ok;
  Status good = ok.deserialize(h, *bytes);
  EXPECT_TRUE(good.is_ok()) << good.message();
}

}  // namespace
}  // namespace dnngraph::gpu_test
