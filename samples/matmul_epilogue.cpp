// Sample: batched bf16 matmul with a fused epilogue (x alpha -> + bias -> gelu) and an AMAX of
// the result, on the GPU (cuDNN) when one is usable or with --device cpu on the CPU
// reference engine, checked against an fp64 computation on the host and timed.
#include "tutorial_graphs.hpp"

int main(int argc, char** argv) {
  using namespace tutorial;
  Runner r;
  if (!r.init(argc, argv, "matmul_epilogue")) return 2;
  std::mt19937 gen(2026);
  const bool ok = checked([&] {
    return matmul_epilogue(r, gen,
                           r.gpu ? MatmulSizes{4, 128, 256, 128} : MatmulSizes{2, 64, 128, 64});
  });
  std::printf("matmul_epilogue: %s\n", ok ? "PASSED" : "FAILED");
  return ok ? 0 : 1;
}
