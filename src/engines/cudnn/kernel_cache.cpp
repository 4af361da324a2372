// The cuDNN backend kernel cache behind dnngraph::KernelCache: created on first use with the
// operation graph of the first dynamic-shape graph that uses it (cuDNN >= 9.5), loaded from
// bytes where the cache was made from them (cuDNN >= 9.10), and serialized to cuDNN's JSON.
#include "dnngraph/engines/cudnn.hpp"
#include "engines/cudnn/plan.hpp"

namespace dnngraph::cudnn {
namespace {

class CudnnKernelCache final : public KernelCacheBackend {
 public:
  explicit CudnnKernelCache(Descriptor d) : d_(std::move(d)) {}
  std::string_view engine() const override { return "cudnn"; }
  cudnnBackendDescriptor_t get() const { return d_.get(); }

  Result<std::string> serialize() const override {
    if (load_info().version < 91000)
      return make_error(ErrorCode::NotSupported, "kernel cache: cuDNN ", backend_version_string(),
                        " cannot serialize its kernel cache (cuDNN 9.10 or later can)");
    int64_t n = 0;
    DNNGRAPH_TRY(
        d_.get(CUDNN_ATTR_KERNEL_CACHE_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, 0, &n, nullptr));
    std::string json(static_cast<size_t>(n), '\0');
    DNNGRAPH_TRY(
        d_.get(CUDNN_ATTR_KERNEL_CACHE_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, n, &n, json.data()));
    while (!json.empty() && json.back() == '\0') json.pop_back();
    return json;
  }

 private:
  Descriptor d_;
};

}  // namespace

Result<KernelCacheLock> lock_kernel_cache(const LoweredState& st) {
  KernelCache& kc = *st.kernel_cache;
  KernelCacheLock out{std::unique_lock<std::mutex>(kc.mutex()), nullptr};
  if (auto& b = kc.backend()) {
    if (b->engine() != "cudnn")
      return make_error(ErrorCode::InvalidArgument, st.what,
                        ": the kernel cache belongs to engine '", b->engine(),
                        "'; give each engine its own cache");
    out.desc = static_cast<CudnnKernelCache&>(*b).get();
    return out;
  }
  if (load_info().version < 90500)
    return make_error(ErrorCode::NotSupported, st.what, ": cuDNN ", backend_version_string(),
                      " has no kernel cache for dynamic shapes (cuDNN 9.5 or later has)");
  DNNGRAPH_ASSIGN_OR_RETURN(
      auto d, Descriptor::create(CUDNN_BACKEND_KERNEL_CACHE_DESCRIPTOR, "kernel cache"));
  const std::string& bytes = kc.initial_bytes();
  if (!bytes.empty() && kc.initial_engine() != "cudnn")
    return make_error(ErrorCode::InvalidArgument, st.what,
                      ": the kernel cache was saved by engine '", kc.initial_engine(),
                      "', not by cuDNN; give each engine its own cache");
  if (!bytes.empty()) {
    if (load_info().version < 91000)
      return make_error(ErrorCode::NotSupported, "kernel cache: cuDNN ", backend_version_string(),
                        " cannot load a serialized kernel cache (cuDNN 9.10 or later can)");
    Status s = d.set(CUDNN_ATTR_KERNEL_CACHE_JSON_REPRESENTATION, CUDNN_TYPE_CHAR,
                     static_cast<int64_t>(bytes.size()), bytes.data());
    if (!s)
      return make_error(ErrorCode::InvalidArgument,
                        "kernel cache: cuDNN refused the bytes it was loaded from (another cuDNN "
                        "version or GPU, or not a kernel cache); delete the file and let it be "
                        "rebuilt: ",
                        s.message());
  }
  DNNGRAPH_TRY(d.set(CUDNN_ATTR_KERNEL_CACHE_OPERATION_GRAPH, st.op_graph));
  DNNGRAPH_TRY(d.finalize(ErrorCode::NotSupported));
  auto backend = std::make_unique<CudnnKernelCache>(std::move(d));
  out.desc = backend->get();
  kc.backend() = std::move(backend);
  return out;
}

}  // namespace dnngraph::cudnn
