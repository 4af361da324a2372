// dnngraph demo: the tutorial's three graphs (conv->bias->relu, matmul epilogue with AMAX,
// causal SDPA) built with the graph API, run on the GPU when one is usable and on the CPU
// reference engine otherwise (or with --device cpu), each checked against an independent fp64
// computation and timed.
#include "tutorial_graphs.hpp"

int main(int argc, char** argv) {
  using namespace tutorial;
  Runner r;
  if (!r.init(argc, argv, "demo")) return 2;
  std::printf("sizes reduced for the fp64 check on the host\n");
  std::mt19937 gen(2026);
  bool ok = checked([&] { return conv_bias_relu(r, gen, {2, 16, 14, 32}); });
  ok = checked([&] { return matmul_epilogue(r, gen, {2, 64, 128, 64}); }) && ok;
  ok = checked([&] { return sdpa_causal(r, gen, {1, 2, 128, 64}); }) && ok;
  std::printf("%s\n", ok ? "all graphs PASSED" : "some graphs FAILED");
  return ok ? 0 : 1;
}
