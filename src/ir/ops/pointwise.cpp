// Shape rules of pointwise ops: OUT_0 = f(IN_0[, IN_1[, IN_2]]). Inputs have the output's
// rank and each dim equal to the output's or 1 (it broadcasts). A one-element tensor (e.g. a
// pass-by-value scalar made with Graph::scalar, dims [1]) broadcasts whatever its rank.
// BINARY_SELECT: OUT = IN_2 ? IN_0 : IN_1 (IN_2 is the mask).
#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "ir/ops/common.hpp"

namespace dnngraph::ir {
namespace {

constexpr Role kInRoles[] = {Role::IN_0, Role::IN_1, Role::IN_2};

bool is_scalar_like(const Tensor& t) { return t->volume() == 1; }

// Whether two indices of a layout address the same element: taking its dims of extent > 1 in
// increasing stride order, each stride must clear the span of the ones before it.
bool overlaps(const std::vector<int64_t>& dim, const std::vector<int64_t>& stride) {
  std::vector<std::pair<int64_t, int64_t>> by_stride;  // (stride, dim)
  for (size_t d = 0; d < dim.size(); ++d)
    if (dim[d] > 1) by_stride.emplace_back(stride[d], dim[d]);
  std::sort(by_stride.begin(), by_stride.end());
  int64_t span = 1;  // elements covered by the dims so far
  for (const auto& [st, n] : by_stride) {
    if (st < span) return true;
    span = st * n;
  }
  return false;
}

Status check_attrs(const Node& n, const PointwiseAttrs& a) {
  const int mode = static_cast<int>(a.mode);
  if (mode < 0 || mode >= kPointwiseModeCount)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": mode ", mode,
                      " is not a pointwise mode (expected 0 to ", kPointwiseModeCount - 1, ")");
  if (a.relu_lower_clip && a.relu_upper_clip && *a.relu_lower_clip > *a.relu_upper_clip)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": relu_lower_clip ",
                      *a.relu_lower_clip, " is above relu_upper_clip ", *a.relu_upper_clip);
  // Clips may be infinite (no clip); the others scale values and must be finite.
  const std::pair<const char*, std::optional<double>> clips[] = {
      {"relu_lower_clip", a.relu_lower_clip}, {"relu_upper_clip", a.relu_upper_clip}};
  for (const auto& [name, v] : clips)
    if (v && std::isnan(*v))
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": attribute ", name,
                        " is NaN; expected a number (or leave it unset)");
  const std::pair<const char*, std::optional<double>> factors[] = {
      {"relu_lower_clip_slope", a.relu_lower_clip_slope},
      {"elu_alpha", a.elu_alpha},
      {"softplus_beta", a.softplus_beta},
      {"swish_beta", a.swish_beta}};
  for (const auto& [name, v] : factors)
    if (v && !std::isfinite(*v))
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": attribute ", name, " is ", *v,
                        "; expected a finite number (or leave it unset)");
  if (a.softplus_beta && *a.softplus_beta == 0.0)
    return make_error(ErrorCode::InvalidGraph, op_label(n),
                      ": attribute softplus_beta is 0; softplus divides by it, expected a "
                      "non-zero value");
  return Status::ok();
}

}  // namespace

Status infer_pointwise(Node& n, const InferContext& ctx) {
  const auto& attrs = n.as<PointwiseAttrs>();
  DNNGRAPH_TRY(check_attrs(n, attrs));
  const int arity = pointwise_arity(attrs.mode);
  std::vector<Tensor> in;
  for (int i = 0; i < 3; ++i) {
    Tensor t = n.input(kInRoles[i]);
    if (i < arity && !t)
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": mode ",
                        pointwise_mode_name(attrs.mode), " takes ", arity, " inputs but input ",
                        kInRoles[i], " is missing");
    if (i >= arity && t)
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": mode ",
                        pointwise_mode_name(attrs.mode), " takes ", arity,
                        " input(s) but got an extra ", port_label(kInRoles[i], t));
    if (t) in.push_back(t);
  }
  DNNGRAPH_PORT(out, required_output(n, Role::OUT_0));
  if (attrs.mode == PointwiseMode::GenIndex) {
    const int64_t rank = static_cast<int64_t>(in[0]->dim.size());
    if (!attrs.axis || *attrs.axis < 0 || *attrs.axis >= rank)
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": GEN_INDEX needs an axis in [0, ",
                        rank, ") (a dim of ", port_label(Role::IN_0, in[0]), ", dims ",
                        dims_str(in[0]->dim), ") but axis is ",
                        attrs.axis ? std::to_string(*attrs.axis) : std::string("unset"));
  } else if (attrs.axis) {
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": attribute axis ", *attrs.axis,
                      " is only for GEN_INDEX, not ", pointwise_mode_name(attrs.mode));
  }

  // The broadcast shape of the inputs. Scalar-like inputs only join when ranks agree, so a
  // [1] scalar against a rank-4 tensor leaves the rank at 4.
  size_t main = 0;  // the input whose layout the output follows
  for (size_t i = 0; i < in.size(); ++i)
    if (!is_scalar_like(in[i]) &&
        (is_scalar_like(in[main]) || in[i]->dim.size() > in[main]->dim.size()))
      main = i;
  std::vector<int64_t> dims = in[main]->dim;
  for (size_t i = 0; i < in.size(); ++i) {
    const Tensor& t = in[i];
    if (t->dim.size() != dims.size()) {
      if (is_scalar_like(t)) continue;
      return make_error(ErrorCode::InvalidGraph, op_label(n),
                        ": rank mismatch: ", port_label(kInRoles[main], in[main]), " has dims ",
                        dims_str(in[main]->dim), " but ", port_label(kInRoles[i], t), " has dims ",
                        dims_str(t->dim), " (ranks must match)");
    }
    for (size_t d = 0; d < dims.size(); ++d) {
      if (t->dim[d] == dims[d] || t->dim[d] == 1) continue;
      if (dims[d] == 1) {
        dims[d] = t->dim[d];
        continue;
      }
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": cannot broadcast ",
                        port_label(kInRoles[i], t), " dims ", dims_str(t->dim),
                        " with the other inputs' ", dims_str(dims), ": dim ", d, " is ", t->dim[d],
                        " vs ", dims[d]);
    }
  }

  // A user-set output may be larger than the inputs, but only where they broadcast.
  if (!out->dim.empty()) {
    if (out->dim.size() != dims.size() || !broadcastable(dims, out->dim))
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": output ",
                        port_label(Role::OUT_0, out), " was set to dims ", dims_str(out->dim),
                        " but the inputs broadcast to ", dims_str(dims));
    dims = out->dim;
  }
  // Follow the layout of an input that has the output's full shape (else the main one). As in
  // the cuDNN frontend, an unset output stride is that input's stride itself, gaps included (a
  // strided view in, the same view out: e.g. an in-place update of a slice), unless its
  // elements overlap; otherwise it is packed in the input's dim order.
  Tensor layout = in[main];
  for (const Tensor& t : in)
    if (t->dim == dims) {
      layout = t;
      if (out->stride.empty() && out->dim.empty() && t->stride.size() == dims.size() &&
          !overlaps(t->dim, t->stride))
        out->stride = t->stride;
      break;
    }
  return infer_output(n, Role::OUT_0, out, dims, layout, ctx, in[main]->data_type);
}

}  // namespace dnngraph::ir
