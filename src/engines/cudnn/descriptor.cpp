#include "engines/cudnn/descriptor.hpp"

#include <array>
#include <optional>
#include <string>

namespace dnngraph::cudnn {

Status check(cudnnStatus_t s, std::string_view context, std::string_view what,
             ErrorCode code_if_failed) {
  if (s == CUDNN_STATUS_SUCCESS) return Status::ok();
  const Api* a = api();
  if (!a) return make_error(ErrorCode::BackendError, context, ": cuDNN is not loaded");
  std::array<char, 1024> last{};
  a->cudnnGetLastErrorString(last.data(), last.size());
  const int code = static_cast<int>(s);
  // 3000-3999: CUDNN_STATUS_NOT_SUPPORTED and its sub-codes.
  ErrorCode ec = (code >= 3000 && code < 4000) ? ErrorCode::NotSupported : code_if_failed;
  std::string msg =
      detail::cat(context, ": ", what, " failed: ", a->cudnnGetErrorString(s), " (", code, ")");
  if (last[0] != '\0') msg += detail::cat(": ", last.data());
  return Status(ec, std::move(msg));
}

Descriptor::~Descriptor() {
  if (d_) api()->cudnnBackendDestroyDescriptor(d_);
}

Descriptor& Descriptor::operator=(Descriptor&& o) noexcept {
  if (this != &o) {
    if (d_) api()->cudnnBackendDestroyDescriptor(d_);
    d_ = std::exchange(o.d_, nullptr);
    what_ = std::move(o.what_);
  }
  return *this;
}

Result<Descriptor> Descriptor::create(cudnnBackendDescriptorType_t type, std::string what) {
  const Api* a = api();
  if (!a)
    return make_error(ErrorCode::BackendError, what, ": cuDNN is not loaded: ", load_info().error);
  Descriptor d;
  d.what_ = std::move(what);
  DNNGRAPH_TRY(check(a->cudnnBackendCreateDescriptor(type, &d.d_), d.what_,
                     detail::cat("creating descriptor type ", static_cast<int>(type))));
  return d;
}

Status Descriptor::set(cudnnBackendAttributeName_t attr, cudnnBackendAttributeType_t type,
                       int64_t count, const void* data) {
  return check(api()->cudnnBackendSetAttribute(d_, attr, type, count, data), what_,
               detail::cat("setting attribute ", static_cast<int>(attr)), ErrorCode::NotSupported);
}

Status Descriptor::finalize(ErrorCode code_if_failed) {
  return check(api()->cudnnBackendFinalize(d_), what_, "finalize", code_if_failed);
}

Status Descriptor::get(cudnnBackendAttributeName_t attr, cudnnBackendAttributeType_t type,
                       int64_t requested, int64_t* count, void* out) const {
  return check(api()->cudnnBackendGetAttribute(d_, attr, type, requested, count, out), what_,
               detail::cat("reading attribute ", static_cast<int>(attr)));
}

namespace {

// names[i]; nullopt for an index outside them.
template <size_t N>
std::optional<std::string_view> name_at(const std::string_view (&names)[N], int i) {
  if (i < 0 || i >= static_cast<int>(N)) return std::nullopt;
  return names[i];
}

}  // namespace

std::string_view numerical_note_name(int note) {
  static constexpr std::string_view kNames[] = {"TENSOR_CORE",
                                                "DOWN_CONVERT_INPUTS",
                                                "REDUCED_PRECISION_REDUCTION",
                                                "FFT",
                                                "NONDETERMINISTIC",
                                                "WINOGRAD",
                                                "WINOGRAD_TILE_4x4",
                                                "WINOGRAD_TILE_6x6",
                                                "WINOGRAD_TILE_13x13",
                                                "STRICT_NAN_PROP"};
  return name_at(kNames, note).value_or("UNKNOWN_NUMERICAL_NOTE");
}

std::string_view behavior_note_name(int note) {
  static constexpr std::string_view kNames[] = {
      "RUNTIME_COMPILATION", "REQUIRES_FILTER_INT8x32_REORDER", "REQUIRES_BIAS_INT8x32_REORDER",
      "SUPPORTS_CUDA_GRAPH_NATIVE_API", "CUBLASLT_DEPENDENCY"};
  return name_at(kNames, note).value_or("UNKNOWN_BEHAVIOR_NOTE");
}

std::string knob_name(int knob) {
  static constexpr std::string_view kNames[] = {"SPLIT_K",
                                                "SWIZZLE",
                                                "TILE_SIZE",
                                                "USE_TEX",
                                                "EDGE",
                                                "KBLOCK",
                                                "LDGA",
                                                "LDGB",
                                                "CHUNK_K",
                                                "SPLIT_H",
                                                "WINO_TILE",
                                                "MULTIPLY",
                                                "SPLIT_K_BUF",
                                                "TILEK",
                                                "STAGES",
                                                "REDUCTION_MODE",
                                                "CTA_SPLIT_K_MODE",
                                                "SPLIT_K_SLC",
                                                "IDX_MODE",
                                                "SLICED",
                                                "SPLIT_RS",
                                                "SINGLEBUFFER",
                                                "LDGC",
                                                "SPECFILT",
                                                "KERNEL_CFG",
                                                "WORKSPACE",
                                                "TILE_CGA",
                                                "TILE_CGA_M",
                                                "TILE_CGA_N",
                                                "BLOCK_SIZE",
                                                "OCCUPANCY",
                                                "ARRAY_SIZE_PER_THREAD",
                                                "NUM_C_PER_BLOCK",
                                                "SPLIT_COLS",
                                                "TILE_ROWS",
                                                "TILE_COLS",
                                                "LOAD_SIZE",
                                                "CTA_COUNT",
                                                "STREAM_K",
                                                "SPLIT_P_SLC",
                                                "TILE_M",
                                                "TILE_N",
                                                "WARP_SPEC_CFG",
                                                "SWAP_AB"};
  const auto name = name_at(kNames, knob);
  return name ? std::string(*name) : "KNOB" + std::to_string(knob);
}

}  // namespace dnngraph::cudnn
