#include "engines/cudnn/canonicalize.hpp"

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <set>
#include <string>

#include "engines/cudnn/view.hpp"

namespace dnngraph::cudnn {
namespace {

// Window ops lowered as views emit no cuDNN operation (view.hpp): the shape rules below look
// at the other nodes only.
bool only_pointwise_and_reduction(const ir::ValidatedGraph& g) {
  bool any = false;
  for (const auto& n : g.nodes()) {
    if (is_lowered_view(g, n)) continue;
    if (n.kind() != ir::OpKind::Pointwise && n.kind() != ir::OpKind::Reduction) return false;
    any = true;
  }
  return any;
}

bool only_matmul_pointwise_reduction(const ir::ValidatedGraph& g) {
  for (const auto& n : g.nodes())
    if (n.kind() != ir::OpKind::Pointwise && n.kind() != ir::OpKind::Reduction &&
        n.kind() != ir::OpKind::Matmul && !is_lowered_view(g, n))
      return false;
  return true;
}

bool has_kind(const ir::ValidatedGraph& g, ir::OpKind k) {
  for (const auto& n : g.nodes())
    if (n.kind() == k) return true;
  return false;
}

// Leading 1s up to `rank`; the stride of an added dim spans the whole tensor (its value does
// not matter for a dim of size 1, but cuDNN prefers strides that look packed).
TensorView pad_leading(TensorView v, size_t rank) {
  while (v.dim.size() < rank) {
    int64_t span = v.dim.empty() ? 1 : std::max<int64_t>(v.dim[0] * v.stride[0], 1);
    v.dim.insert(v.dim.begin(), 1);
    v.stride.insert(v.stride.begin(), span);
  }
  return v;
}

TensorView pad_trailing(TensorView v, size_t rank) {
  while (v.dim.size() < rank) {
    v.dim.push_back(1);
    v.stride.push_back(1);
  }
  return v;
}

// The largest extent of each dim over every view (all views have the same rank).
std::vector<int64_t> iteration_space(const ViewMap& views) {
  std::vector<int64_t> space(views.empty() ? 0 : views.begin()->second.dim.size(), 1);
  for (const auto& [t, v] : views)
    for (size_t i = 0; i < space.size(); ++i) space[i] = std::max(space[i], v.dim[i]);
  return space;
}

// Folds the dims [0, fold_end) of every view (all views have the same rank): dims of extent 1
// everywhere are dropped and neighbours merged when every tensor either spans both
// contiguously or has extent 1 in both. With `permute`, the dims are first ordered by the
// strides of `layout_of` (pointwise and reduction do not care about dim order), so that NHWC
// folds like NCHW. `consumed` are the graph inputs read by pointwise ops. With `apply` false the
// views are left as they are and only the broadcast check below runs.
Status fold(ViewMap& views, const ir::Tensor& layout_of, size_t fold_end, bool permute,
            const std::vector<const ir::TensorAttrs*>& consumed, bool apply = true) {
  if (views.empty()) return Status::ok();
  const size_t rank = views.begin()->second.dim.size();
  const std::vector<int64_t> space = iteration_space(views);
  std::vector<size_t> order(fold_end);
  std::iota(order.begin(), order.end(), 0);
  if (permute && layout_of && views.count(layout_of.get())) {
    const auto& s = views.at(layout_of.get()).stride;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return s[a] > s[b]; });
  }
  std::vector<std::vector<size_t>> groups;
  for (size_t i : order) {
    if (space[i] == 1) continue;
    if (!groups.empty()) {
      const size_t prev = groups.back().back();
      bool ok = true;
      for (const auto& [t, v] : views) {
        const bool full_prev = v.dim[prev] == space[prev], full_i = v.dim[i] == space[i];
        if (full_prev && full_i) {
          if (v.stride[prev] != v.stride[i] * v.dim[i]) ok = false;
        } else if (!(v.dim[prev] == 1 && v.dim[i] == 1)) {
          ok = false;
        }
        if (!ok) break;
      }
      if (ok) {
        groups.back().push_back(i);
        continue;
      }
    }
    groups.push_back({i});
  }
  // cuDNN computes wrong results (SUCCESS, every "row" but the first wrong) for pointwise-only
  // graphs where an input has extent 1 along the innermost dim of the iteration space, e.g.
  // X[4,33,40] + B[1,33,1]. Zero strides on the broadcast dims are computed just as wrongly,
  // and moving a dim every input spans innermost leaves cuDNN without an engine: such graphs
  // are rejected here (docs/cudnn-engine.md, "Shape canonicalization").
  if (permute && !groups.empty())
    for (const auto* t : consumed)
      for (size_t i : groups.back())
        if (views.at(t).dim[i] != space[i])
          return make_error(ErrorCode::NotSupported, "pointwise graph: input ", t->describe(),
                            " broadcasts along the innermost dim of its folded form, which "
                            "cuDNN computes wrongly in pointwise-only graphs; use a "
                            "channels-last layout, or run it on the reference engine (a cpu "
                            "handle)");
  if (!apply) return Status::ok();
  // Folded into one row longer than 2^18 elements, a pointwise-only graph failed on the H200
  // (ReLU backward on [32,64,56,56] and [64,256,14,14]: one at execute with
  // CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER, which leaves the CUDA context unusable), where a
  // row of 2^18 ([4,64,32,32]) was exact: refused before cuDNN sees it (docs/cudnn-engine.md).
  constexpr int64_t kLongestRow = int64_t{1} << 18;
  if (permute && !groups.empty()) {
    int64_t row = 1;
    for (size_t i : groups.back()) row *= space[i];
    if (row > kLongestRow)
      return make_error(ErrorCode::NotSupported, "pointwise graph: its tensors fold into rows of ",
                        row, " elements, longer than the ", kLongestRow,
                        " this engine sends to cuDNN in a pointwise-only graph; run it on the "
                        "reference engine (a cpu handle), or as part of a graph with a matmul or "
                        "convolution");
  }
  for (auto& [t, v] : views) {
    TensorView out;
    for (const auto& g : groups) {
      int64_t d = 1;
      for (size_t i : g) d *= v.dim[i];
      out.dim.push_back(d);
      out.stride.push_back(v.stride[g.back()]);
    }
    for (size_t i = fold_end; i < rank; ++i) {
      out.dim.push_back(v.dim[i]);
      out.stride.push_back(v.stride[i]);
    }
    v = pad_leading(std::move(out), 3);
  }
  return Status::ok();
}

bool is_product(ir::OpKind k) {
  return k == ir::OpKind::Matmul || k == ir::OpKind::ConvFprop || k == ir::OpKind::ConvDgrad ||
         k == ir::OpKind::ConvWgrad;
}

// A matmul or convolution reading another one's result in the same graph (a transformer MLP:
// matmul, GELU, matmul) is refused: cuDNN 9.19 built plans for such graphs that returned wrong
// values with a success status (docs/cudnn-engine.md, "Graphs cuDNN gets wrong"). One product
// per chain, with its prologue and epilogue ops, is what its fusion engines take; partition()
// splits a larger graph into such pieces.
Status refuse_chained_products(const ir::ValidatedGraph& graph) {
  std::set<const ir::TensorAttrs*> after;  // tensors computed from a product's result
  for (const auto& n : graph.nodes()) {
    bool reads = false;
    for (const auto& p : n.inputs) reads = reads || (p.tensor && after.count(p.tensor.get()));
    const bool product = is_product(n.kind());
    if (product && reads)
      return make_error(ErrorCode::NotSupported, "graph '", graph.name(), "': op '", n.name, "' (",
                        ir::op_kind_name(n.kind()),
                        ") reads the result of another matmul or convolution of the graph; the "
                        "cuDNN engine takes one per chain (cuDNN computes some such graphs "
                        "wrongly): split the graph there (dnngraph.partition() does)");
    if (product || reads)
      for (const auto& p : n.outputs)
        if (p.tensor) after.insert(p.tensor.get());
  }
  return Status::ok();
}

// The rules of canonicalize() after the first views are made (every view of rank `rank`).
Status canonicalize_shapes(const ir::ValidatedGraph& graph, ViewMap& views, size_t rank);

}  // namespace

Result<ViewMap> canonicalize(const ir::ValidatedGraph& graph) {
  DNNGRAPH_TRY(refuse_chained_products(graph));
  ViewMap views;
  size_t rank = 0;
  for (const auto& t : graph.tensors()) rank = std::max(rank, t->dim.size());
  rank = std::max<size_t>(rank, 3);
  for (const auto& t : graph.tensors()) views[t.get()] = pad_leading({t->dim, t->stride}, rank);
  // A window op lowered as a view is its input's memory: its dims with the window's strides
  // (the graph gives it packed strides of its own, which describe no memory here). The input
  // itself goes to cuDNN only when an op other than a window op reads it; otherwise it is left
  // out of the folding below (its larger dims are no part of the iteration space) and keeps
  // its padded view.
  ViewMap unread_sources;
  for (const auto& n : graph.nodes()) {
    if (!is_window_op(n.kind())) continue;
    const Result<WindowView> v = lowered_view(graph, n);
    if (!v) continue;  // not lowered (the engine's precheck refuses it)
    const ir::Tensor& x = v->source;
    views[v->view.get()] = pad_leading({v->view->dim, v->stride}, rank);
    const bool read = std::any_of(graph.nodes().begin(), graph.nodes().end(), [&](const auto& m) {
      if (is_window_op(m.kind())) return false;
      return std::any_of(m.inputs.begin(), m.inputs.end(),
                         [&](const auto& p) { return p.tensor.get() == x.get(); });
    });
    if (!read && views.count(x.get())) {
      unread_sources[x.get()] = views.at(x.get());
      views.erase(x.get());
    }
  }
  DNNGRAPH_TRY(canonicalize_shapes(graph, views, rank));
  views.merge(unread_sources);
  return views;
}

namespace {

Status canonicalize_shapes(const ir::ValidatedGraph& graph, ViewMap& views, size_t rank) {
  if (only_pointwise_and_reduction(graph)) {
    ir::Tensor layout_of;
    for (const auto& n : graph.nodes())
      for (const auto& p : n.outputs)
        if (!layout_of && p.tensor && !p.tensor->is_virtual) layout_of = p.tensor;
    for (const auto& n : graph.nodes())
      if (!layout_of && !is_lowered_view(graph, n)) layout_of = n.outputs[0].tensor;
    // The views of window ops are inputs for cuDNN: no operation writes them.
    std::vector<const ir::TensorAttrs*> consumed, produced;
    for (const auto& n : graph.nodes())
      if (!is_lowered_view(graph, n))
        for (const auto& p : n.outputs) produced.push_back(p.tensor.get());
    for (const auto& n : graph.nodes())
      if (n.kind() == ir::OpKind::Pointwise)
        for (const auto& p : n.inputs)
          if (std::find(produced.begin(), produced.end(), p.tensor.get()) == produced.end() &&
              !p.tensor->is_pass_by_value)
            consumed.push_back(p.tensor.get());
    // Graphs of rank 3 (2-D ones padded to 3) without broadcasting go to cuDNN as they are, as
    // the frontend gives them (folding [1,64,64] to [1,1,4096] left an fp8 SiLU-and-mul without
    // an engine). 4-D and 5-D ones are folded to 3-D, where cuDNN 9.19 has engines for them, and
    // so are graphs whose inputs broadcast: unfolded, X[2,128,256] * B[1,1,256] left every batch
    // but the first unwritten (SUCCESS returned); folded to [1,256,256] it is exact.
    const std::vector<int64_t> space = iteration_space(views);
    const bool broadcasts = std::any_of(consumed.begin(), consumed.end(),
                                        [&](const auto* t) { return views.at(t).dim != space; });
    DNNGRAPH_TRY(fold(views, layout_of, rank, true, consumed, rank > 3 || broadcasts));
  } else if (only_matmul_pointwise_reduction(graph) && rank > 3) {
    // cuDNN matmuls take one batch dim: fold the leading batch dims where that is legal.
    DNNGRAPH_TRY(fold(views, nullptr, rank - 2, false, {}));
  } else if (has_kind(graph, ir::OpKind::NormFwd) || has_kind(graph, ir::OpKind::NormBwd)) {
    for (auto& [t, v] : views) v = pad_trailing(std::move(v), 4);
  }
  return Status::ok();
}

}  // namespace
}  // namespace dnngraph::cudnn
