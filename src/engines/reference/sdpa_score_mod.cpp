// SDPA score modifiers on the reference engine: the pointwise nodes of the node's "score_mod"
// and "score_mod_bprop" subgraphs, evaluated per score element in fp64, each result rounded to
// its node's compute type and then to its tensor's data type as a stored intermediate would be.
// GEN_INDEX gives the element's index along the axis of the [b, h_q, s_q, s_kv] score.
#include <unordered_map>

#include "engines/reference/kernel.hpp"

namespace dnngraph::reference {

Result<ScoreModEval> ScoreModEval::make(const KernelContext& ctx) {
  ScoreModEval e;
  const ir::Node& n = ctx.node();
  if (n.subgraphs.empty()) return e;
  std::unordered_map<const ir::TensorAttrs*, int> input_of;  // graph inputs
  for (const Role role : ir::kScoreModRoles) {
    if (!ctx.has_input(role)) continue;
    Dense d = ctx.load(role);
    std::vector<int64_t> step(4, 0);
    if (d.size() != 1) {
      step = row_major_strides(d.dim);  // validated: rank 4, broadcastable to the score
      for (size_t k = 0; k < 4; ++k)
        if (d.dim[k] == 1) step[k] = 0;
    }
    input_of.emplace(n.input(role).get(), static_cast<int>(e.inputs_.size()));
    e.inputs_.push_back(std::move(d));
    e.in_steps_.push_back(std::move(step));
  }
  std::unordered_map<const ir::TensorAttrs*, int> slot_of;
  auto slot = [&](const ir::Tensor& t) {
    auto [it, fresh] = slot_of.emplace(t.get(), e.slot_count_);
    if (fresh) ++e.slot_count_;
    return it->second;
  };
  for (const ir::Subgraph& sg : n.subgraphs) {
    const bool bprop = sg.name == "score_mod_bprop";
    std::vector<Step>& steps = bprop ? e.bwd_ : e.fwd_;
    (bprop ? e.bwd_in_ : e.fwd_in_) = slot(sg.input);
    for (const ir::Node& m : sg.nodes) {
      Step st;
      st.attrs = m.as<ir::PointwiseAttrs>();
      st.compute = m.compute_data_type;
      static constexpr Role kIn[] = {Role::IN_0, Role::IN_1, Role::IN_2};
      for (int k = 0; k < 3; ++k) {
        const ir::Tensor t = m.input(kIn[k]);
        if (!t) continue;
        if (auto it = input_of.find(t.get()); it != input_of.end())
          st.in[k] = {1, it->second};
        else
          st.in[k] = {0, slot(t)};
      }
      const ir::Tensor out = m.output(Role::OUT_0);
      st.out = slot(out);
      st.out_type = out->data_type;
      steps.push_back(st);
    }
    (bprop ? e.bwd_out_ : e.fwd_out_) = slot(sg.output);
  }
  return e;
}

double ScoreModEval::read(const Operand& o, const int64_t idx[4],
                          const std::vector<double>& slots) const {
  if (o.kind == 0) return slots[static_cast<size_t>(o.index)];
  if (o.kind == 2) return 0.0;
  const Dense& d = inputs_[static_cast<size_t>(o.index)];
  const std::vector<int64_t>& st = in_steps_[static_cast<size_t>(o.index)];
  return d[idx[0] * st[0] + idx[1] * st[1] + idx[2] * st[2] + idx[3] * st[3]];
}

void ScoreModEval::run(const std::vector<Step>& steps, int64_t b, int64_t h, int64_t i, int64_t j,
                       std::vector<double>& slots) const {
  const int64_t idx[4] = {b, h, i, j};
  for (const Step& st : steps) {
    double v = 0.0;
    if (st.attrs.mode == PointwiseMode::GenIndex)
      v = static_cast<double>(idx[*st.attrs.axis]);
    else
      v = pointwise_value(st.attrs, read(st.in[0], idx, slots), read(st.in[1], idx, slots),
                          read(st.in[2], idx, slots));
    slots[static_cast<size_t>(st.out)] = round_to(st.out_type, round_to(st.compute, v));
  }
}

double ScoreModEval::forward(int64_t b, int64_t h, int64_t i, int64_t j, double s) const {
  if (fwd_in_ < 0) return s;
  thread_local std::vector<double> slots;
  slots.assign(static_cast<size_t>(slot_count_), 0.0);
  slots[static_cast<size_t>(fwd_in_)] = s;
  run(fwd_, b, h, i, j, slots);
  return slots[static_cast<size_t>(fwd_out_)];
}

double ScoreModEval::backward(int64_t b, int64_t h, int64_t i, int64_t j, double s,
                              double ds) const {
  if (bwd_in_ < 0) return ds;
  thread_local std::vector<double> slots;
  slots.assign(static_cast<size_t>(slot_count_), 0.0);
  if (fwd_in_ >= 0) {
    slots[static_cast<size_t>(fwd_in_)] = s;
    run(fwd_, b, h, i, j, slots);
  }
  slots[static_cast<size_t>(bwd_in_)] = ds;
  run(bwd_, b, h, i, j, slots);
  return slots[static_cast<size_t>(bwd_out_)];
}

}  // namespace dnngraph::reference
