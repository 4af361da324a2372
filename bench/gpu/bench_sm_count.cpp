// The SM count target (Graph::set_sm_count) in effect: one bf16 matmul 4096x4096x4096 (batch
// 1, fp32 accumulation) built three times in one process, for every SM, for 32 SMs and for 8
// SMs, each timed on the same inputs. A compute-bound matmul limited to N SMs should take about
// (GPU SMs / N) times as long; the ratios printed are that evidence. The 8-SM graph is first
// checked against the reference engine on a reduced shape.
#include <string>

#include "bench_util.hpp"

using namespace dnngraph;

namespace {

std::function<void(Graph&)> bf16_matmul(int64_t b, int64_t m, int64_t k, int64_t n,
                                        int32_t sm_count) {
  return [=](Graph& g) {
    g.set_name("mm_sm").set_io_data_type(DataType::BFloat16).set_sm_count(sm_count);
    auto a = gpu_test::input(g, "A", {b, m, k}, DataType::BFloat16);
    auto w = gpu_test::input(g, "B", {b, k, n}, DataType::BFloat16);
    ir::MatmulAttrs attrs;  // computes in the graph's compute type, FLOAT
    gpu_test::finish(g.matmul(a, w, attrs), "C", {b, m, n}, DataType::BFloat16);
  };
}

std::string label(int32_t sm_count) {
  return sm_count == Graph::kAllSms ? std::string("all SMs") : std::to_string(sm_count) + " SMs";
}

}  // namespace

int main() {
  if (bench::skipped("sm_count")) return 0;
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  gpu_test::CompareOptions o = bench::check_reduced(
      "matmul bf16 2x128x256x96, sm_count 8 (reduced)", bf16_matmul(2, 128, 256, 96, 8), 2e-2);

  constexpr int64_t kDim = 4096;
  const double flops = 2.0 * kDim * kDim * kDim;
  const int32_t targets[] = {Graph::kAllSms, 32, 8};
  double ms[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    gpu_test::GpuRun run;
    if (Status s = run.prepare(bf16_matmul(1, kDim, kDim, kDim, targets[i]), o); !s) {
      std::printf("ERROR %s: %s\n", label(targets[i]).c_str(), s.to_string().c_str());
      return 1;
    }
    int32_t reported = -1;
    for (const auto& c : run.g.candidates())
      if (c.built) reported = c.info.sm_count_target;
    bench::Timing t = bench::time_execute(run, 10, 50);
    if (!t.status) {
      std::printf("ERROR %s: %s\n", label(targets[i]).c_str(), t.status.to_string().c_str());
      return 1;
    }
    ms[i] = t.median_ms;
    std::printf(
        "RESULT matmul bf16 %lldx%lldx%lld, %-8s plan %s (cuDNN reports target %d): %.4f ms "
        "(min %.4f), %.1f TFLOP/s\n",
        static_cast<long long>(kDim), static_cast<long long>(kDim), static_cast<long long>(kDim),
        label(targets[i]).c_str(), run.plan_name.c_str(), reported, t.median_ms, t.min_ms,
        flops / t.median_ms / 1e9);
  }
  std::printf("RATIO 32 SMs / all %d SMs: %.2fx (ideal %.2fx)\n", sms, ms[1] / ms[0], sms / 32.0);
  std::printf("RATIO 8 SMs / all %d SMs: %.2fx (ideal %.2fx)\n", sms, ms[2] / ms[0], sms / 8.0);
  std::printf("RATIO 8 SMs / 32 SMs: %.2fx (ideal 4.00x)\n", ms[2] / ms[1]);
  std::printf("TARGET 8 SMs at least 2x slower than all SMs (the target is in effect): %s\n",
              bench::verdict(ms[2] >= 2 * ms[0]));
  std::printf("TARGET 8 SMs slower than 32 SMs, 32 SMs slower than all: %s\n",
              bench::verdict(ms[2] > ms[1] && ms[1] > ms[0]));
  return 0;
}
