// Sample: conv -> bias -> relu in NHWC bf16, on the GPU (cuDNN) when one is usable or with --device
// cpu on the CPU reference engine, checked against an fp64 computation on the host and timed.
#include "tutorial_graphs.hpp"

int main(int argc, char** argv) {
  using namespace tutorial;
  Runner r;
  if (!r.init(argc, argv, "conv_bias_relu")) return 2;
  std::mt19937 gen(2026);
  const bool ok = checked([&] {
    return conv_bias_relu(r, gen, r.gpu ? ConvSizes{4, 64, 28, 128} : ConvSizes{2, 16, 14, 32});
  });
  std::printf("conv_bias_relu: %s\n", ok ? "PASSED" : "FAILED");
  return ok ? 0 : 1;
}
