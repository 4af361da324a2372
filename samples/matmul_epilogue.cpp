// Sample: batched bf16 matmul with a fused epilogue (x alpha -> + bias -> gelu) and an AMAX of
// the result, on the GPU (cuDNN) when one is usable or with --device cpu on the CPU
// reference engine, checked against an fp64 computation on the host and timed.
#include "tutorial_graphs.hpp"

int main(int argc, char** argv) {
  using namespace tutorial;
  return sample_main(argc, argv, "matmul_epilogue", [](Runner& r, std::mt19937& gen) {
    return matmul_epilogue(r, gen,
                           r.gpu ? MatmulSizes{4, 128, 256, 128} : MatmulSizes{2, 64, 128, 64});
  });
}
