// The rules the SDPA family's lowerings share (sdpa_common.hpp): what is refused and why (the
// frontend's mask rules, STATS layouts, strides off 16 bytes, the kernel cache on old cuDNN),
// and the shape read from Q, K and V.
#include <type_traits>
#include <variant>

#include "dnngraph/engines/cudnn.hpp"
#include "dnngraph/ir/sdpa.hpp"
#include "engines/cudnn/loader.hpp"
#include "engines/cudnn/sdpa_common.hpp"

namespace dnngraph::cudnn {

Status sdpa_unsupported(const std::string& what, const std::string& feature) {
  return make_error(ErrorCode::NotSupported, what, ": ", feature,
                    " is not lowered to cuDNN (the reference engine runs it)");
}

Status sdpa_mask_rules(const std::string& what, const ir::SdpaOptions& a, int64_t sq, int64_t skv,
                       bool padding) {
  // As the cuDNN frontend (which refuses these at validate()): no left bound, and no right
  // bound on the bottom-right diagonal, when s_q > s_kv without sequence lengths (whole rows
  // would be masked).
  const bool right = a.causal || a.right_bound.has_value();
  const bool br = a.diagonal_alignment == DiagonalAlignment::BottomRight;
  if (a.left_bound && !padding && sq > skv)
    return sdpa_unsupported(what, "a left window bound with s_q > s_kv and no padding mask");
  if (right && br && !padding && sq > skv)
    return sdpa_unsupported(what,
                            "a bottom-right right bound (causal) with s_q > s_kv and no padding "
                            "mask");
  return Status::ok();
}

namespace {
// The SDPA family: the ops whose attributes are SdpaOptions (null for the others).
const ir::SdpaOptions* sdpa_options_of(const ir::Node& n) {
  return std::visit(
      [](const auto& attrs) -> const ir::SdpaOptions* {
        if constexpr (std::is_base_of_v<ir::SdpaOptions, std::decay_t<decltype(attrs)>>)
          return &attrs;
        else
          return nullptr;
      },
      n.attrs);
}

// cuDNN's attention kernels move Q, K, V, O and their gradients in 16-byte vectors and do not
// check the strides against that: a row that starts off a 16-byte boundary is read wrongly
// (wrong output on Hopper, a fault on older GPUs). Such a layout is refused.
Status sdpa_check_strides(const ir::Node& n, const std::string& what) {
  auto check = [&](const ir::Tensor& t, const char* port) -> Status {
    if (!t || t->is_virtual) return Status::ok();
    const int64_t bytes = data_type_size(t->data_type);
    const ir::TensorAttrs& v = *t;
    for (size_t i = 0; bytes > 0 && i < v.dim.size(); ++i)
      if (v.dim[i] > 1 && v.stride[i] != 1 && (v.stride[i] * bytes) % kTensorAlignment != 0)
        return make_error(ErrorCode::NotSupported, what, ": ", port, " ", t->describe(),
                          ": a stride of ", v.stride[i], " elements (", v.stride[i] * bytes,
                          " bytes) is not a multiple of ", kTensorAlignment,
                          " bytes, and cuDNN's attention kernels read such rows wrongly; give it "
                          "strides that are multiples of ",
                          kTensorAlignment,
                          " bytes (a contiguous copy has them when its last dim does), or run "
                          "the graph on the reference engine");
    return Status::ok();
  };
  for (auto [role, port] :
       {std::pair{Role::Q, "Q"}, {Role::K, "K"}, {Role::V, "V"}, {Role::O, "O"}, {Role::DO, "dO"}})
    DNNGRAPH_TRY(check(n.input(role), port));
  for (auto [role, port] :
       {std::pair{Role::O, "O"}, {Role::DQ, "dQ"}, {Role::DK, "dK"}, {Role::DV, "dV"}})
    DNNGRAPH_TRY(check(n.output(role), port));
  return Status::ok();
}

}  // namespace

Status sdpa_kernel_cache_rule(const ir::ValidatedGraph& g) {
  // 9.21: the version from which the frontend's own dynamic-shape attention sample runs.
  if (load_info().version >= 92100) return Status::ok();
  for (const auto& n : g.nodes())
    if (sdpa_options_of(n))
      return make_error(ErrorCode::NotSupported, op_kind_name(n.kind()), " '", n.name,
                        "': attention with dynamic shapes and a shared kernel cache is refused on "
                        "cuDNN ",
                        backend_version_string(),
                        ": its kernels gave wrong outputs for the shapes after the first "
                        "(docs/cudnn-engine.md, \"Dynamic shapes and the kernel cache\"); build "
                        "the graph without the kernel cache, or without dynamic shapes");
  return Status::ok();
}

Status sdpa_precheck(const ir::Node& n) {
  const ir::SdpaOptions* a = sdpa_options_of(n);
  if (!a) return Status::ok();
  const ir::Tensor q = n.input(Role::Q);
  if (!q || q->dim.size() != 4) return Status::ok();  // lowering says what is wrong
  const std::string what = detail::cat(op_kind_name(n.kind()), " '", n.name, "'");
  DNNGRAPH_TRY(sdpa_check_strides(n, what));
  const bool padding = n.input(Role::SEQ_LEN_Q) || n.input(Role::SEQ_LEN_KV);
  return sdpa_mask_rules(what, *a, q->dim[2], ir::sdpa_kv_length(n), padding);
}

Status sdpa_check_stats_layout(LowerContext& cx, const std::string& what, const ir::Tensor& stats) {
  // Before cuDNN 9.26 the fused backward reads a STATS input that is not packed [b,h,s_q,1]
  // wrongly (the cuDNN frontend refuses it too); the forward writes any layout right.
  if (const TensorView& sv = cx.view(stats); load_info().version < 92600) {
    const auto& d = sv.dim;
    const auto& st = sv.stride;
    const bool packed = d.size() == 4 && st[3] == 1 && st[2] == d[3] && st[1] == d[2] * d[3] &&
                        st[0] == d[1] * d[2] * d[3];
    if (!packed)
      return sdpa_unsupported(
          what, detail::cat("a STATS input ", stats->describe(),
                            " that is not packed [b,h,s_q,1] (strides [h*s_q, s_q, 1, 1]; cuDNN "
                            "before 9.26 reads other layouts wrongly)"));
  }
  return Status::ok();
}

Result<SdpaShape> sdpa_shape(LowerContext& cx, const ir::Node& n, const std::string& what,
                             const ir::SdpaOptions& a) {
  ir::Tensor q = n.input(Role::Q), k = n.input(Role::K), v = n.input(Role::V);
  const TensorView &qv = cx.view(q), &kv = cx.view(k), &vv = cx.view(v);
  if (qv.dim.size() != 4 || kv.dim.size() != 4 || vv.dim.size() != 4)
    return make_error(ErrorCode::NotSupported, what, ": Q, K and V must be 4-D [b,h,s,d], got ",
                      q->describe(), ", ", k->describe(), " and ", v->describe());
  DNNGRAPH_TRY(sdpa_check_strides(n, what));
  SdpaShape s{qv.dim[0], qv.dim[1], kv.dim[1], vv.dim[1], qv.dim[2], ir::sdpa_kv_length(n),
              qv.dim[3], vv.dim[3]};
  if (s.hk <= 0 || s.hv <= 0 || s.hq % s.hk != 0 || s.hq % s.hv != 0)
    return make_error(ErrorCode::NotSupported, what, ": query heads (", s.hq,
                      ") must be a multiple of the K heads (", s.hk, ") and V heads (", s.hv, ")");
  return s;
}

}  // namespace dnngraph::cudnn
