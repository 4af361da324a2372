#include "engines/cudnn/canonicalize.hpp"

#include <algorithm>
#include <numeric>

namespace dnngraph::cudnn {
namespace {

bool only_pointwise_and_reduction(const ir::Graph& g) {
  for (const auto& n : g.nodes())
    if (n.kind() != ir::OpKind::Pointwise && n.kind() != ir::OpKind::Reduction) return false;
  return !g.nodes().empty();
}

bool has_kind(const ir::Graph& g, ir::OpKind k) {
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

// Folds a pointwise/reduction-only graph. All views already have the same rank.
void fold(ViewMap& views, const ir::Tensor& layout_of) {
  if (views.empty()) return;
  const size_t rank = views.begin()->second.dim.size();
  // The iteration space: the largest extent of each dim.
  std::vector<int64_t> space(rank, 1);
  for (const auto& [t, v] : views)
    for (size_t i = 0; i < rank; ++i) space[i] = std::max(space[i], v.dim[i]);
  // Order dims outermost-first by the reference tensor's strides (pointwise and reduction do
  // not care about dim order), so that NHWC folds like NCHW.
  std::vector<size_t> order(rank);
  std::iota(order.begin(), order.end(), 0);
  if (layout_of && views.count(layout_of.get())) {
    const auto& s = views.at(layout_of.get()).stride;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return s[a] > s[b]; });
  }
  // Drop dims that are 1 everywhere.
  std::vector<size_t> kept;
  for (size_t i : order)
    if (space[i] != 1) kept.push_back(i);
  // Groups of original dims, outermost first; merge a group into its inner neighbour when every
  // tensor either spans both contiguously or broadcasts (extent 1) over both.
  std::vector<std::vector<size_t>> groups;
  for (size_t i : kept) {
    if (!groups.empty()) {
      size_t outer = groups.back().front();  // any dim of the group: the test is per dim pair
      size_t prev = groups.back().back();
      (void)outer;
      bool ok = true;
      for (const auto& [t, v] : views) {
        bool full_prev = v.dim[prev] == space[prev], full_i = v.dim[i] == space[i];
        bool one_prev = v.dim[prev] == 1, one_i = v.dim[i] == 1;
        if (full_prev && full_i) {
          if (v.stride[prev] != v.stride[i] * v.dim[i]) { ok = false; break; }
        } else if (!(one_prev && one_i)) {
          ok = false;
          break;
        }
      }
      if (ok) {
        groups.back().push_back(i);
        continue;
      }
    }
    groups.push_back({i});
  }
  for (auto& [t, v] : views) {
    TensorView out;
    for (const auto& g : groups) {
      int64_t d = 1;
      for (size_t i : g) d *= v.dim[i];
      out.dim.push_back(d);
      out.stride.push_back(v.stride[g.back()]);
    }
    v = pad_leading(std::move(out), 3);
  }
}

}  // namespace

Result<ViewMap> canonicalize(const ir::Graph& graph) {
  ViewMap views;
  size_t rank = 0;
  for (const auto& t : graph.tensors()) {
    if (t->dim.size() != t->stride.size())
      return make_error(ErrorCode::InvalidGraph, "tensor ", t->describe(),
                        ": dims and strides differ in length (was the graph validated?)");
    rank = std::max(rank, t->dim.size());
  }
  rank = std::max<size_t>(rank, 3);
  for (const auto& t : graph.tensors()) views[t.get()] = pad_leading({t->dim, t->stride}, rank);

  if (only_pointwise_and_reduction(graph)) {
    ir::Tensor layout_of;
    for (const auto& n : graph.nodes())
      for (const auto& p : n.outputs)
        if (!layout_of && p.tensor && !p.tensor->is_virtual) layout_of = p.tensor;
    if (!layout_of && !graph.nodes().empty()) layout_of = graph.nodes().front().outputs[0].tensor;
    fold(views, layout_of);
  } else if (has_kind(graph, ir::OpKind::NormFwd) || has_kind(graph, ir::OpKind::NormBwd)) {
    for (auto& [t, v] : views) v = pad_trailing(std::move(v), 4);
  }
  return views;
}

}  // namespace dnngraph::cudnn
