// Sample: causal scaled dot-product attention in bf16, on the GPU (cuDNN) when one is usable or
// with --device cpu on the CPU reference engine, checked against an fp64 computation on the host
// and timed.
#include "tutorial_graphs.hpp"

int main(int argc, char** argv) {
  using namespace tutorial;
  return sample_main(argc, argv, "sdpa_causal", [](Runner& r, std::mt19937& gen) {
    return sdpa_causal(r, gen, r.gpu ? SdpaSizes{2, 4, 256, 64} : SdpaSizes{1, 2, 128, 64});
  });
}
