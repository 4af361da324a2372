// The autotuner's timer for cuDNN plans: CUDA events on the handle's stream, a cache flush
// that overwrites a device buffer twice the size of the GPU's L2 (read from the device), and
// device copies for rotating inputs.
#include <cuda_runtime_api.h>

#include <algorithm>

#include "engines/cudnn/plan.hpp"

namespace dnngraph::cudnn {
namespace {

Status cuda_check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::ok();
  (void)cudaGetLastError();
  return make_error(ErrorCode::BackendError, "autotune: ", what,
                    " failed: ", cudaGetErrorString(e));
}

class CudaTimer final : public PlanTimer {
 public:
  ~CudaTimer() override {
    if (start_) (void)cudaEventDestroy(start_);
    if (stop_) (void)cudaEventDestroy(stop_);
    if (flush_) (void)cudaFree(flush_);
  }

  Status init(const Handle& h) {
    device_ = h.device().index;
    stream_ = static_cast<cudaStream_t>(h.stream());
    DNNGRAPH_TRY(cuda_check(cudaSetDevice(device_), "cudaSetDevice"));
    // Timing synchronizes, which would end (and invalidate) a capture of the stream.
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    DNNGRAPH_TRY(cuda_check(cudaStreamIsCapturing(stream_, &cap), "cudaStreamIsCapturing"));
    if (cap != cudaStreamCaptureStatusNone)
      return make_error(ErrorCode::InvalidArgument,
                        "autotune: the handle's stream is being captured into a CUDA graph, and "
                        "timing would end the capture; autotune before capturing (a later "
                        "build() restores the choice from the plan cache)");
    DNNGRAPH_TRY(cuda_check(cudaEventCreate(&start_), "cudaEventCreate"));
    DNNGRAPH_TRY(cuda_check(cudaEventCreate(&stop_), "cudaEventCreate"));
    int l2 = 0;
    DNNGRAPH_TRY(cuda_check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device_),
                            "reading the L2 cache size"));
    bytes_ = 2 * static_cast<int64_t>(l2);
    if (bytes_ > 0)
      DNNGRAPH_TRY(cuda_check(cudaMalloc(&flush_, static_cast<size_t>(bytes_)),
                              "allocating the L2 flush buffer"));
    return Status::ok();
  }

  int64_t flush_bytes() const override { return bytes_; }
  Status flush() override {
    if (!flush_) return Status::ok();
    return cuda_check(cudaMemsetAsync(flush_, ++fill_ & 0xff, static_cast<size_t>(bytes_), stream_),
                      "the L2 flush (cudaMemsetAsync)");
  }
  Status start() override {
    return cuda_check(cudaEventRecord(start_, stream_), "cudaEventRecord");
  }
  Result<double> stop() override {
    DNNGRAPH_TRY(cuda_check(cudaEventRecord(stop_, stream_), "cudaEventRecord"));
    DNNGRAPH_TRY(cuda_check(cudaEventSynchronize(stop_), "cudaEventSynchronize"));
    float ms = 0;
    DNNGRAPH_TRY(cuda_check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime"));
    return static_cast<double>(ms);
  }
  Result<std::shared_ptr<void>> copy(const void* src, int64_t bytes) override {
    DNNGRAPH_ASSIGN_OR_RETURN(auto p, alloc(bytes));
    DNNGRAPH_TRY(cuda_check(cudaMemcpy(p.get(), src, static_cast<size_t>(bytes), cudaMemcpyDefault),
                            "copying an input"));
    return p;
  }
  Result<std::shared_ptr<void>> alloc(int64_t bytes) override {
    void* p = nullptr;
    DNNGRAPH_TRY(cuda_check(cudaMalloc(&p, static_cast<size_t>(std::max<int64_t>(bytes, 1))),
                            "allocating device memory (lower rotate_inputs or its budget)"));
    return std::shared_ptr<void>(p, [](void* q) { (void)cudaFree(q); });
  }

 private:
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  void* flush_ = nullptr;
  int64_t bytes_ = 0;
  int fill_ = 0;
};

}  // namespace

Result<std::unique_ptr<PlanTimer>> make_cuda_timer(Handle& handle) {
  auto t = std::make_unique<CudaTimer>();
  DNNGRAPH_TRY(t->init(handle));
  return std::unique_ptr<PlanTimer>(std::move(t));
}

}  // namespace dnngraph::cudnn
