// Reference matmul: C[..., M, N] = A[..., M, K] x B[..., K, N]. A, B and C have the same rank
// (the IR's rule, src/ir/ops/matmul.cpp); each batch dim of A and B is C's or 1 (it
// broadcasts). fp64 accumulation; the final sum is rounded to the compute type (what a real
// accumulator of that type would hold at the end).
#include <omp.h>

#include <algorithm>
#include <vector>

#include "engines/reference/kernel.hpp"

namespace dnngraph::reference {
namespace {

// Offsets (in elements of the dense row-major operand) of each of C's batch matrices in
// an operand whose batch dims are `op` (C's batch dims `cb` or 1).
std::vector<int64_t> batch_offsets(const std::vector<int64_t>& op, const std::vector<int64_t>& cb,
                                   int64_t matrix_size) {
  const size_t r = cb.size();
  std::vector<int64_t> stride(r, 0);  // stride in matrices, 0 where broadcast
  int64_t s = 1;
  for (size_t k = r; k-- > 0;) {
    if (op[k] != 1) stride[k] = s;
    s *= op[k];
  }
  int64_t total = 1;
  for (int64_t d : cb) total *= d;
  std::vector<int64_t> off(static_cast<size_t>(total));
  std::vector<int64_t> idx(r, 0);
  for (int64_t b = 0; b < total; ++b) {
    int64_t o = 0;
    for (size_t k = 0; k < r; ++k) o += idx[k] * stride[k];
    off[static_cast<size_t>(b)] = o * matrix_size;
    for (size_t k = r; k-- > 0;) {
      if (++idx[k] < cb[k]) break;
      idx[k] = 0;
    }
  }
  return off;
}

std::vector<int64_t> batch_dims(const std::vector<int64_t>& d) { return {d.begin(), d.end() - 2}; }

}  // namespace

Status run_matmul(KernelContext& ctx) {
  const Dense a = ctx.load(Role::A), b = ctx.load(Role::B);
  const std::vector<int64_t>& cdim = ctx.tensor(Role::C).dim;
  const size_t rc = cdim.size();
  const int64_t M = cdim[rc - 2], N = cdim[rc - 1], K = a.dim.back();
  const std::vector<int64_t> cb = batch_dims(cdim);
  const std::vector<int64_t> a_off = batch_offsets(batch_dims(a.dim), cb, M * K);
  const std::vector<int64_t> b_off = batch_offsets(batch_dims(b.dim), cb, K * N);
  const int64_t batches = static_cast<int64_t>(a_off.size());
  Dense c(cdim);
  // One row of C per iteration: acc[j] += A[i,k] * B[k,j] walks B's rows contiguously.
  // Threads only pay off on real work: tiny problems (tests) run serially.
  // Per-thread accumulator rows, allocated outside the parallel region.
  std::vector<double> acc_all(static_cast<size_t>(omp_get_max_threads() * N));
#pragma omp parallel if (batches * M * N * K > (int64_t{1} << 18))
  {
    double* acc = acc_all.data() + static_cast<size_t>(omp_get_thread_num() * N);
#pragma omp for schedule(static)
    for (int64_t bm = 0; bm < batches * M; ++bm) {
      const int64_t bi = bm / M, i = bm % M;
      const double* arow = a.data.data() + a_off[static_cast<size_t>(bi)] + i * K;
      const double* bmat = b.data.data() + b_off[static_cast<size_t>(bi)];
      std::fill(acc, acc + N, 0.0);
      for (int64_t k = 0; k < K; ++k) {
        const double av = arow[k];
        const double* brow = bmat + k * N;
        for (int64_t j = 0; j < N; ++j) acc[static_cast<size_t>(j)] += av * brow[j];
      }
      double* crow = c.data.data() + bm * N;
      for (int64_t j = 0; j < N; ++j) crow[j] = ctx.round_compute(acc[static_cast<size_t>(j)]);
    }
  }
  ctx.store(Role::C, c);
  return Status::ok();
}

}  // namespace dnngraph::reference
