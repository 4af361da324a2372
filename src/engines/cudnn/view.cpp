// Window ops (WindowAttrs) lowered as views of a graph input (view.hpp): which nodes can
// be, the refusals of those that cannot, and the lowering that records the view for the plan.
#include "engines/cudnn/view.hpp"

#include <string>
#include <variant>

#include "engines/cudnn/lowering.hpp"

namespace dnngraph::cudnn {
namespace {

// The node of `g` that writes `t`, else null.
const ir::Node* producer_of(const ir::ValidatedGraph& g, const ir::Tensor& t) {
  for (const auto& m : g.nodes())
    for (const auto& p : m.outputs)
      if (p.tensor.get() == t.get()) return &m;
  return nullptr;
}

// Node `n`'s window of its input with strides `x_stride`; nullopt for an op that has none.
std::optional<ir::StridedWindow> window_of(const ir::Node& n, std::span<const int64_t> x_stride) {
  return std::visit(
      [&](const auto& a) -> std::optional<ir::StridedWindow> {
        if constexpr (WindowAttrs<std::decay_t<decltype(a)>>)
          return a.window(x_stride);
        else
          return std::nullopt;
      },
      n.attrs);
}

// What the cuDNN engine lowers of op `op`, for the refusals.
std::string lowered_only(std::string_view op) {
  return detail::cat("the cuDNN engine lowers a ", op,
                     " only as a strided view of a graph input (a tensor the caller binds, "
                     "written by no op of the graph) whose result other ops of the graph read");
}

// Refuses what cannot be a view: an input another op writes or that is a host scalar, an
// output the caller binds, an FP4 input.
Status check_ports(const ir::ValidatedGraph& g, const ir::Node& n, const ir::Tensor& x,
                   const ir::Tensor& y) {
  const std::string_view op = op_kind_name(n.kind());
  const std::string what = detail::cat(op, " '", n.name, "'");
  if (x->is_virtual || producer_of(g, x)) {
    const ir::Node* p = producer_of(g, x);
    return make_error(ErrorCode::NotSupported, what, ": its input ", x->describe(),
                      " is written by ", p ? op_kind_name(p->kind()) : std::string_view("an op"),
                      " '", p ? p->name : std::string(), "' of this graph; ", lowered_only(op),
                      " (cuDNN 9.19 has no ", op, " operation to cut another op's result); make ",
                      "the sliced tensor a graph input (split the graph at '", x->name,
                      "'), or run the graph on the CPU reference engine");
  }
  if (x->is_pass_by_value)
    return make_error(ErrorCode::NotSupported, what, ": its input ", x->describe(),
                      " is pass-by-value (a host scalar); ", lowered_only(op),
                      "; pass the sliced value itself");
  if (!y->is_virtual)
    return make_error(ErrorCode::NotSupported, what, ": its output ", y->describe(),
                      " is a graph output; ", lowered_only(op), ", so it writes nothing (cuDNN ",
                      "9.19 has no ", op,
                      " operation to copy the window into the output's buffer); read the window "
                      "of '",
                      x->name,
                      "' directly (the same memory at the window's offset and strides), feed "
                      "the ",
                      op, " to the op that needs it, or run the graph on the CPU reference engine");
  if (x->data_type == DataType::FP4_E2M1)
    return make_error(ErrorCode::NotSupported, what, ": its input ", x->describe(),
                      " is FP4_E2M1: ", lowered_only(op),
                      ", and FP4 views are not lowered (half-byte elements; cuDNN runs FP4 "
                      "only in block-scaled engines); run the graph on the CPU reference engine");
  return Status::ok();
}

}  // namespace

Result<WindowView> window_view(const ir::StridedWindow& w, DataType type) {
  if (is_sub_byte(type))
    return make_error(ErrorCode::NotSupported, "a window of a ", data_type_name(type),
                      " tensor is not lowered as a view (its elements are smaller than a byte, "
                      "so a view may start inside a byte)");
  WindowView v;
  v.stride = w.stride;
  v.element_offset = w.offset;
  v.byte_offset = w.offset * data_type_size(type);
  v.alignment = kTensorAlignment;
  while (v.alignment > 1 && v.byte_offset % v.alignment != 0) v.alignment /= 2;
  return v;
}

Result<WindowView> lowered_view(const ir::ValidatedGraph& g, const ir::Node& n) {
  const std::string_view op = op_kind_name(n.kind());
  const std::string what = detail::cat(op, " '", n.name, "'");
  const auto& info = ir::op_info(n.kind());
  if (!is_window_op(n.kind()) || info.inputs.size() != 1 || info.outputs.size() != 1)
    return make_error(ErrorCode::InvalidArgument, what, ": not an op lowered as a view");
  const ir::Tensor x = n.input(info.inputs[0]), y = n.output(info.outputs[0]);
  DNNGRAPH_TRY(check_ports(g, n, x, y));
  const std::optional<ir::StridedWindow> w = window_of(n, x->stride);
  if (!w)
    return make_error(ErrorCode::InvalidArgument, what,
                      ": its attributes do not have one entry "
                      "per dim of its input ",
                      x->describe());
  auto v = window_view(*w, x->data_type);
  if (!v) return Status(v.status().code(), detail::cat(what, ": ", v.status().message()));
  // A window must start on a kTensorAlignment boundary of the input: cuDNN's kernels read
  // tensors at that alignment (a less aligned view built, then failed at execute: docs).
  if (v->byte_offset % kTensorAlignment != 0)
    return make_error(ErrorCode::NotSupported, what, ": its window starts ", v->byte_offset,
                      " bytes into ", x->describe(), ", not a multiple of ", kTensorAlignment,
                      " bytes; ", lowered_only(op), ", starting on a ", kTensorAlignment,
                      "-byte boundary (cuDNN reads tensors at that alignment); choose starts "
                      "whose offset is a multiple of ",
                      kTensorAlignment,
                      " bytes, pass the window as its own input, or run the graph on the CPU "
                      "reference engine");
  v->source = x;
  v->view = y;
  return v;
}

Status view_precheck(const ir::ValidatedGraph& g, const ir::Node& n) {
  if (!is_window_op(n.kind())) return Status::ok();
  return lowered_view(g, n).status();
}

bool is_lowered_view(const ir::ValidatedGraph& g, const ir::Node& n) {
  return is_window_op(n.kind()) && lowered_view(g, n).is_ok();
}

Status lower_view(LowerContext& cx, const ir::Node& n) {
  DNNGRAPH_ASSIGN_OR_RETURN(const WindowView v, lowered_view(cx.graph(), n));
  // The canonical view of the output (canonicalize) already carries these strides, possibly
  // with dims folded; the offset and alignment do not depend on how the dims are described.
  cx.set_view_of(v.view, v.source, v.byte_offset, v.alignment);
  return Status::ok();
}

}  // namespace dnngraph::cudnn
