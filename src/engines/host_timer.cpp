// The autotuner's timer for engines that run on the host: wall-clock time of the calls.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "dnngraph/engines/interface.hpp"

namespace dnngraph {
namespace {

class HostTimer final : public PlanTimer {
 public:
  int64_t flush_bytes() const override { return 0; }
  Status flush() override { return Status::ok(); }
  Status start() override {
    t0_ = std::chrono::steady_clock::now();
    return Status::ok();
  }
  Result<double> stop() override {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_)
        .count();
  }
  Result<std::shared_ptr<void>> copy(const void* src, int64_t bytes) override {
    auto p = alloc(bytes);
    if (p) std::memcpy(p->get(), src, static_cast<size_t>(bytes));
    return p;
  }
  Result<std::shared_ptr<void>> alloc(int64_t bytes) override {
    void* p = std::malloc(static_cast<size_t>(std::max<int64_t>(bytes, 1)));
    if (!p)
      return make_error(ErrorCode::BackendError, "autotune: cannot allocate ", bytes,
                        " bytes of host memory (lower rotate_inputs or rotate_budget_bytes)");
    return std::shared_ptr<void>(p, std::free);
  }

 private:
  std::chrono::steady_clock::time_point t0_{};
};

}  // namespace

std::unique_ptr<PlanTimer> make_host_timer() { return std::make_unique<HostTimer>(); }

}  // namespace dnngraph
