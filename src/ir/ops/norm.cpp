// Shape rules of the normalizations.
//   layernorm / rmsnorm: statistics per row (over every dim but dim 0):
//     MEAN / INV_VARIANCE [N,1,...,1]; SCALE / BIAS [1, X dims 1..]; or, as in the cuDNN
//     frontend, SCALE [1, each dim 1 or X's] normalizes the dims where it is not 1 (X [B,S,E],
//     SCALE [1,1,E] -> statistics [B,S,1]).
//   batchnorm: statistics per channel (over every dim but dim 1):
//     MEAN / INV_VARIANCE / running stats / SCALE / BIAS [1,C,1,...,1].
//   instancenorm: statistics per sample and channel (over dims 2..):
//     MEAN / INV_VARIANCE [N,C,1,...,1]; SCALE / BIAS [1,C,1,...,1].
//   adalayernorm: SCALE / BIAS [N|1, each dim 1 or X's]: the dims 1.. where SCALE is not 1 are
//     normalized (the cuDNN frontend's rule); MEAN / INV_VARIANCE are X's dims with those set
//     to 1 (e.g. X [B,S,D], SCALE [B,1,D] -> statistics [B,S,1]).
// EPSILON and MOMENTUM are pass-by-value scalars. Statistics default to FLOAT.
#include <cmath>

#include "ir/ops/common.hpp"

namespace dnngraph::ir {
namespace {

struct NormShapes {
  std::vector<int64_t> stats;   // MEAN, INV_VARIANCE, running stats
  std::vector<int64_t> params;  // SCALE, BIAS
  const char* stats_why;
  const char* params_why;
};

// layernorm / rmsnorm: whether SCALE picks the normalized dims itself (X's rank, dim 0 1, each
// other dim 1 or X's, at least one not 1, and not every dim 1.. of X): then the dims where
// SCALE is not 1 are normalized, as in the cuDNN frontend. [1, X dims 1..] gives the same
// statistics either way.
bool normalizes_by_scale(const std::vector<int64_t>& x, const std::vector<int64_t>& scale) {
  if (scale.size() != x.size() || x.size() < 2 || scale[0] != 1) return false;
  bool some = false, all = true;
  for (size_t i = 1; i < x.size(); ++i) {
    if (scale[i] != 1 && scale[i] != x[i]) return false;
    some = some || scale[i] != 1;
    all = all && scale[i] == x[i];
  }
  return some && !all;
}

// `scale` is SCALE's dims: adalayernorm's statistics follow them, and layernorm's / rmsnorm's
// do where normalizes_by_scale().
NormShapes shapes_for(NormKind kind, const std::vector<int64_t>& x,
                      const std::vector<int64_t>& scale) {
  NormShapes s;
  s.stats.assign(x.size(), 1);
  s.params.assign(x.size(), 1);
  if (kind == NormKind::AdaLayerNorm) {
    s.stats = x;
    for (size_t i = 1; i < x.size() && i < scale.size(); ++i)
      if (scale[i] != 1) s.stats[i] = 1;
    s.stats_why = "X's dims with 1 wherever SCALE is not 1 (dims 1..)";
    s.params = scale;  // checked by check_ada_params
    s.params_why = "[N|1, each dim 1 or X's]";
  } else if (kind == NormKind::InstanceNorm) {
    s.stats[0] = x[0];
    s.stats[1] = s.params[1] = x[1];
    s.stats_why = "one value per sample and channel: [N,C,1,...] from X";
    s.params_why = "one value per channel: [1,C,1,...] from X";
  } else if (kind == NormKind::BatchNorm) {
    s.stats[1] = s.params[1] = x[1];
    s.stats_why = "one value per channel: [1,C,1,...] from X";
    s.params_why = s.stats_why;
  } else if (normalizes_by_scale(x, scale)) {
    // The frontend's rule: the dims where SCALE is not 1 are normalized (X [B,S,E] with
    // SCALE [1,1,E] -> statistics [B,S,1]).
    s.stats = x;
    for (size_t i = 1; i < x.size(); ++i)
      if (scale[i] != 1) s.stats[i] = 1;
    s.params = scale;
    s.stats_why = "X's dims with 1 wherever SCALE is not 1";
    s.params_why = "[1, each dim 1 or X's]: the dims that are not 1 are normalized";
  } else {
    s.stats[0] = x[0];
    for (size_t i = 1; i < x.size(); ++i) s.params[i] = x[i];
    s.stats_why = "one value per row: [N,1,...] from X";
    s.params_why = "one value per normalized element: [1, X dims 1..]";
  }
  return s;
}

Status forbid_input(const Node& n, Role role, const char* why) {
  if (Tensor t = n.input(role))
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": unexpected input ",
                      port_label(role, t), " (", why, ")");
  return Status::ok();
}
Status forbid_output(const Node& n, Role role, const char* why) {
  if (Tensor t = n.output(role))
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": unexpected output ",
                      port_label(role, t), " (", why, ")");
  return Status::ok();
}

// layernorm / rmsnorm SCALE: [1, X dims 1..] normalizes each row over dims 1..; a SCALE of X's
// rank with 1 on the dims not normalized picks them (normalizes_by_scale). A mismatch names
// both forms, the last-dim one (torch's layer_norm(x, [E])) with X's numbers.
Status check_row_norm_scale(const Node& n, const Tensor& scale, const std::vector<int64_t>& x,
                            const std::vector<int64_t>& expected) {
  if (scale->dim == expected) return Status::ok();
  std::vector<int64_t> last(x.size(), 1);
  last.back() = x.back();
  const std::string per_last =
      last == expected ? ""
                       : detail::cat(", or ", dims_str(last),
                                     " to normalize over the last dim only, as torch's "
                                     "layer_norm(x, [",
                                     x.back(), "]) does (X's rank, 1 on the dims not normalized)");
  return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(Role::SCALE, scale),
                    " has dims ", dims_str(scale->dim), " but expected ", dims_str(expected),
                    " (one value per element of X's dims 1..: normalizes each row over them)",
                    per_last);
}

// Checks an optional/required input against expected dims.
Status check_input(const Node& n, Role role, bool required, const std::vector<int64_t>& dims,
                   const char* why) {
  Tensor t = n.input(role);
  if (!t) {
    if (!required) return Status::ok();
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": missing input ", role);
  }
  return expect_dims(n, role, t, dims, why);
}

// A pass-by-value scalar whose value is in the graph (EPSILON, MOMENTUM) must be finite and
// in [lo, hi]; a value bound only at execute time is not known here.
Status check_scalar_range(const Node& n, Role role, const Tensor& t, double lo, double hi,
                          const char* expected) {
  if (!t->value) return Status::ok();
  const double v = t->value->as_double();
  if (std::isfinite(v) && v >= lo && v <= hi) return Status::ok();
  return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(role, t), " is ", v,
                    "; expected ", expected);
}

// adalayernorm's SCALE: X's rank, dim 0 N or 1, every other dim 1 or X's, at least one of the
// dims 1.. not 1 (something to normalize over).
Status check_ada_scale(const Node& n, const Tensor& x, const Tensor& scale) {
  const auto& xd = x->dim;
  const auto& sd = scale->dim;
  bool normalizes = false;
  bool fits = sd.size() == xd.size();
  for (size_t i = 0; fits && i < sd.size(); ++i) {
    fits = sd[i] == 1 || sd[i] == xd[i];
    if (i > 0 && sd[i] != 1) normalizes = true;
  }
  if (!fits || !normalizes)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": ", port_label(Role::SCALE, scale),
                      " has dims ", dims_str(sd), " but X has ", dims_str(xd),
                      "; expected X's rank, each dim 1 or X's, and X's dim (not 1) on the dims "
                      "to normalize (e.g. X [B,S,D], SCALE [B,1,D])");
  return Status::ok();
}

// NormKind and NormForwardPhase may come from a cast integer (C++) or a tampered description.
Status check_enums(const Node& n, NormKind kind, int phase) {
  const int k = static_cast<int>(kind);
  if (k < 0 || k > static_cast<int>(NormKind::AdaLayerNorm))
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": norm kind ", k,
                      " is not LAYER_NORM, RMS_NORM, BATCH_NORM, INSTANCE_NORM or "
                      "ADA_LAYER_NORM");
  if (phase < 0 || phase > static_cast<int>(NormForwardPhase::Inference))
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": phase ", phase,
                      " is not TRAINING or INFERENCE");
  return Status::ok();
}

Status infer_stat_output(const Node& n, Role role, const NormShapes& s, const InferContext& ctx) {
  DNNGRAPH_PORT(t, required_output(n, role));
  return infer_output(n, role, t, s.stats, nullptr, ctx, DataType::Float, DataType::Float);
}

}  // namespace

Status infer_norm_forward(Node& n, const InferContext& ctx) {
  const auto& a = n.as<NormFwdAttrs>();
  DNNGRAPH_TRY(check_enums(n, a.kind, static_cast<int>(a.phase)));
  DNNGRAPH_PORT(x, required_input(n, Role::X));
  DNNGRAPH_PORT(y, required_output(n, Role::Y));
  DNNGRAPH_TRY(check_rank(n, Role::X, x, a.kind == NormKind::InstanceNorm ? 3 : 2, SIZE_MAX));
  DNNGRAPH_PORT(scale, required_input(n, Role::SCALE));
  if (a.kind == NormKind::AdaLayerNorm) DNNGRAPH_TRY(check_ada_scale(n, x, scale));
  const NormShapes s = shapes_for(a.kind, x->dim, scale->dim);
  const bool training = a.phase == NormForwardPhase::Training;
  const bool is_bn = a.kind == NormKind::BatchNorm;
  const bool is_rms = a.kind == NormKind::RmsNorm;

  if (a.kind == NormKind::LayerNorm || is_rms)
    DNNGRAPH_TRY(check_row_norm_scale(n, scale, x->dim, s.params));
  DNNGRAPH_TRY(check_input(n, Role::SCALE, true, s.params, s.params_why));
  DNNGRAPH_TRY(check_input(n, Role::BIAS, !is_rms, s.params, s.params_why));
  if (!is_bn) {
    DNNGRAPH_TRY(forbid_input(n, Role::MOMENTUM, "only batchnorm keeps running statistics"));
    DNNGRAPH_TRY(
        forbid_input(n, Role::PREV_RUNNING_MEAN, "only batchnorm keeps running statistics"));
    DNNGRAPH_TRY(
        forbid_input(n, Role::PREV_RUNNING_VAR, "only batchnorm keeps running statistics"));
  }

  if (is_bn && !training) {
    // Inference batchnorm takes the statistics as inputs and needs no epsilon.
    DNNGRAPH_TRY(check_input(n, Role::MEAN, true, s.stats, s.stats_why));
    DNNGRAPH_TRY(check_input(n, Role::INV_VARIANCE, true, s.stats, s.stats_why));
    for (Role r : {Role::EPSILON, Role::MOMENTUM, Role::PREV_RUNNING_MEAN, Role::PREV_RUNNING_VAR})
      DNNGRAPH_TRY(forbid_input(n, r, "inference batchnorm takes MEAN and INV_VARIANCE"));
  } else {
    DNNGRAPH_TRY(forbid_input(n, Role::MEAN, "statistics are outputs of this op"));
    DNNGRAPH_TRY(forbid_input(n, Role::INV_VARIANCE, "statistics are outputs of this op"));
    DNNGRAPH_PORT(eps, required_input(n, Role::EPSILON));
    DNNGRAPH_TRY(check_scalar(n, Role::EPSILON, eps, true));
    DNNGRAPH_TRY(check_scalar_range(n, Role::EPSILON, eps, 0.0, HUGE_VAL,
                                    "a finite value >= 0 (typically 1e-5)"));
  }

  if (is_bn && training) {
    Tensor rm = n.input(Role::PREV_RUNNING_MEAN), rv = n.input(Role::PREV_RUNNING_VAR);
    if (static_cast<bool>(rm) != static_cast<bool>(rv))
      return make_error(
          ErrorCode::InvalidGraph, op_label(n),
          ": PREV_RUNNING_MEAN and PREV_RUNNING_VAR go together; only ",
          rm ? port_label(Role::PREV_RUNNING_MEAN, rm) : port_label(Role::PREV_RUNNING_VAR, rv),
          " is given");
    if (rm) {
      DNNGRAPH_TRY(expect_dims(n, Role::PREV_RUNNING_MEAN, rm, s.stats, s.stats_why));
      DNNGRAPH_TRY(expect_dims(n, Role::PREV_RUNNING_VAR, rv, s.stats, s.stats_why));
      DNNGRAPH_PORT(mom, required_input(n, Role::MOMENTUM));
      DNNGRAPH_TRY(check_scalar(n, Role::MOMENTUM, mom, true));
      DNNGRAPH_TRY(check_scalar_range(n, Role::MOMENTUM, mom, 0.0, 1.0, "a value in [0, 1]"));
      DNNGRAPH_TRY(infer_stat_output(n, Role::NEXT_RUNNING_MEAN, s, ctx));
      DNNGRAPH_TRY(infer_stat_output(n, Role::NEXT_RUNNING_VAR, s, ctx));
    } else {
      DNNGRAPH_TRY(forbid_input(n, Role::MOMENTUM, "no running statistics are given"));
      DNNGRAPH_TRY(forbid_output(n, Role::NEXT_RUNNING_MEAN, "no running statistics are given"));
      DNNGRAPH_TRY(forbid_output(n, Role::NEXT_RUNNING_VAR, "no running statistics are given"));
    }
  } else {
    DNNGRAPH_TRY(forbid_output(n, Role::NEXT_RUNNING_MEAN, "only training batchnorm updates them"));
    DNNGRAPH_TRY(forbid_output(n, Role::NEXT_RUNNING_VAR, "only training batchnorm updates them"));
  }

  if (training) {
    if (is_rms)
      DNNGRAPH_TRY(forbid_output(n, Role::MEAN, "rmsnorm has no mean"));
    else
      DNNGRAPH_TRY(infer_stat_output(n, Role::MEAN, s, ctx));
    DNNGRAPH_TRY(infer_stat_output(n, Role::INV_VARIANCE, s, ctx));
  } else {
    DNNGRAPH_TRY(forbid_output(n, Role::MEAN, "inference produces no statistics"));
    DNNGRAPH_TRY(forbid_output(n, Role::INV_VARIANCE, "inference produces no statistics"));
  }
  return infer_output(n, Role::Y, y, x->dim, x, ctx, x->data_type);
}

Status infer_norm_backward(Node& n, const InferContext& ctx) {
  const auto& a = n.as<NormBwdAttrs>();
  DNNGRAPH_TRY(check_enums(n, a.kind, 0));
  DNNGRAPH_PORT(dy, required_input(n, Role::DY));
  DNNGRAPH_PORT(x, required_input(n, Role::X));
  DNNGRAPH_PORT(scale, required_input(n, Role::SCALE));
  DNNGRAPH_PORT(dx, required_output(n, Role::DX));
  DNNGRAPH_PORT(dscale, required_output(n, Role::DSCALE));
  DNNGRAPH_TRY(check_rank(n, Role::X, x, a.kind == NormKind::InstanceNorm ? 3 : 2, SIZE_MAX));
  if (a.kind == NormKind::AdaLayerNorm) DNNGRAPH_TRY(check_ada_scale(n, x, scale));
  const NormShapes s = shapes_for(a.kind, x->dim, scale->dim);
  DNNGRAPH_TRY(expect_dims(n, Role::DY, dy, x->dim, "the gradient has X's dims"));
  if (a.kind == NormKind::LayerNorm || a.kind == NormKind::RmsNorm)
    DNNGRAPH_TRY(check_row_norm_scale(n, scale, x->dim, s.params));
  DNNGRAPH_TRY(expect_dims(n, Role::SCALE, scale, s.params, s.params_why));
  if (a.kind == NormKind::RmsNorm)
    DNNGRAPH_TRY(forbid_input(n, Role::MEAN, "rmsnorm has no mean"));
  else
    DNNGRAPH_TRY(check_input(n, Role::MEAN, true, s.stats, s.stats_why));
  DNNGRAPH_TRY(check_input(n, Role::INV_VARIANCE, true, s.stats, s.stats_why));

  DNNGRAPH_TRY(infer_output(n, Role::DX, dx, x->dim, x, ctx, dy->data_type));
  DNNGRAPH_TRY(infer_output(n, Role::DSCALE, dscale, s.params, scale, ctx, scale->data_type));
  if (Tensor dbias = n.output(Role::DBIAS))
    DNNGRAPH_TRY(infer_output(n, Role::DBIAS, dbias, s.params, scale, ctx, scale->data_type));
  return Status::ok();
}

}  // namespace dnngraph::ir
