// The masking set-up shared by the reference attention kernels (sdpa.cpp, sdpa_fp8.cpp): the
// problem's dims, which keys each query attends (diagonal bounds, causal, padding lengths) and
// the ALiBi slopes, read once from the node and its tensors.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "engines/reference/kernel.hpp"

namespace dnngraph::reference {

struct SdpaMasking {
  int64_t b = 0, hq = 0, hk = 0, hv = 0, sq = 0, skv = 0, d = 0, dv = 0;
  bool bottom_right = false;
  std::optional<int64_t> left, right;  // clamped to +-(sq + skv); causal folded into right
  std::vector<int64_t> len_q, len_kv;  // per batch: SEQ_LEN_Q / SEQ_LEN_KV, else sq / skv
  std::vector<double> alibi;           // per query head, empty without alibi_mask

  // Attended keys [lo, hi) of query i in batch bi (empty for padding queries).
  std::pair<int64_t, int64_t> key_range(int64_t bi, int64_t i) const {
    const int64_t lq = len_q[static_cast<size_t>(bi)], lkv = len_kv[static_cast<size_t>(bi)];
    if (i >= lq) return {0, 0};
    int64_t lo = 0, hi = lkv;
    const int64_t diag = i + (bottom_right ? lkv - lq : 0);
    if (right) hi = std::min(hi, diag + *right + 1);
    if (left) lo = std::max(lo, diag - *left + 1);
    return {lo, std::max(lo, hi)};
  }
  // The keys [lo, hi) query i of batch bi attends (key_range), with s[j] = score(j) for each,
  // and the largest of those scores (-inf when there is none).
  struct ScoreRow {
    int64_t lo, hi;
    double max;
  };
  template <class F>
  ScoreRow scores(int64_t bi, int64_t i, double* s, F&& score) const {
    const auto [lo, hi] = key_range(bi, i);
    double mx = -INFINITY;
    for (int64_t j = lo; j < hi; ++j) mx = std::max(mx, s[j] = score(j));
    return {lo, hi, mx};
  }
  // The ALiBi term slope[h] * (j - i), 0 without alibi_mask.
  double alibi_at(int64_t h, int64_t i, int64_t j) const {
    return alibi.empty() ? 0.0 : alibi[static_cast<size_t>(h)] * static_cast<double>(j - i);
  }
};

// Fills `m` from the node's Q / K / V dims (s_kv: ir::sdpa_kv_length), its SdpaOptions and its
// SEQ_LEN_Q / SEQ_LEN_KV inputs; fails naming the op and the tensor when a length is outside
// 0..s_q / 0..s_kv.
Status read_sdpa_masking(const KernelContext& ctx, const ir::SdpaOptions& a, SdpaMasking& m);

// The attention scale: ATTN_SCALE when wired, else SdpaOptions::attn_scale, else 1/sqrt(d).
double sdpa_attn_scale(const KernelContext& ctx, const ir::SdpaOptions& a, int64_t d);

}  // namespace dnngraph::reference
