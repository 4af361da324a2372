// Reference scaled dot-product attention, forward and backward, in fp64.
//
// Shapes: Q [b,hq,sq,d], K [b,hk,skv,d], V [b,hv,skv,dv], O [b,hq,sq,dv], STATS [b,hq,sq,1].
// GQA / MQA: query head h reads K head h / (hq/hk) and V head h / (hq/hv).
//
// Forward, per batch bi, query head h and query row i:
//   s_ij = scale * <q_i, k_j> + bias(bi, h, i, j)
//     scale: the ATTN_SCALE tensor if wired, else SdpaAttrs::attn_scale, else 1/sqrt(d);
//     BIAS broadcasts to [b,hq,sq,skv] (any dim may be 1). The bias is added after scaling.
//     A score modifier (subgraph "score_mod", ScoreModEval) maps scale * <q_i, k_j> before
//     the bias is added.
//     alibi_mask adds slope[h] * (j - i) after the bias (ir::sdpa_alibi_slopes(hq), the
//     frontend's slopes; the IR requires causal masking, so j - i <= 0 where attended).
//   Query i attends key j iff j is in [lo, hi) (key_range below):
//     sq' = SEQ_LEN_Q[bi] (else sq), skv' = SEQ_LEN_KV[bi] (else skv) - the padding mask;
//     queries i >= sq' attend nothing, keys j >= skv' are never attended;
//     diag = i for TOP_LEFT, i + (skv' - sq') for BOTTOM_RIGHT;
//     j <= diag + right_bound and j > diag - left_bound when those bounds are set (left_bound
//     is the frontend's window length: left_bound keys ending on the diagonal);
//     `causal` means right_bound 0 (the smaller of 0 and right_bound when both are set).
//   p_ij = softmax_j(s_ij) over the attended keys; o_i = sum_j p_ij * z_ij * v_j, where z_ij
//   is the dropout factor below (1 without dropout).
//   STATS_i = log-sum-exp of the attended s_ij = max + log(sum(exp(s - max))).
//   SINK_TOKEN (attention sinks): sink[h] is one more logit in every row's softmax with no
//   value row: m = max(max_j s_ij, sink[h]), P_ij = exp(s_ij - m) / (sum_j exp(s_ij - m) +
//   exp(sink[h] - m)), STATS_i = m + log(that sum); a non-padding row that attends no key then
//   gives O = 0 and STATS = sink[h] (all its weight is on the sink).
//   SCORE_MAX_i = max (with the sink), SCORE_SUM_EXP_i = sum(exp(s - max)) (with the sink's
//   term): STATS_i = SCORE_MAX_i + log(SCORE_SUM_EXP_i).
//   A row that attends nothing (padding query, empty window, or every score -inf) gives
//   O = 0 and STATS = -inf (max -inf plus the log of an empty sum), as cuDNN (>= 9.14) writes
//   it, and SCORE_MAX = SCORE_SUM_EXP = -inf, as cuDNN 9.19 wrote them for padded query rows on
//   an H200 (not the empty sum's 0); the backward skips such rows.
//
// Dropout, two forms:
//   by probability p: z_ij = keep_ij / (1 - p), keep_ij = (u >= p) where u in [0,1) comes from
//     a counter-based hash of (seed, offset, bi, h, i, j) built on splitmix64 (below). It is
//     deterministic and the same in forward and backward, but it does NOT reproduce cuDNN's
//     Philox bit pattern. SEED and OFFSET are read as integers (a device buffer goes through
//     fp64, so values beyond 2^53 lose their low bits). The forward writes keep_ij (1 / 0) for
//     every (bi, h, i, j), attended or not, into RNG_DUMP when that output is wired.
//   by mask: z_ij = DROPOUT_MASK(bi, h, i, j) * DROPOUT_SCALE, the mask broadcast like BIAS and
//     used as given. Feeding the GPU's RNG_DUMP here is how its dropout is checked: with the
//     dumped mask and scale 1/(1-p) both forms compute the same z, so the same O and gradients.
//
// Ragged (THD) tensors (<X>_RAGGED_OFFSET): sequence bi of X is read from / written at element
//   offset[bi] * X's ragged_offset_multiplier (instead of bi * X's batch stride), rows past its
//   length (SEQ_LEN_Q for Q, O, STATS, DO, DQ; SEQ_LEN_KV for K, V, DK, DV) are neither read
//   (they count as 0) nor written; a sequence reaching outside the tensor's extent is an error.
//   max_total_seq_len_q / _kv, when set, must be at least the total of the lengths.
// Paged K / V (PAGE_TABLE_K / _V, forward): key j of sequence bi is row j % page_size of page
//   table[bi][j / page_size] of the container [pages, h, page_size, d]; a page number outside
//   the container is an error.
//
// Backward, from Q, K, V, O, DO and STATS (rows with no key or a non-finite STATS, as a row
//   that attended nothing has, are skipped): p_ij = exp(s_ij - STATS_i) for attended keys,
//   z_ij = keep_ij / (1 - p) (1 without dropout), D_i = <do_i, o_i>,
//   dv_j += p_ij z_ij do_i,  dp_ij = z_ij <do_i, v_j>,  ds_ij = p_ij (dp_ij - D_i),
//   dq_i += scale ds_ij k_j,  dk_j += scale ds_ij q_i,  DBIAS = ds summed over BIAS's
//   broadcast dims. DK / DV sum over the query heads that share a K / V head.
//   With a score modifier, s_ij is recomputed through it and ds_ij (the gradient of the
//   modified score, what DBIAS sums) goes through "score_mod_bprop" (if any) before dq / dk.
//   DSINK_TOKEN[h] = -sum over (bi, i) of exp(sink[h] - STATS_i) * D_i (the sink's probability
//   times D: O shrinks by that probability as the sink grows); the other gradients need nothing
//   new, as STATS already holds the sink's share.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>

#include "dnngraph/ir/sdpa.hpp"
#include "engines/reference/sdpa_problem.hpp"

namespace dnngraph::reference {
namespace {

// Below this many multiply-adds, threads cost more than they save.
constexpr int64_t kParallelWork = 1 << 18;

const ir::SdpaOptions& attrs_of(const ir::Node& n) {
  if (n.kind() == ir::OpKind::SdpaBwd) return n.as<ir::SdpaBwdAttrs>();
  return n.as<ir::SdpaAttrs>();
}

// splitmix64 finalizer: a bijective 64-bit mix with good avalanche.
uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

Status read_sdpa_masking(const KernelContext& ctx, const ir::SdpaOptions& a, SdpaMasking& m) {
  const auto& q = ctx.tensor(Role::Q).dim;
  const auto& k = ctx.tensor(Role::K).dim;
  const auto& v = ctx.tensor(Role::V).dim;
  m.b = q[0], m.hq = q[1], m.sq = q[2], m.d = q[3];
  m.hk = k[1], m.skv = ir::sdpa_kv_length(ctx.node()), m.hv = v[1], m.dv = v[3];
  m.bottom_right = a.diagonal_alignment == DiagonalAlignment::BottomRight;
  // Bounds beyond +-(sq + skv) mask the same as +-(sq + skv); clamping keeps the index
  // arithmetic in key_range far from overflow.
  const int64_t reach = m.sq + m.skv;
  auto clamp = [&](std::optional<int64_t> x) -> std::optional<int64_t> {
    if (!x) return x;
    return std::clamp<int64_t>(*x, -reach, reach);
  };
  m.left = clamp(a.left_bound);
  m.right = clamp(a.right_bound);
  if (a.causal) m.right = m.right ? std::min<int64_t>(*m.right, 0) : 0;
  if (a.alibi_mask) m.alibi = ir::sdpa_alibi_slopes(m.hq);

  auto lengths = [&](Role role, int64_t full, std::vector<int64_t>& out) -> Status {
    out.assign(static_cast<size_t>(m.b), full);
    if (!ctx.has_input(role)) return Status::ok();
    const Dense l = ctx.load(role);
    for (int64_t bi = 0; bi < m.b; ++bi) {
      const double x = l[bi];
      if (!(x >= 0.0 && x <= static_cast<double>(full)))
        return make_error(ErrorCode::InvalidArgument, op_kind_name(ctx.node().kind()), " '",
                          ctx.name(), "': ", role, " '", ctx.tensor(role).name, "'[", bi, "] = ", x,
                          ", expected 0..", full);
      out[static_cast<size_t>(bi)] = static_cast<int64_t>(x);
    }
    return Status::ok();
  };
  DNNGRAPH_TRY(lengths(Role::SEQ_LEN_Q, m.sq, m.len_q));
  return lengths(Role::SEQ_LEN_KV, m.skv, m.len_kv);
}

double sdpa_attn_scale(const KernelContext& ctx, const ir::SdpaOptions& a, int64_t d) {
  if (ctx.has_input(Role::ATTN_SCALE)) return ctx.scalar(Role::ATTN_SCALE);
  return ir::sdpa_scale_of(a, d);
}

// Uniform in [0, 1) for one (seed, offset, b, h, i, j); exposed for the tests.
double sdpa_dropout_uniform(uint64_t seed, uint64_t offset, int64_t b, int64_t h, int64_t i,
                            int64_t j) {
  uint64_t s = mix64(seed);
  for (uint64_t v : {offset, static_cast<uint64_t>(b), static_cast<uint64_t>(h),
                     static_cast<uint64_t>(i), static_cast<uint64_t>(j)})
    s = mix64(s ^ v);
  return static_cast<double>(s >> 11) * 0x1.0p-53;
}

namespace {

// Everything the loops need, read once from the node and its tensors.
struct Problem : SdpaMasking {
  double scale = 1.0;
  double dropout = 0.0;  // probability form when > 0
  uint64_t seed = 0, offset = 0;
  Dense bias;                      // at its own dims
  std::vector<int64_t> bias_step;  // strides into `bias` over [b,hq,sq,skv], 0 where broadcast
  Dense mask;                      // mask form when not empty, at its own dims
  std::vector<int64_t> mask_step;  // as bias_step
  double mask_scale = 1.0;
  std::vector<double> sink;  // per query head, empty without SINK_TOKEN

  // Multiply-adds of one pass over every (query, key) pair.
  int64_t work() const { return b * hq * sq * skv * (d + dv); }
  // BIAS plus the ALiBi term at (bi, h, i, j).
  double bias_at(int64_t bi, int64_t h, int64_t i, int64_t j) const {
    double r = 0.0;
    if (!bias.data.empty())
      r = bias[bi * bias_step[0] + h * bias_step[1] + i * bias_step[2] + j * bias_step[3]];
    return r + alibi_at(h, i, j);
  }
  // The probability form's draw: is (bi, h, i, j) kept?
  bool drawn_keep(int64_t bi, int64_t h, int64_t i, int64_t j) const {
    return sdpa_dropout_uniform(seed, offset, bi, h, i, j) >= dropout;
  }
  // Dropout factor z: keep / (1 - p), MASK * SCALE, or 1 without dropout.
  double keep(int64_t bi, int64_t h, int64_t i, int64_t j) const {
    if (!mask.data.empty())
      return mask[bi * mask_step[0] + h * mask_step[1] + i * mask_step[2] + j * mask_step[3]] *
             mask_scale;
    if (dropout <= 0.0) return 1.0;
    return drawn_keep(bi, h, i, j) ? 1.0 / (1.0 - dropout) : 0.0;
  }
};

uint64_t integer_input(const KernelContext& ctx, Role role) {
  const ir::TensorAttrs& t = ctx.tensor(role);
  if (t.value && is_integral(t.value->type)) return static_cast<uint64_t>(t.value->i);
  return static_cast<uint64_t>(static_cast<int64_t>(ctx.scalar(role)));
}

Result<Problem> read_problem(const KernelContext& ctx) {
  const ir::SdpaOptions& a = attrs_of(ctx.node());
  Problem p;
  DNNGRAPH_TRY(read_sdpa_masking(ctx, a, p));
  p.scale = sdpa_attn_scale(ctx, a, p.d);
  for (auto [key, limit, len] :
       {std::tuple<const char*, const std::optional<int64_t>&, const std::vector<int64_t>&>{
            "max_total_seq_len_q", a.max_total_seq_len_q, p.len_q},
        {"max_total_seq_len_kv", a.max_total_seq_len_kv, p.len_kv}}) {
    int64_t total = 0;
    for (int64_t x : len) total += x;
    if (limit && total > *limit)
      return make_error(ErrorCode::InvalidArgument, "sdpa '", ctx.name(),
                        "': the sequence lengths add up to ", total, " tokens but ", key, " is ",
                        *limit, "; raise ", key, " (it bounds the packed total)");
  }

  if (a.dropout_probability && *a.dropout_probability > 0.0) {
    p.dropout = *a.dropout_probability;
    p.seed = integer_input(ctx, Role::SEED);
    p.offset = integer_input(ctx, Role::OFFSET);
  }
  // A [b|1, hq|1, sq|1, skv|1] input at its own dims, with strides over the full score matrix
  // (0 where broadcast).
  auto broadcast = [&](Role role, Dense& data, std::vector<int64_t>& step) {
    data = ctx.load(role);
    step = row_major_strides(data.dim);
    for (size_t i = 0; i < 4; ++i)
      if (data.dim[i] == 1) step[i] = 0;
  };
  if (ctx.has_input(Role::BIAS)) broadcast(Role::BIAS, p.bias, p.bias_step);
  if (ctx.has_input(Role::SINK_TOKEN)) p.sink = ctx.load(Role::SINK_TOKEN).data;
  if (ctx.has_input(Role::DROPOUT_MASK)) {
    broadcast(Role::DROPOUT_MASK, p.mask, p.mask_step);
    p.mask_scale = ctx.scalar(Role::DROPOUT_SCALE);
  }
  return p;
}

// Where each batch item of the ragged tensor at `role` starts (elements): its
// <ROLE>_RAGGED_OFFSET values times the tensor's ragged_offset_multiplier. Empty when the
// tensor is not ragged.
Result<std::vector<int64_t>> ragged_base(const KernelContext& ctx, Role role, Role offset_role,
                                         int64_t b) {
  std::vector<int64_t> base;
  if (!ctx.has_input(offset_role)) return base;
  const ir::TensorAttrs& t = ctx.tensor(role);
  const ir::TensorAttrs& ot = ctx.tensor(offset_role);
  const Dense off = ctx.load(offset_role);
  const int64_t mult = t.ragged_offset_multiplier;
  for (int64_t i = 0; i < b; ++i) {
    const double x = off[i];
    // |x| < 2^62 / mult keeps x * mult inside int64 (and int64 offsets beyond 2^53 are already
    // beyond any buffer).
    if (!(x >= 0.0 && x * static_cast<double>(mult) < 0x1.0p62))
      return make_error(ErrorCode::InvalidArgument, op_kind_name(ctx.node().kind()), " '",
                        ctx.name(), "': ", offset_role, " '", ot.name, "'[", i, "] = ", x,
                        " (the ragged offset of ", role, " '", t.name,
                        "') is not a start offset; expected 0 or more");
    base.push_back(static_cast<int64_t>(x) * mult);
  }
  return base;
}

// An input as a dense [b, h, s, d] array: read at its ragged offsets when it has them (only
// the rows of each sequence, `rows`), else as is.
Result<Dense> load_input(const KernelContext& ctx, Role role, Role offset_role, int64_t b,
                         const std::vector<int64_t>& rows) {
  DNNGRAPH_ASSIGN_OR_RETURN(auto base, ragged_base(ctx, role, offset_role, b));
  if (base.empty()) return ctx.load(role);
  return ctx.load_ragged(role, base, rows);
}

// Writes an output: at its ragged offsets (only the rows of each sequence) or as is.
Status store_output(const KernelContext& ctx, Role role, Role offset_role, int64_t b,
                    const std::vector<int64_t>& rows, const Dense& value) {
  DNNGRAPH_ASSIGN_OR_RETURN(auto base, ragged_base(ctx, role, offset_role, b));
  if (base.empty()) {
    ctx.store(role, value);
    return Status::ok();
  }
  return ctx.store_ragged(role, value, base, rows);
}

// K or V for the forward: gathered from its page container through its page table when paged
// (key j of sequence i is row j % page_size of page table[i][j / page_size]; keys past the
// sequence length read as 0), else load_input.
Result<Dense> load_kv(const KernelContext& ctx, const Problem& p, Role role) {
  const bool is_k = role == Role::K;
  const Role table_role = is_k ? Role::PAGE_TABLE_K : Role::PAGE_TABLE_V;
  const Role offset_role = is_k ? Role::K_RAGGED_OFFSET : Role::V_RAGGED_OFFSET;
  if (!ctx.has_input(table_role)) return load_input(ctx, role, offset_role, p.b, p.len_kv);
  const Dense pool = ctx.load(role), table = ctx.load(table_role);
  const int64_t pages = pool.dim[0], h = pool.dim[1], ps = pool.dim[2], d = pool.dim[3];
  const int64_t per_seq = table.dim[2];
  Dense out({p.b, h, p.skv, d});
  for (int64_t bi = 0; bi < p.b; ++bi)
    for (int64_t j = 0; j < p.len_kv[static_cast<size_t>(bi)]; ++j) {
      const double page = table[bi * per_seq + j / ps];
      if (!(page >= 0.0 && page < static_cast<double>(pages)))
        return make_error(ErrorCode::InvalidArgument, "sdpa '", ctx.name(), "': ", table_role, " '",
                          ctx.tensor(table_role).name, "'[", bi, ", 0, ", j / ps, ", 0] = ", page,
                          " (the page of key ", j, " of sequence ", bi, ") is not a page of ", role,
                          " '", ctx.tensor(role).name, "' (0..", pages - 1,
                          "); fix the page table");
      const int64_t pg = static_cast<int64_t>(page), row = j % ps;
      for (int64_t hh = 0; hh < h; ++hh)
        for (int64_t c = 0; c < d; ++c)
          out[((bi * h + hh) * p.skv + j) * d + c] = pool[((pg * h + hh) * ps + row) * d + c];
    }
  return out;
}

// The probability form's keep mask over the whole [b, hq, sq, skv] score matrix, 1 / 0.
Dense drawn_mask(const Problem& p) {
  Dense m({p.b, p.hq, p.sq, p.skv});
  int64_t e = 0;
  for (int64_t bi = 0; bi < p.b; ++bi)
    for (int64_t h = 0; h < p.hq; ++h)
      for (int64_t i = 0; i < p.sq; ++i)
        for (int64_t j = 0; j < p.skv; ++j) m[e++] = p.drawn_keep(bi, h, i, j) ? 1.0 : 0.0;
  return m;
}

// Sums `full` [b,hq,sq,skv] over the dims where `dims` is 1.
Dense reduce_to(const Dense& full, const std::vector<int64_t>& dims) {
  Dense out(dims);
  std::vector<int64_t> st = row_major_strides(dims);
  for (size_t k = 0; k < 4; ++k)
    if (dims[k] == 1) st[k] = 0;
  const auto& f = full.dim;
  int64_t i = 0;
  for (int64_t a = 0; a < f[0]; ++a)
    for (int64_t h = 0; h < f[1]; ++h)
      for (int64_t r = 0; r < f[2]; ++r)
        for (int64_t c = 0; c < f[3]; ++c)
          out[a * st[0] + h * st[1] + r * st[2] + c * st[3]] += full[i++];
  return out;
}

Status run_forward(KernelContext& ctx) {
  Result<Problem> pr = read_problem(ctx);
  if (!pr) return pr.status();
  const Problem& p = *pr;
  DNNGRAPH_ASSIGN_OR_RETURN(const Dense q,
                            load_input(ctx, Role::Q, Role::Q_RAGGED_OFFSET, p.b, p.len_q));
  DNNGRAPH_ASSIGN_OR_RETURN(const Dense k, load_kv(ctx, p, Role::K));
  DNNGRAPH_ASSIGN_OR_RETURN(const Dense v, load_kv(ctx, p, Role::V));
  Dense o({p.b, p.hq, p.sq, p.dv});
  // Per row: the log-sum-exp, the max it subtracts and the sum of exponentials after it.
  // Rows with no key keep -inf in all three (what cuDNN 9.19 writes for padded rows).
  Dense stats({p.b, p.hq, p.sq, 1}, -INFINITY), row_max({p.b, p.hq, p.sq, 1}, -INFINITY);
  Dense sum_exp({p.b, p.hq, p.sq, 1}, -INFINITY);
  const int64_t gk = p.hq / p.hk, gv = p.hq / p.hv;
  DNNGRAPH_ASSIGN_OR_RETURN(const ScoreModEval mod, ScoreModEval::make(ctx));

  // Per-thread score rows, allocated outside the parallel region.
  std::vector<double> s_all(static_cast<size_t>(omp_get_max_threads() * p.skv));
#pragma omp parallel for collapse(2) schedule(dynamic) if (p.work() >= kParallelWork)
  for (int64_t bi = 0; bi < p.b; ++bi)
    for (int64_t h = 0; h < p.hq; ++h) {
      const double* kb = &k.data[static_cast<size_t>((bi * p.hk + h / gk) * p.skv * p.d)];
      const double* vb = &v.data[static_cast<size_t>((bi * p.hv + h / gv) * p.skv * p.dv)];
      double* s = s_all.data() + static_cast<size_t>(omp_get_thread_num() * p.skv);
      for (int64_t i = 0; i < p.sq; ++i) {
        const int64_t row = (bi * p.hq + h) * p.sq + i;
        const double* qi = &q.data[static_cast<size_t>(row * p.d)];
        double* oi = &o.data[static_cast<size_t>(row * p.dv)];
        auto [lo, hi, mx] = p.scores(bi, i, s, [&](int64_t j) {
          double dot = 0.0;
          for (int64_t c = 0; c < p.d; ++c) dot += qi[c] * kb[j * p.d + c];
          return mod.forward(bi, h, i, j, p.scale * dot) + p.bias_at(bi, h, i, j);
        });
        const bool sink = !p.sink.empty();
        const double sink_h = sink ? p.sink[static_cast<size_t>(h)] : -INFINITY;
        if (hi <= lo || mx == -INFINITY) {  // attends no key: O = 0
          // STATS, max and sum -inf, or the sink alone when the row is no padding query.
          if (sink && i < p.len_q[static_cast<size_t>(bi)]) {
            stats[row] = row_max[row] = sink_h;
            sum_exp[row] = 1.0;
          }
          continue;
        }
        mx = std::max(mx, sink_h);
        double sum = sink ? std::exp(sink_h - mx) : 0.0;
        for (int64_t j = lo; j < hi; ++j) sum += (s[j] = std::exp(s[j] - mx));
        for (int64_t j = lo; j < hi; ++j) {
          const double w = s[j] / sum * p.keep(bi, h, i, j);
          if (w == 0.0) continue;
          for (int64_t c = 0; c < p.dv; ++c) oi[c] += w * vb[j * p.dv + c];
        }
        stats[row] = mx + std::log(sum);
        row_max[row] = mx;
        sum_exp[row] = sum;
      }
    }
  DNNGRAPH_TRY(store_output(ctx, Role::O, Role::O_RAGGED_OFFSET, p.b, p.len_q, o));
  if (ctx.has_output(Role::STATS))
    DNNGRAPH_TRY(store_output(ctx, Role::STATS, Role::STATS_RAGGED_OFFSET, p.b, p.len_q, stats));
  if (ctx.has_output(Role::RNG_DUMP)) ctx.store(Role::RNG_DUMP, drawn_mask(p));
  if (ctx.has_output(Role::SCORE_MAX)) ctx.store(Role::SCORE_MAX, row_max);
  if (ctx.has_output(Role::SCORE_SUM_EXP)) ctx.store(Role::SCORE_SUM_EXP, sum_exp);
  return Status::ok();
}

Status run_backward(KernelContext& ctx) {
  Result<Problem> pr = read_problem(ctx);
  if (!pr) return pr.status();
  const Problem& p = *pr;
  auto in = [&](Role role, Role offset_role, const std::vector<int64_t>& rows) {
    return load_input(ctx, role, offset_role, p.b, rows);
  };
  DNNGRAPH_ASSIGN_OR_RETURN(const Dense q, in(Role::Q, Role::Q_RAGGED_OFFSET, p.len_q));
  DNNGRAPH_ASSIGN_OR_RETURN(const Dense k, in(Role::K, Role::K_RAGGED_OFFSET, p.len_kv));
  DNNGRAPH_ASSIGN_OR_RETURN(const Dense v, in(Role::V, Role::V_RAGGED_OFFSET, p.len_kv));
  DNNGRAPH_ASSIGN_OR_RETURN(const Dense o, in(Role::O, Role::O_RAGGED_OFFSET, p.len_q));
  DNNGRAPH_ASSIGN_OR_RETURN(const Dense d_o, in(Role::DO, Role::DO_RAGGED_OFFSET, p.len_q));
  DNNGRAPH_ASSIGN_OR_RETURN(const Dense stats, in(Role::STATS, Role::STATS_RAGGED_OFFSET, p.len_q));
  const bool want_dbias = ctx.has_output(Role::DBIAS);
  const int64_t gk = p.hq / p.hk, gv = p.hq / p.hv;
  // Per query head first (no two threads write the same element), then summed per K/V head.
  Dense dq({p.b, p.hq, p.sq, p.d});
  Dense dk_h({p.b, p.hq, p.skv, p.d}), dv_h({p.b, p.hq, p.skv, p.dv});
  Dense ds_full = want_dbias ? Dense({p.b, p.hq, p.sq, p.skv}) : Dense();
  const bool want_dsink = ctx.has_output(Role::DSINK_TOKEN);
  Dense dsink_bh({p.b, p.hq});  // per (batch, head), summed over batches below
  DNNGRAPH_ASSIGN_OR_RETURN(const ScoreModEval mod, ScoreModEval::make(ctx));

#pragma omp parallel for collapse(2) schedule(dynamic) if (p.work() >= kParallelWork)
  for (int64_t bi = 0; bi < p.b; ++bi)
    for (int64_t h = 0; h < p.hq; ++h) {
      const size_t head = static_cast<size_t>(bi * p.hq + h);
      const double* kb = &k.data[static_cast<size_t>((bi * p.hk + h / gk) * p.skv * p.d)];
      const double* vb = &v.data[static_cast<size_t>((bi * p.hv + h / gv) * p.skv * p.dv)];
      double* dkb = &dk_h.data[head * static_cast<size_t>(p.skv * p.d)];
      double* dvb = &dv_h.data[head * static_cast<size_t>(p.skv * p.dv)];
      for (int64_t i = 0; i < p.sq; ++i) {
        const int64_t row = (bi * p.hq + h) * p.sq + i;
        const auto [lo, hi] = p.key_range(bi, i);
        // No key, or STATS of a row that attended none (-inf): no probability, no gradient.
        if (hi <= lo || !std::isfinite(stats[row])) continue;
        const double* qi = &q.data[static_cast<size_t>(row * p.d)];
        const double* oi = &o.data[static_cast<size_t>(row * p.dv)];
        const double* doi = &d_o.data[static_cast<size_t>(row * p.dv)];
        double* dqi = &dq.data[static_cast<size_t>(row * p.d)];
        double di = 0.0;
        for (int64_t c = 0; c < p.dv; ++c) di += doi[c] * oi[c];
        if (want_dsink)
          dsink_bh[bi * p.hq + h] -= std::exp(p.sink[static_cast<size_t>(h)] - stats[row]) * di;
        for (int64_t j = lo; j < hi; ++j) {
          double dot = 0.0;
          for (int64_t c = 0; c < p.d; ++c) dot += qi[c] * kb[j * p.d + c];
          const double sij = p.scale * dot;
          const double pij =
              std::exp(mod.forward(bi, h, i, j, sij) + p.bias_at(bi, h, i, j) - stats[row]);
          const double z = p.keep(bi, h, i, j);
          double dp = 0.0;
          for (int64_t c = 0; c < p.dv; ++c) {
            dvb[j * p.dv + c] += pij * z * doi[c];
            dp += doi[c] * vb[j * p.dv + c];
          }
          const double ds = pij * (z * dp - di);
          const double dss = p.scale * mod.backward(bi, h, i, j, sij, ds);
          for (int64_t c = 0; c < p.d; ++c) {
            dqi[c] += dss * kb[j * p.d + c];
            dkb[j * p.d + c] += dss * qi[c];
          }
          if (want_dbias) ds_full[row * p.skv + j] = ds;
        }
      }
    }

  Dense dk({p.b, p.hk, p.skv, p.d}), dv({p.b, p.hv, p.skv, p.dv});
  for (int64_t bi = 0; bi < p.b; ++bi)
    for (int64_t h = 0; h < p.hq; ++h) {
      const int64_t src = bi * p.hq + h;
      const int64_t nk = p.skv * p.d, nv = p.skv * p.dv;
      const int64_t kdst = bi * p.hk + h / gk, vdst = bi * p.hv + h / gv;
      for (int64_t e = 0; e < nk; ++e) dk[kdst * nk + e] += dk_h[src * nk + e];
      for (int64_t e = 0; e < nv; ++e) dv[vdst * nv + e] += dv_h[src * nv + e];
    }
  DNNGRAPH_TRY(store_output(ctx, Role::DQ, Role::DQ_RAGGED_OFFSET, p.b, p.len_q, dq));
  DNNGRAPH_TRY(store_output(ctx, Role::DK, Role::DK_RAGGED_OFFSET, p.b, p.len_kv, dk));
  DNNGRAPH_TRY(store_output(ctx, Role::DV, Role::DV_RAGGED_OFFSET, p.b, p.len_kv, dv));
  if (want_dbias) ctx.store(Role::DBIAS, reduce_to(ds_full, ctx.tensor(Role::DBIAS).dim));
  if (want_dsink) {
    Dense dsink({1, p.hq, 1, 1});
    for (int64_t bi = 0; bi < p.b; ++bi)
      for (int64_t h = 0; h < p.hq; ++h) dsink[h] += dsink_bh[bi * p.hq + h];
    ctx.store(Role::DSINK_TOKEN, dsink);
  }
  return Status::ok();
}

}  // namespace

Status run_sdpa(KernelContext& ctx) { return run_forward(ctx); }
Status run_sdpa_backward(KernelContext& ctx) { return run_backward(ctx); }

}  // namespace dnngraph::reference
