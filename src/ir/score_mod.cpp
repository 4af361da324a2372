// Subgraphs of ops (Node::subgraphs), today SDPA's attention score modifiers: building them
// from a modifier callback, binding the graph tensors they read, the snapshot's private copies
// and the rules validate() applies (see docs/sdpa-score-mod.md).
#include <algorithm>
#include <iterator>
#include <unordered_set>

#include "dnngraph/ir/graph.hpp"
#include "ir/ops/common.hpp"
#include "ir/subgraph.hpp"

namespace dnngraph::ir {

const Subgraph* Node::subgraph(std::string_view name) const {
  for (const Subgraph& s : subgraphs)
    if (s.name == name) return &s;
  return nullptr;
}

Subgraph Graph::build_subgraph(const std::string& node_name, std::string name,
                               const ScoreModifier& fn) {
  Subgraph sg;
  sg.input = std::make_shared<TensorAttrs>();
  sg.input->name = node_name + "::" + name;
  sg.input->is_virtual = true;
  sg.name = std::move(name);
  const size_t first_node = nodes_.size(), first_tensor = tensors_.size();
  const int64_t counter = op_counter_;
  auto restore = [&] {
    nodes_.erase(nodes_.begin() + static_cast<std::ptrdiff_t>(first_node), nodes_.end());
    tensors_.erase(tensors_.begin() + static_cast<std::ptrdiff_t>(first_tensor), tensors_.end());
    op_counter_ = counter;
  };
  try {
    sg.output = fn(*this, sg.input);
  } catch (...) {
    restore();  // a failing callback leaves the graph as it was
    throw;
  }
  sg.nodes.assign(std::make_move_iterator(nodes_.begin() + static_cast<std::ptrdiff_t>(first_node)),
                  std::make_move_iterator(nodes_.end()));
  nodes_.erase(nodes_.begin() + static_cast<std::ptrdiff_t>(first_node), nodes_.end());
  // The ops' results belong to the subgraph; tensors the callback made with tensor() or
  // scalar() stay graph tensors (the node binds them as inputs).
  std::unordered_set<const TensorAttrs*> made;
  for (const Node& n : sg.nodes)
    for (const Port& p : n.outputs) made.insert(p.tensor.get());
  tensors_.erase(
      std::remove_if(tensors_.begin() + static_cast<std::ptrdiff_t>(first_tensor), tensors_.end(),
                     [&](const Tensor& t) { return made.count(t.get()); }),
      tensors_.end());
  validated_ = false;
  return sg;
}

std::vector<Subgraph> Graph::build_score_mods(const std::string& node_name,
                                              const SdpaInputs& extra) {
  std::vector<Subgraph> out;
  if (extra.score_mod) out.push_back(build_subgraph(node_name, "score_mod", extra.score_mod));
  if (extra.score_mod_bprop)
    out.push_back(build_subgraph(node_name, "score_mod_bprop", extra.score_mod_bprop));
  return out;
}

namespace {

// Tensors made inside n's subgraphs: each input and every node output.
std::unordered_set<const TensorAttrs*> internal_tensors(const std::vector<Subgraph>& subgraphs) {
  std::unordered_set<const TensorAttrs*> in;
  for (const Subgraph& s : subgraphs) {
    if (s.input) in.insert(s.input.get());
    for (const Node& m : s.nodes)
      for (const Port& p : m.outputs)
        if (p.tensor) in.insert(p.tensor.get());
  }
  return in;
}

constexpr const Role (&kModRoles)[kScoreModMaxInputs] = kScoreModRoles;

}  // namespace

void attach_subgraphs(Node& n, std::vector<Subgraph> subgraphs) {
  const auto internal = internal_tensors(subgraphs);
  std::vector<Tensor> external;
  for (const Subgraph& s : subgraphs)
    for (const Node& m : s.nodes)
      for (const Port& p : m.inputs)
        if (p.tensor && !internal.count(p.tensor.get()) &&
            std::find(external.begin(), external.end(), p.tensor) == external.end())
          external.push_back(p.tensor);
  for (size_t i = 0; i < external.size() && i < kScoreModMaxInputs; ++i)
    n.inputs.push_back({kModRoles[i], external[i]});
  n.subgraphs = std::move(subgraphs);
}

std::vector<Tensor> subgraph_tensors(const Node& n) {
  std::unordered_set<const TensorAttrs*> own;
  for (const auto* ports : {&n.inputs, &n.outputs})
    for (const Port& p : *ports) own.insert(p.tensor.get());
  std::vector<Tensor> list;
  auto add = [&](const Tensor& t) {
    if (t && own.insert(t.get()).second) list.push_back(t);
  };
  for (const Subgraph& s : n.subgraphs) {
    add(s.input);
    for (const Node& m : s.nodes)
      for (const auto* ports : {&m.inputs, &m.outputs})
        for (const Port& p : *ports) add(p.tensor);
    add(s.output);
  }
  return list;
}

bool subgraphs_read(const Node& n, const Tensor& t) {
  for (const Subgraph& s : n.subgraphs)
    for (const Node& m : s.nodes)
      for (const Port& p : m.inputs)
        if (p.tensor == t) return true;
  return false;
}

void copy_subgraph_tensors(Node& n, std::unordered_map<const TensorAttrs*, Tensor>& copy) {
  auto mapped = [&](Tensor& t) {
    if (!t) return;
    auto it = copy.find(t.get());
    if (it == copy.end()) it = copy.emplace(t.get(), std::make_shared<TensorAttrs>(*t)).first;
    t = it->second;
  };
  for (Subgraph& s : n.subgraphs) {
    mapped(s.input);
    for (Node& m : s.nodes)
      for (auto* ports : {&m.inputs, &m.outputs})
        for (Port& p : *ports) mapped(p.tensor);
    mapped(s.output);
  }
}

Status infer_score_mods(Node& n, const SdpaOptions& a, bool backward,
                        const std::vector<int64_t>& score_dims, const InferContext& ctx) {
  std::vector<Tensor> bound;  // SCORE_MOD_IN_* tensors
  for (const Port& p : n.inputs)
    if (std::find(std::begin(kModRoles), std::end(kModRoles), p.role) != std::end(kModRoles)) {
      if (n.subgraphs.empty())
        return make_error(ErrorCode::InvalidGraph, op_label(n), ": input ",
                          port_label(p.role, p.tensor),
                          " is a score modifier input but the op has no score modifier; remove "
                          "it");
      bound.push_back(p.tensor);
    }
  if (n.subgraphs.empty()) return Status::ok();
  const char* const names = backward ? "score_mod and score_mod_bprop" : "score_mod";
  for (size_t i = 0; i < n.subgraphs.size(); ++i) {
    const Subgraph& s = n.subgraphs[i];
    const bool known = s.name == "score_mod" || (backward && s.name == "score_mod_bprop");
    if (!known)
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": subgraph '", s.name,
                        "' is not one this op takes (", names, ")");
    for (size_t j = 0; j < i; ++j)
      if (n.subgraphs[j].name == s.name)
        return make_error(ErrorCode::InvalidGraph, op_label(n), ": two subgraphs named '", s.name,
                          "'");
  }
  // The cuDNN frontend disables its own mask subgraphs when a modifier is set, and refuses
  // them together; so do we, so that a graph that validates here also builds there. Sequence
  // lengths (the padding mask) combine with a modifier, as the frontend's modifier programs
  // give them (paged decode with seq_len_q / seq_len_kv): keys past a sequence's length are
  // left out after the modifier, as without one.
  const char* clash = a.alibi_mask    ? "use_alibi_mask"
                      : a.causal      ? "the causal mask"
                      : a.right_bound ? "diagonal_band_right_bound"
                      : a.left_bound  ? "diagonal_band_left_bound (sliding window)"
                                      : nullptr;
  if (clash)  // NotSupported, as the frontend raises it (cudnnGraphNotSupportedError)
    return make_error(ErrorCode::NotSupported, op_label(n), ": a score modifier (",
                      n.subgraphs.front().name, ") cannot be combined with ", clash,
                      " (the cuDNN frontend refuses it too: the modifier replaces the built-in "
                      "masks); build the mask inside score_mod (gen_index, cmp_*, "
                      "binary_select) or drop the modifier");

  std::unordered_set<const TensorAttrs*> known;  // readable by the next subgraph node
  for (const Tensor& t : bound) {
    if (t->is_virtual)
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": the score modifier reads '",
                        t->name,
                        "', a virtual tensor of the graph; a modifier may read the score, its own "
                        "results and graph inputs (non-virtual tensors or pass-by-value scalars)");
    known.insert(t.get());
  }
  std::vector<Tensor> used;
  for (Subgraph& s : n.subgraphs) {
    const std::string where = ::dnngraph::detail::cat(op_label(n), ": ", s.name);
    if (!s.input) return make_error(ErrorCode::InvalidGraph, where, ": no input tensor");
    s.input->is_virtual = true;
    s.input->dim = score_dims;
    s.input->stride = packed_strides(score_dims);
    s.input->data_type = DataType::Float;
    known.insert(s.input.get());
    for (Node& m : s.nodes) {
      if (m.kind() != OpKind::Pointwise)
        return make_error(ErrorCode::InvalidGraph, where, ": node ", op_label(m),
                          " is not pointwise; a score modifier may hold pointwise ops only (add, "
                          "mul, div, tanh, gen_index, cmp_*, binary_select, ...)");
      if (!m.subgraphs.empty())
        return make_error(ErrorCode::InvalidGraph, where, ": node ", op_label(m),
                          " has subgraphs of its own");
      for (const Port& p : m.inputs) {
        if (!p.tensor) continue;
        if (known.count(p.tensor.get())) {
          if (std::find(bound.begin(), bound.end(), p.tensor) != bound.end())
            used.push_back(p.tensor);
          continue;
        }
        const bool outside =
            std::find(bound.begin(), bound.end(), p.tensor) == bound.end() && !p.tensor->is_virtual;
        return make_error(
            ErrorCode::InvalidGraph, where, ": node ", op_label(m), " reads ",
            port_label(p.role, p.tensor),
            outside ? std::string(", a graph tensor the node does not bind to a SCORE_MOD_IN_* "
                                  "port (hand-made nodes must bind each one)")
                    : std::string(", which is neither the score, an earlier result of the "
                                  "modifier nor a graph input"));
      }
      if (m.compute_data_type == DataType::NotSet) m.compute_data_type = ctx.compute;
      DNNGRAPH_TRY(infer_node(m, ctx));
      for (const Port& p : m.outputs) {
        if (!p.tensor->is_virtual || p.tensor->is_output)
          return make_error(ErrorCode::InvalidGraph, where, ": output ",
                            port_label(p.role, p.tensor), " of ", op_label(m),
                            " is marked as a graph output; the modifier's results stay inside "
                            "the fused op");
        known.insert(p.tensor.get());
      }
    }
    if (!s.output || !known.count(s.output.get()) ||
        std::find(bound.begin(), bound.end(), s.output) != bound.end())
      return make_error(ErrorCode::InvalidGraph, where,
                        ": the callback must return the score or a tensor its ops made, found ",
                        s.output ? "'" + s.output->name + "'" : std::string("nothing"));
    if (s.output->dim != score_dims || !is_floating(s.output->data_type))
      return make_error(ErrorCode::InvalidGraph, where, ": returns '", s.output->name,
                        "' with dims ", dims_str(s.output->dim), " ",
                        data_type_name(s.output->data_type), "; expected the score's dims ",
                        dims_str(score_dims), " and a floating type");
  }
  for (const Tensor& t : bound)
    if (std::find(used.begin(), used.end(), t) == used.end())
      return make_error(ErrorCode::InvalidGraph, op_label(n), ": score modifier input '", t->name,
                        "' is read by no op of its modifiers; remove it");
  return Status::ok();
}

}  // namespace dnngraph::ir
