// Deviceless (ahead-of-time) builds in the cuDNN engine: a GPU's properties (properties_of), the
// DEVICEPROP descriptor a deviceless handle carries, and the one place that hands it to the
// heuristics, engine and execution plan descriptors instead of a cudnnHandle_t (cuDNN >= 9.8).
#include "dnngraph/engines/device_properties.hpp"

#include <dlfcn.h>

#include "dnngraph/engines/cudnn.hpp"
#include "engines/cudnn/plan.hpp"

namespace dnngraph {
namespace cudnn {
namespace {

constexpr int64_t kFirstVersion = 90800;  // CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR

Status check_version(std::string_view what) {
  if (!api())
    return make_error(ErrorCode::NotSupported, what,
                      ": the cuDNN engine is unavailable: ", load_info().error);
#if CUDNN_VERSION >= 90800
  if (load_info().version >= kFirstVersion) return Status::ok();
#endif
  return make_error(ErrorCode::NotSupported, what, ": device properties need cuDNN 9.8 or later (",
                    "headers and library), this is ", backend_version_string());
}

// The JSON of a finalized DEVICEPROP descriptor.
Result<std::string> json_of(const Descriptor& d) {
#if CUDNN_VERSION >= 90800
  int64_t n = 0;
  DNNGRAPH_TRY(d.get(CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, 0, &n, nullptr));
  std::string text(static_cast<size_t>(n), '\0');
  DNNGRAPH_TRY(
      d.get(CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, n, &n, text.data()));
  text.resize(static_cast<size_t>(n));
  while (!text.empty() && text.back() == '\0') text.pop_back();
  return text;
#else
  (void)d;
  return make_error(ErrorCode::NotSupported, "device properties need cuDNN 9.8 headers");
#endif
}

}  // namespace

// Measured with cuDNN 9.19 on a machine without a GPU or driver (docs/cudnn-engine.md,
// "Deviceless builds"): the DEVICEPROP descriptor, the operation graph and the heuristics
// finalize, but every engine config fails with NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING
// ("libcuda == nullptr"): cuDNN compiles and loads kernels through the driver library even
// when it plans for a GPU it does not have. Say so up front instead of "no engine".
Status check_driver_library(const DeviceProperties& target) {
  if (void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
    dlclose(lib);
    return Status::ok();
  }
  const char* why = dlerror();
  return make_error(ErrorCode::NotSupported, "deviceless build for ", target.describe(), ": cuDNN ",
                    backend_version_string(),
                    " needs the CUDA driver library (libcuda.so.1) to compile and load a plan's "
                    "kernels even without a GPU, and this machine has none (",
                    why ? why : "not found",
                    "); build on a machine with the NVIDIA driver installed");
}

Result<Descriptor> device_properties_descriptor(const DeviceProperties& props) {
  const std::string what = "device properties of " + props.describe();
  DNNGRAPH_TRY(check_version(what));
#if CUDNN_VERSION >= 90800
  DNNGRAPH_ASSIGN_OR_RETURN(auto d, Descriptor::create(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, what));
  const std::string& json = props.to_json();
  DNNGRAPH_TRY(d.set(CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR,
                     static_cast<int64_t>(json.size()), json.data()));
  Status s = d.finalize(ErrorCode::InvalidArgument);
  if (!s)
    return make_error(ErrorCode::InvalidArgument, s.message(),
                      "; cuDNN does not accept this device properties JSON: make it with "
                      "create_device_properties() (DeviceProperties::from_device) on the GPU");
  return d;
#else
  return make_error(ErrorCode::NotSupported, what, ": needs cuDNN 9.8 headers");
#endif
}

Status set_device_properties(Descriptor& d, DevicePropUse use, cudnnBackendDescriptor_t props) {
  if (!props) return Status::ok();
#if CUDNN_VERSION >= 90800
  switch (use) {
    case DevicePropUse::Heuristics:
      return d.set(CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, props);
    case DevicePropUse::Engine:
      return d.set(CUDNN_ATTR_ENGINE_DEVICEPROP, props);
    case DevicePropUse::Plan:
      return d.set(CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP, props);
  }
#endif
  (void)d, (void)use;
  return make_error(ErrorCode::NotSupported, d.what(),
                    ": a deviceless build needs cuDNN 9.8 or later headers");
}

// DeviceProperties::from_device, through the engine interface's DeviceProvider (devices.cpp).
Result<DevicePropertiesPtr> properties_of(int device) {
  const std::string what = detail::cat("device properties of cuda:", device);
  DNNGRAPH_TRY(cudnn::check_version(what));
#if CUDNN_VERSION >= 90800
  DNNGRAPH_ASSIGN_OR_RETURN(auto d,
                            cudnn::Descriptor::create(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, what));
  const int32_t id = device;
  DNNGRAPH_TRY(d.set(CUDNN_ATTR_DEVICEPROP_DEVICE_ID, CUDNN_TYPE_INT32, id));
  Status s = d.finalize(ErrorCode::NotSupported);
  if (!s)
    return make_error(
        ErrorCode::NotSupported, s.message(),
        "; reading a GPU's properties needs that GPU (to build for a GPU this "
        "machine lacks, use DeviceProperties::from_json with properties saved there)");
  DNNGRAPH_ASSIGN_OR_RETURN(auto json, cudnn::json_of(d));
  return DeviceProperties::from_json(json);
#else
  return make_error(ErrorCode::NotSupported, what, ": needs cuDNN 9.8 headers");
#endif
}

}  // namespace cudnn
}  // namespace dnngraph
