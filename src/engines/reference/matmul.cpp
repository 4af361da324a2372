// Reference matmul: C[..., M, N] = A[..., M, K] x B[..., K, N]. Batch dims are aligned from
// the right and broadcast (1 against n). fp64 accumulation; the final sum is rounded to the
// compute type (what a real accumulator of that type would hold at the end).
#include <algorithm>

#include "engines/reference/kernel.hpp"

namespace dnngraph::reference {
namespace {

// Offsets (in elements of the dense row-major operand) of each of C's batch matrices in
// an operand whose batch dims are `op` (right-aligned against C's batch dims `cb`).
std::vector<int64_t> batch_offsets(const std::vector<int64_t>& op, const std::vector<int64_t>& cb,
                                   int64_t matrix_size) {
  const size_t r = cb.size(), ro = op.size();
  std::vector<int64_t> stride(r, 0);  // stride in matrices, 0 where broadcast or absent
  int64_t s = 1;
  for (size_t k = ro; k-- > 0;) {
    const size_t ck = r - (ro - k);
    if (op[k] != 1) stride[ck] = s;
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

Status check_matmul(const ir::Node& n) {
  const ir::Tensor a = n.input(Role::A), b = n.input(Role::B), c = n.output(Role::C);
  if (!a || !b || !c)
    return make_error(ErrorCode::InvalidGraph, "matmul '", n.name, "': needs A, B and C");
  if (n.as<ir::MatmulAttrs>().padding_value)
    return make_error(ErrorCode::NotSupported, "matmul '", n.name,
                      "': padding_value is not supported by the reference engine");
  for (const ir::Tensor& t : {a, b, c})
    if (t->dim.size() < 2)
      return make_error(ErrorCode::InvalidGraph, "matmul '", n.name, "': tensor '", t->name,
                        "' has rank ", t->dim.size(), ", expected at least 2");
  const size_t ra = a->dim.size(), rb = b->dim.size(), rc = c->dim.size();
  const int64_t M = a->dim[ra - 2], K = a->dim[ra - 1], N = b->dim[rb - 1];
  if (b->dim[rb - 2] != K)
    return make_error(ErrorCode::InvalidGraph, "matmul '", n.name, "': inner dims differ: A '",
                      a->name, "' has K=", K, " (dim ", ra - 1, ") but B '", b->name,
                      "' has K=", b->dim[rb - 2], " (dim ", rb - 2, ")");
  if (c->dim[rc - 2] != M || c->dim[rc - 1] != N)
    return make_error(ErrorCode::InvalidGraph, "matmul '", n.name, "': C '", c->name, "' is ",
                      c->dim[rc - 2], "x", c->dim[rc - 1], ", expected ", M, "x", N);
  if (rc < std::max(ra, rb))
    return make_error(ErrorCode::InvalidGraph, "matmul '", n.name, "': C '", c->name, "' has rank ",
                      rc, ", lower than its operands'");
  // Right-aligned batch dims must match C's or be 1.
  for (const ir::Tensor& t : {a, b}) {
    const size_t rt = t->dim.size();
    for (size_t k = 0; k + 2 < rt; ++k) {
      const int64_t ct = c->dim[rc - rt + k];
      if (t->dim[k] != 1 && t->dim[k] != ct)
        return make_error(ErrorCode::InvalidGraph, "matmul '", n.name, "': batch dim ", k, " of '",
                          t->name, "' is ", t->dim[k], ", expected 1 or ", ct, " (C '", c->name,
                          "')");
    }
  }
  return Status::ok();
}

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
#pragma omp parallel if (batches * M * N * K > (int64_t{1} << 18))
  {
    std::vector<double> acc(static_cast<size_t>(N));
#pragma omp for schedule(static)
    for (int64_t bm = 0; bm < batches * M; ++bm) {
      const int64_t bi = bm / M, i = bm % M;
      const double* arow = a.data.data() + a_off[static_cast<size_t>(bi)] + i * K;
      const double* bmat = b.data.data() + b_off[static_cast<size_t>(bi)];
      std::fill(acc.begin(), acc.end(), 0.0);
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
