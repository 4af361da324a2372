// Sample: causal scaled dot-product attention in bf16, on the GPU (cuDNN) when one is usable or
// with --device cpu on the CPU reference engine, checked against an fp64 computation on the host
// and timed.
#include "tutorial_graphs.hpp"

int main(int argc, char** argv) {
  using namespace tutorial;
  Runner r;
  if (!r.init(argc, argv, "sdpa_causal")) return 2;
  std::mt19937 gen(2026);
  const bool ok = checked([&] {
    return sdpa_causal(r, gen, r.gpu ? SdpaSizes{2, 4, 256, 64} : SdpaSizes{1, 2, 128, 64});
  });
  std::printf("sdpa_causal: %s\n", ok ? "PASSED" : "FAILED");
  return ok ? 0 : 1;
}
