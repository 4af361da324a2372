// The graphs of dnngraph::linear_act and matmul_epilogue (torch/ops/gemm.cpp): the fused forward
// graph and the backward graphs, shared by both ops.
#pragma once

#include "core/op_support.hpp"

namespace dnngraph::torch_ops::gemm {

// A matmul operand the engines take: one of the last two dims has stride 1.
Tensor matmul_operand(const Tensor& t);

struct Epilogue {
  Tensor y, amax, z;  // z: the pre-activation, when asked for (else undefined)
};

// Y = act(alpha * (A @ B) + bias) [AMAX = max|Y|] on 3-D A [Ba, M, K], B [Bb, K, N], one graph
// (where it has no plan: the matmul as a smaller graph, the rest by ATen's kernels or a
// pointwise graph); y is [max(Ba, Bb), M, N] contiguous. want_z: also the pre-activation.
Epilogue epilogue(const char* op, const Tensor& a_in, const Tensor& b_in, const Tensor& bias,
                  double alpha, Act act, bool want_amax, bool want_z = false);

// y = act(z) [and amax = max|y|, if defined] as one pointwise graph (y, amax given); where the
// engine takes no such graph or has no plan for it, ATen's kernels (note_aten_part). The second
// step of the unfused forwards, after the product's graph.
void activation_graph(const char* op, const Tensor& z, Act act, const Tensor& y,
                      const Tensor& amax);

// One backward problem on 3-D operands: y = act(alpha * A @ B + bias), y [batch, M, N].
struct BackwardProblem {
  Tensor dy, saved, a, b, bias;  // saved: Z (relu: Y), undefined for no activation
  double alpha = 1.0;
  Act act = Act::None;
  int64_t batch = 1;
};

// d/dA, d/dB, d/dbias written into the given outputs (undefined: not wanted); da_out / db_out
// may be strided views (e.g. W^T). Without p.saved (and an activation) Z is recomputed first.
void epilogue_backward(const char* op, BackwardProblem p, const Tensor& da_out,
                       const Tensor& db_out, const Tensor& dbias_out);

}  // namespace dnngraph::torch_ops::gemm
