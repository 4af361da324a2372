// Slice on the cuDNN engine. cuDNN 9.19 has no slice operation (the cuDNN frontend 1.32 refuses
// slice below 9.22), and none is needed for a slice of a graph input: its output is a strided
// window into the user's buffer (slice_view.hpp). lower_slice emits no operation; it marks the
// output as a view of the input, so that the ops reading it get a non-virtual descriptor with a
// fresh uid (LowerContext::tensor), and the plan binds it at execute to the input's pointer plus
// the byte offset (plan.cpp). Other slices are refused with the reason (lowered_slice_view).

#include "engines/cudnn/lowering.hpp"
#include "engines/cudnn/slice_view.hpp"

namespace dnngraph::cudnn {
namespace {

// The node of `g` that writes `t`, else null.
const ir::Node* producer_of(const ir::ValidatedGraph& g, const ir::Tensor& t) {
  for (const auto& m : g.nodes())
    for (const auto& p : m.outputs)
      if (p.tensor.get() == t.get()) return &m;
  return nullptr;
}

constexpr const char* kLowered =
    "the cuDNN engine lowers a slice only as a strided view of a graph input (a tensor the "
    "caller binds, written by no op of the graph) whose result other ops of the graph read";

}  // namespace

Result<SliceView> slice_view(const std::vector<int64_t>& x_stride, const ir::SliceAttrs& a,
                             DataType type) {
  const size_t rank = x_stride.size();
  if (a.start.size() != rank || (!a.stride.empty() && a.stride.size() != rank))
    return make_error(ErrorCode::InvalidArgument, "slice view: ", a.start.size(), " starts and ",
                      a.stride.size(), " steps for an input of rank ", rank);
  if (is_sub_byte(type))
    return make_error(ErrorCode::NotSupported, "a slice of a ", data_type_name(type),
                      " tensor is not lowered as a view (its elements are smaller than a byte, "
                      "so a view may start inside a byte)");
  SliceView v;
  v.stride.resize(rank);
  for (size_t d = 0; d < rank; ++d) {
    // validate() bounded every extent in int64 and requires steps >= 1, so these products
    // stay inside X's own byte span.
    v.stride[d] = x_stride[d] * (a.stride.empty() ? 1 : a.stride[d]);
    v.element_offset += a.start[d] * x_stride[d];
  }
  v.byte_offset = v.element_offset * data_type_size(type);
  v.alignment = kTensorAlignment;
  while (v.alignment > 1 && v.byte_offset % v.alignment != 0) v.alignment /= 2;
  return v;
}

Result<SliceView> lowered_slice_view(const ir::ValidatedGraph& g, const ir::Node& n) {
  const std::string what = detail::cat("slice '", n.name, "'");
  const ir::Tensor x = n.input(Role::X), y = n.output(Role::Y);
  if (x->is_virtual || producer_of(g, x)) {
    const ir::Node* p = producer_of(g, x);
    return make_error(ErrorCode::NotSupported, what, ": its input ", x->describe(),
                      " is written by ", p ? op_kind_name(p->kind()) : std::string_view("an op"),
                      " '", p ? p->name : std::string(), "' of this graph; ", kLowered,
                      " (cuDNN 9.19 has no slice operation to cut another op's result); make ",
                      "the sliced tensor a graph input (split the graph at '", x->name,
                      "'), or run the graph on the CPU reference engine");
  }
  if (x->is_pass_by_value)
    return make_error(ErrorCode::NotSupported, what, ": its input ", x->describe(),
                      " is pass-by-value (a host scalar); ", kLowered,
                      "; pass the sliced value itself");
  if (!y->is_virtual)
    return make_error(ErrorCode::NotSupported, what, ": its output ", y->describe(),
                      " is a graph output; ", kLowered,
                      ", so it writes nothing (cuDNN 9.19 has no slice operation to copy the "
                      "window into the output's buffer); read the window of '",
                      x->name,
                      "' directly (the same memory at the slice's offset and strides), feed the "
                      "slice to the op that needs it, or run the graph on the CPU reference "
                      "engine");
  if (x->data_type == DataType::FP4_E2M1)
    return make_error(ErrorCode::NotSupported, what, ": its input ", x->describe(),
                      " is FP4_E2M1: ", kLowered,
                      ", and FP4 views are not lowered (half-byte elements; cuDNN runs FP4 "
                      "only in block-scaled engines); run the graph on the CPU reference engine");
  // A window must start on a kTensorAlignment boundary of the input: cuDNN's kernels read
  // tensors at that alignment (a less aligned view built, then failed at execute: docs).
  auto v = slice_view(x->stride, n.as<ir::SliceAttrs>(), x->data_type);
  if (!v) return Status(v.status().code(), detail::cat(what, ": ", v.status().message()));
  if (v->byte_offset % kTensorAlignment != 0)
    return make_error(ErrorCode::NotSupported, what, ": its window starts ", v->byte_offset,
                      " bytes into ", x->describe(), ", not a multiple of ", kTensorAlignment,
                      " bytes; ", kLowered, ", starting on a ", kTensorAlignment,
                      "-byte boundary (cuDNN reads tensors at that alignment); choose starts "
                      "whose offset is a multiple of ",
                      kTensorAlignment,
                      " bytes, pass the window as its own input, or run the graph on the CPU "
                      "reference engine");
  return v;
}

Status slice_view_check(const ir::ValidatedGraph& g, const ir::Node& n) {
  return lowered_slice_view(g, n).status();
}

bool is_view_slice(const ir::ValidatedGraph& g, const ir::Node& n) {
  return n.kind() == ir::OpKind::Slice && slice_view_check(g, n).is_ok();
}

Status lower_slice(LowerContext& cx, const ir::Node& n) {
  DNNGRAPH_ASSIGN_OR_RETURN(const SliceView v, lowered_slice_view(cx.graph(), n));
  // The canonical view of y (canonicalize) already carries these strides, possibly with dims
  // folded; the offset and alignment do not depend on how the dims are described.
  cx.set_view_of(n.output(Role::Y), n.input(Role::X), v.byte_offset, v.alignment);
  return Status::ok();
}

}  // namespace dnngraph::cudnn
