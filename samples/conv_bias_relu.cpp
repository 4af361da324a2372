// Sample: conv -> bias -> relu in NHWC bf16, on the GPU (cuDNN) when one is usable or with --device
// cpu on the CPU reference engine, checked against an fp64 computation on the host and timed.
#include "tutorial_graphs.hpp"

int main(int argc, char** argv) {
  using namespace tutorial;
  return sample_main(argc, argv, "conv_bias_relu", [](Runner& r, std::mt19937& gen) {
    return conv_bias_relu(r, gen, r.gpu ? ConvSizes{4, 64, 28, 128} : ConvSizes{2, 16, 14, 32});
  });
}
