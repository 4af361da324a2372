// Graph::validate(): graph-level wiring checks, topological sort, per-node inference (in
// src/ir/ops/*.cpp) and uid assignment. Failure leaves the graph as it was before the call,
// so fixing the reported problem and validating again starts from what the user wrote.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "dnngraph/ir/graph.hpp"
#include "dnngraph/ir/sdpa.hpp"
#include "ir/ops/common.hpp"
#include "ir/ops/op_family.hpp"
#include "ir/subgraph.hpp"

namespace dnngraph::ir {

Status infer_node(Node& n, const InferContext& ctx) {
  const OpInfo& info = op_info(n.kind());
  DNNGRAPH_TRY(check_roles(n, info.inputs, info.outputs));
  if (!n.subgraphs.empty() && n.kind() != OpKind::SdpaFwd && n.kind() != OpKind::SdpaBwd)
    return make_error(ErrorCode::InvalidGraph, op_label(n), ": has subgraph '",
                      n.subgraphs.front().name,
                      "'; only sdpa and sdpa_backward take subgraphs "
                      "(score modifiers)");
  switch (n.kind()) {
#define DNNGRAPH_OP_INFER_CASE(kind, name, Attrs, in, out) \
  case OpKind::kind:                                       \
    return infer_##name(n, ctx);
    DNNGRAPH_OPS(DNNGRAPH_OP_INFER_CASE)
#undef DNNGRAPH_OP_INFER_CASE
  }
  return make_error(ErrorCode::Internal, op_label(n), ": unknown op kind");
}

namespace {

using TensorKey = const TensorAttrs*;

struct Wiring {
  std::unordered_map<TensorKey, size_t> producer;  // tensor -> index of the node writing it
  // tensor -> first (node index, role) reading it, to name an op in messages
  std::unordered_map<TensorKey, std::pair<size_t, Role>> first_use;
};

std::string use_of(const std::vector<Node>& nodes, const Wiring& w, const Tensor& t) {
  auto it = w.first_use.find(t.get());
  if (it == w.first_use.end()) return "";
  return detail::cat(" (input ", it->second.second, " of ", op_label(nodes[it->second.first]), ")");
}

Status check_wiring(const std::vector<Tensor>& tensors, const std::vector<Node>& nodes, Wiring& w) {
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    for (const auto* ports : {&n.inputs, &n.outputs})
      for (const Port& p : *ports)
        if (!p.tensor)
          return make_error(ErrorCode::InvalidGraph, op_label(n), ": port ", p.role,
                            " has no tensor");
    for (const Port& p : n.outputs) {
      auto [it, fresh] = w.producer.emplace(p.tensor.get(), i);
      if (!fresh)
        return make_error(ErrorCode::InvalidGraph, "tensor '", p.tensor->name,
                          "' is produced twice: by ", op_label(nodes[it->second]), " and by ",
                          op_label(n), " (output ", p.role, ")");
      if (p.tensor->is_pass_by_value)
        return make_error(ErrorCode::InvalidGraph, op_label(n), ": output ",
                          port_label(p.role, p.tensor),
                          " is pass-by-value; only graph inputs can be host scalars");
    }
    for (const Port& p : n.inputs) w.first_use.emplace(p.tensor.get(), std::make_pair(i, p.role));
  }
  for (const Tensor& t : tensors) {
    if (!t->is_pass_by_value) continue;
    if (t->is_virtual)
      return make_error(ErrorCode::InvalidGraph, "pass-by-value tensor '", t->name, "'",
                        use_of(nodes, w, t), " must be non-virtual");
    if (t->dim.empty()) t->dim = {1};
    if (t->volume() != 1)
      return make_error(ErrorCode::InvalidGraph, "pass-by-value tensor '", t->name, "'",
                        use_of(nodes, w, t), " must hold one element but has dims ",
                        dims_str(t->dim));
    if (t->data_type == DataType::NotSet && t->value) t->data_type = t->value->type;
  }
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const Port& p : nodes[i].inputs)
      if (p.tensor->is_virtual && !w.producer.count(p.tensor.get()))
        return make_error(ErrorCode::InvalidGraph, op_label(nodes[i]), ": input ",
                          port_label(p.role, p.tensor),
                          " is virtual but no op produces it (a graph input must be non-virtual)");
  for (const Tensor& t : tensors) {
    if (w.producer.count(t.get()) || w.first_use.count(t.get())) continue;
    if (t->is_virtual)
      return make_error(ErrorCode::InvalidGraph, "virtual tensor '", t->name,
                        "' is not produced by any op (and no op reads it)");
    if (t->is_output)
      return make_error(ErrorCode::InvalidGraph, "output never produced: tensor '", t->name,
                        "' is marked as an output but no op produces it");
    for (const Node& n : nodes)
      if (subgraphs_read(n, t))
        return make_error(ErrorCode::InvalidGraph, op_label(n),
                          ": its score modifiers read more "
                          "than ",
                          kScoreModMaxInputs, " graph tensors (the SCORE_MOD_IN_* ports); '",
                          t->name, "' is one too many: combine constants into fewer tensors");
    // A non-virtual tensor nobody reads or writes would still be demanded at execute time.
    return make_error(ErrorCode::InvalidGraph, "tensor '", t->name,
                      "' is neither produced nor read by any op; remove it or wire it");
  }
  return Status::ok();
}

// Kahn's algorithm, always taking the lowest insertion index that is ready, so that
// independent nodes keep the order the user added them in.
Status topo_sort(std::vector<Node>& nodes, const Wiring& w) {
  const size_t count = nodes.size();
  std::vector<std::vector<size_t>> consumers(count);
  std::vector<size_t> indeg(count, 0);
  for (size_t i = 0; i < count; ++i) {
    std::unordered_set<size_t> deps;
    for (const Port& p : nodes[i].inputs)
      if (auto it = w.producer.find(p.tensor.get()); it != w.producer.end())
        deps.insert(it->second);
    indeg[i] = deps.size();
    for (size_t d : deps) consumers[d].push_back(i);
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < count; ++i)
    if (indeg[i] == 0) ready.push(i);
  std::vector<size_t> order;
  while (!ready.empty()) {
    size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (size_t c : consumers[i])
      if (--indeg[c] == 0) ready.push(c);
  }
  if (order.size() != count) {
    // Every node left has an unprocessed producer: walk producers until one repeats.
    std::vector<size_t> path;
    std::vector<std::string> via;  // via[k]: tensor from path[k+1] to path[k]
    std::unordered_map<size_t, size_t> pos;
    size_t cur = 0;
    while (indeg[cur] == 0) ++cur;
    while (!pos.count(cur)) {
      pos[cur] = path.size();
      path.push_back(cur);
      for (const Port& p : nodes[cur].inputs) {
        auto it = w.producer.find(p.tensor.get());
        if (it != w.producer.end() && indeg[it->second] != 0) {
          via.push_back(p.tensor->name);
          cur = it->second;
          break;
        }
      }
    }
    // path[pos[cur]] .. path.back() is the cycle walked against the data flow; via[k] leads
    // from path[k+1] (path.back()'s producer is cur) to path[k]. Print it along the flow.
    std::string msg = op_label(nodes[cur]);
    for (size_t k = path.size(); k-- > pos[cur];)
      msg += detail::cat(" --'", via[k], "'--> ", op_label(nodes[path[k]]));
    return make_error(ErrorCode::InvalidGraph, "the graph has a cycle: ", msg);
  }
  std::vector<Node> sorted;
  sorted.reserve(count);
  for (size_t i : order) sorted.push_back(std::move(nodes[i]));
  nodes = std::move(sorted);
  return Status::ok();
}

// Dims >= 1, strides matching the rank and >= 1, a data type.
Status check_layout(const Tensor& t, const std::string& where) {
  if (t->dim.empty())
    return make_error(ErrorCode::InvalidGraph, "tensor '", t->name, "'", where,
                      " has no dims; set them");
  for (size_t d = 0; d < t->dim.size(); ++d)
    if (t->dim[d] < 1)
      return make_error(ErrorCode::InvalidGraph, "tensor '", t->name, "'", where, " has dims ",
                        dims_str(t->dim), ": dim ", d, " is ", t->dim[d], " but must be >= 1");
  if (t->stride.size() != t->dim.size())
    return make_error(ErrorCode::InvalidGraph, "tensor '", t->name, "'", where, " has ",
                      t->stride.size(), " strides ", dims_str(t->stride), " for ", t->dim.size(),
                      " dims ", dims_str(t->dim));
  for (size_t d = 0; d < t->stride.size(); ++d)
    if (t->stride[d] < 1)
      return make_error(ErrorCode::InvalidGraph, "tensor '", t->name, "'", where, " has strides ",
                        dims_str(t->stride), ": stride ", d, " is ", t->stride[d],
                        " but must be >= 1");
  if (t->data_type == DataType::NotSet)
    return make_error(ErrorCode::InvalidGraph, "tensor '", t->name, "'", where,
                      " has no data type; set it or the graph's io data type");
  // Every engine computes element counts and byte extents in int64: they must not wrap.
  if (!checked_volume(t->dim))
    return make_error(ErrorCode::InvalidGraph, "tensor '", t->name, "'", where, " has dims ",
                      dims_str(t->dim), " whose element count overflows int64 (more than ",
                      std::numeric_limits<int64_t>::max(), "); use smaller dims");
  if (!t->storage_bytes())
    return make_error(ErrorCode::InvalidGraph, "tensor '", t->name, "'", where, " has dims ",
                      dims_str(t->dim), " and strides ", dims_str(t->stride), ": its extent of ",
                      data_type_name(t->data_type), " elements overflows int64 bytes (more than ",
                      std::numeric_limits<int64_t>::max(), "); use smaller dims or strides");
  if (t->data_type == DataType::FP4_E2M1) {  // (a Boolean scalar is one byte: 0 or 1)
    if (t->is_pass_by_value)
      return make_error(ErrorCode::InvalidGraph, "pass-by-value tensor '", t->name, "'", where,
                        " has data type ", data_type_name(t->data_type),
                        ", whose elements are half a byte: a host scalar must be whole bytes; "
                        "give the scalar as FLOAT (or pass a tensor in memory)");
    if (const std::string p = t->packing_problem(); !p.empty())
      return make_error(ErrorCode::InvalidGraph, "tensor '", t->name, "'", where, " ", p);
  }
  return Status::ok();
}

// An op writes every element of its outputs: no two elements may share one address. Checked
// with the dims of extent > 1 sorted by stride: each stride must step past the whole span of
// the smaller ones (every layout cuDNN and the frontend produce meets this; gaps are allowed, as
// in a slice written in place).
// A ragged (THD) output is placed per sequence by its offsets, not by the batch stride (in the
// packed layout the batch stride equals the token stride): the rule holds within one sequence
// (dim 0 left out), and execute checks that the sequences its offsets place stay apart.
Status check_output_layout(const Tensor& t, const std::string& where, bool ragged) {
  ragged = ragged && t->dim.size() == 4;
  std::vector<std::pair<int64_t, int64_t>> by_stride;  // (stride, dim)
  for (size_t d = ragged ? 1 : 0; d < t->dim.size(); ++d)
    if (t->dim[d] > 1) by_stride.emplace_back(t->stride[d], t->dim[d]);
  std::sort(by_stride.begin(), by_stride.end());
  int64_t span = 1;  // elements covered by the dims sorted so far (fits: storage was checked)
  std::vector<int64_t> example = packed_strides(t->dim);
  if (ragged) {  // packed THD: the batch stride is the token stride h*d
    example = packed_strides({t->dim[2], t->dim[1], t->dim[3]});
    example = {example[0], example[1], example[0], 1};
  }
  for (const auto& [stride, dim] : by_stride) {
    if (stride < span)
      return make_error(
          ErrorCode::InvalidGraph, "tensor '", t->name, "'", where, " has dims ", dims_str(t->dim),
          " and strides ", dims_str(t->stride), ": elements", ragged ? " of one sequence" : "",
          " would share addresses, but the op writes each of them; give strides "
          "that place every element apart (e.g. ",
          ragged ? "the packed THD strides " : "packed strides ", dims_str(example), ")");
    span = stride * dim;
  }
  return Status::ok();
}

Status assign_uids(const std::vector<Tensor>& tensors) {
  std::unordered_map<int64_t, const Tensor*> seen;
  int64_t max_uid = 0;
  for (const Tensor& t : tensors) {
    if (!t->uid_assigned) continue;
    auto [it, fresh] = seen.emplace(t->uid, &t);
    if (!fresh)
      return make_error(ErrorCode::InvalidGraph, "duplicate uid ", t->uid, ": tensors '",
                        (*it->second)->name, "' and '", t->name, "' both have it");
    max_uid = std::max(max_uid, t->uid);
  }
  // New uids follow the largest given one: they must not wrap past INT64_MAX.
  int64_t unassigned = 0;
  for (const Tensor& t : tensors) unassigned += t->uid_assigned ? 0 : 1;
  if (unassigned > 0 && max_uid > INT64_MAX - unassigned) {
    const Tensor* top = nullptr;
    for (const Tensor& t : tensors)
      if (t->uid_assigned && t->uid == max_uid) top = &t;
    return make_error(ErrorCode::InvalidGraph, "tensor '", (*top)->name, "' has uid ", max_uid,
                      ": the ", unassigned,
                      " tensor(s) without a uid get uids after the largest one, which would "
                      "pass INT64_MAX; give smaller uids (or uids to every tensor)");
  }
  int64_t next = max_uid + 1;
  for (const Tensor& t : tensors)
    if (!t->uid_assigned) t->set_uid(next++);
  return Status::ok();
}

// Ops that write only virtual tensors compute nothing a caller can read after execute.
Status check_has_output(const std::string& graph, const std::vector<Node>& nodes) {
  if (nodes.empty()) return Status::ok();
  for (const Node& n : nodes)
    for (const Port& p : n.outputs)
      if (!p.tensor->is_virtual) return Status::ok();
  const Node& last = nodes.back();
  const std::string example = last.outputs.empty()
                                  ? ""
                                  : detail::cat(" (e.g. '", last.outputs.front().tensor->name,
                                                "', output of ", op_label(last), ")");
  return make_error(ErrorCode::InvalidGraph, "graph '", graph,
                    "' has no outputs: every tensor its ops produce is virtual, so execute "
                    "could write nothing you can read; mark each result you want",
                    example,
                    " with set_output(true) (Python: set_output(True)) before validate() "
                    "or build()");
}

Status validate_graph(const std::string& name, std::vector<Tensor>& tensors,
                      std::vector<Node>& nodes, const InferContext& ctx) {
  Wiring w;
  DNNGRAPH_TRY(check_wiring(tensors, nodes, w));
  DNNGRAPH_TRY(check_has_output(name, nodes));
  DNNGRAPH_TRY(topo_sort(nodes, w));

  // Graph inputs: what the user wrote, completed with packed row-major strides and the io
  // data type.
  for (const Tensor& t : tensors) {
    if (w.producer.count(t.get())) continue;
    if (t->stride.empty()) t->stride = packed_strides(t->dim);
    if (t->data_type == DataType::NotSet) t->data_type = ctx.io;
    DNNGRAPH_TRY(check_layout(t, use_of(nodes, w, t)));
  }

  for (Node& n : nodes) {
    if (n.compute_data_type == DataType::NotSet) n.compute_data_type = ctx.compute;
    DNNGRAPH_TRY(infer_node(n, ctx));
    for (const Port& p : n.outputs) {
      const std::string where = detail::cat(" (output ", p.role, " of ", op_label(n), ")");
      DNNGRAPH_TRY(check_layout(p.tensor, where));
      const std::optional<Role> offsets = sdpa_ragged_role(n.kind(), p.role);
      DNNGRAPH_TRY(check_output_layout(p.tensor, where, offsets && n.input(*offsets)));
    }
  }
  return assign_uids(tensors);
}

// Binds each tensor's ragged_offset (the frontend's tensor attribute) to the reading SDPA
// node's <ROLE>_RAGGED_OFFSET port; a ragged tensor anywhere else is an error.
Status bind_ragged_offsets(std::vector<Node>& nodes) {
  for (Node& n : nodes) {
    std::vector<Port> added;
    for (const auto* ports : {&n.inputs, &n.outputs})
      for (const Port& p : *ports) {
        if (!p.tensor) continue;
        const TensorAttrs& t = *p.tensor;
        if (!t.ragged_offset && t.ragged_offset_multiplier == 1) continue;
        std::optional<Role> rr = sdpa_ragged_role(n.kind(), p.role);
        if (!rr)
          return make_error(
              ErrorCode::InvalidGraph, op_label(n), ": ", port_label(p.role, p.tensor),
              " has a ragged offset", t.ragged_offset ? "" : " multiplier", " but ", op_label(n),
              " reads it as a dense tensor; only Q, K, V, O and Stats of sdpa (and dO, dQ, dK, "
              "dV of sdpa_backward) can be ragged: remove the ragged offset");
        if (t.ragged_offset) added.push_back({*rr, t.ragged_offset});
      }
    for (Port& a : added) {
      auto it = std::find_if(n.inputs.begin(), n.inputs.end(),
                             [&](const Port& p) { return p.role == a.role; });
      if (it != n.inputs.end())
        it->tensor = a.tensor;
      else
        n.inputs.push_back(std::move(a));
    }
  }
  return Status::ok();
}

}  // namespace

Status Graph::validate() {
  if (sm_count_ < 1 && sm_count_ != kAllSms) {
    validated_ = false;
    return make_error(ErrorCode::InvalidGraph, "graph '", name_, "': sm_count ", sm_count_,
                      " is not a number of SMs: expected at least 1 (the most SMs its GPU plans "
                      "may use) or -1 (unset: every SM); call set_sm_count(n) with n >= 1, or "
                      "leave it unset");
  }
  std::vector<Node> unbound_nodes = nodes_;
  if (Status s = bind_ragged_offsets(nodes_); !s.is_ok()) {
    nodes_ = std::move(unbound_nodes);
    validated_ = false;
    return s;
  }
  // Tensors bound through mutable_nodes() may be missing from tensors_.
  std::unordered_set<TensorKey> known;
  for (const Tensor& t : tensors_) known.insert(t.get());
  for (const Node& n : nodes_)
    for (const auto* ports : {&n.inputs, &n.outputs})
      for (const Port& p : *ports)
        if (p.tensor && known.insert(p.tensor.get()).second) tensors_.push_back(p.tensor);
  set_aside_unused();

  std::vector<TensorAttrs> saved;
  saved.reserve(tensors_.size());
  for (const Tensor& t : tensors_) saved.push_back(*t);
  std::vector<Node> saved_nodes = std::move(unbound_nodes);

  InferContext ctx{io_, intermediate_, compute_ == DataType::NotSet ? DataType::Float : compute_};
  if (ctx.intermediate == DataType::NotSet) ctx.intermediate = DataType::Float;
  Status s = validate_graph(name_, tensors_, nodes_, ctx);
  if (!s.is_ok()) {
    for (size_t i = 0; i < tensors_.size(); ++i) *tensors_[i] = saved[i];
    nodes_ = std::move(saved_nodes);
    validated_ = false;
    return s;
  }
  validated_ = true;
  snapshot_ = take_snapshot();
  return s;
}

void Graph::set_aside_unused() {
  // Tensors set aside earlier that an op now uses are back in tensors_ (the loop above).
  std::unordered_set<TensorKey> wired;
  for (const Node& n : nodes_)
    for (const auto* ports : {&n.inputs, &n.outputs})
      for (const Port& p : *ports)
        if (p.tensor) wired.insert(p.tensor.get());
  auto unused = [&](const Tensor& t) {
    return !t->is_virtual && !t->is_output && !wired.count(t.get());
  };
  if (!allow_unused_) {  // set aside while it was allowed: the graph has them again
    for (const Tensor& t : unused_)
      if (std::find(tensors_.begin(), tensors_.end(), t) == tensors_.end()) tensors_.push_back(t);
    unused_.clear();
    return;
  }
  // Set aside earlier and wired since: the loop in validate() put them back in tensors_.
  unused_.erase(
      std::remove_if(unused_.begin(), unused_.end(), [&](const Tensor& t) { return !unused(t); }),
      unused_.end());
  for (const Tensor& t : tensors_)
    if (unused(t)) unused_.push_back(t);
  tensors_.erase(std::remove_if(tensors_.begin(), tensors_.end(), unused), tensors_.end());
}

bool Graph::is_unused_tensor(const TensorAttrs* t) const {
  for (const Tensor& u : unused_)
    if (u.get() == t) return true;
  return false;
}

bool Graph::is_unused_uid(int64_t uid) const {
  for (const Tensor& u : unused_)
    if (u->uid_assigned && u->uid == uid) return true;
  return false;
}

ValidatedGraphPtr Graph::take_snapshot() const {
  std::shared_ptr<ValidatedGraph> v(new ValidatedGraph());
  v->name_ = name_;
  v->io_ = io_;
  v->intermediate_ = intermediate_;
  v->compute_ = compute_;
  v->dynamic_shape_ = dynamic_shape_;
  v->sm_count_ = sm_count_;
  std::unordered_map<TensorKey, Tensor> copy;
  for (const Tensor& t : tensors_) {
    auto c = std::make_shared<TensorAttrs>(*t);
    copy.emplace(t.get(), c);
    v->tensors_.push_back(std::move(c));
  }
  // The node's port carries the offsets; the copy keeps a pointer to its own copy of them (never
  // to the graph's), which marks it ragged for its extent (storage_elements).
  for (const Tensor& c : v->tensors_) {
    if (!c->ragged_offset) continue;
    auto it = copy.find(c->ragged_offset.get());
    c->ragged_offset = it == copy.end() ? nullptr : it->second;
  }
  v->nodes_ = nodes_;
  for (Node& n : v->nodes_) {
    for (auto* ports : {&n.inputs, &n.outputs})
      for (Port& p : *ports) p.tensor = copy.at(p.tensor.get());
    copy_subgraph_tensors(n, copy);
  }
  return v;
}

}  // namespace dnngraph::ir
