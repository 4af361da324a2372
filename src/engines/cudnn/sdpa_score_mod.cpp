// SDPA score modifiers in the cuDNN lowering: the pointwise nodes of the node's "score_mod"
// subgraph go right after the attention scale (before the bias and the masks) and those of
// "score_mod_bprop" right after dS (after the dBias reduction, before the attention scale), the
// places the cuDNN frontend calls its callbacks at. Their results are virtual tensors of their
// inferred dims and types; graph tensors they read (SCORE_MOD_IN_*) keep their descriptors.
#include "engines/cudnn/sdpa_common.hpp"

namespace dnngraph::cudnn {

Result<cudnnBackendDescriptor_t> sdpa_score_mod(LowerContext& cx, const ir::Node& n,
                                                const std::string& what, std::string_view name,
                                                cudnnBackendDescriptor_t input) {
  const ir::Subgraph* sg = n.subgraph(name);
  if (!sg) return input;
  auto& descs = cx.subgraph_descs;
  descs[sg->input.get()] = input;
  static constexpr Role kIn[] = {Role::IN_0, Role::IN_1, Role::IN_2};
  for (const ir::Node& m : sg->nodes) {
    cudnnBackendDescriptor_t in[3] = {nullptr, nullptr, nullptr};
    for (int i = 0; i < 3; ++i) {
      const ir::Tensor t = m.input(kIn[i]);
      if (!t) continue;
      if (auto it = descs.find(t.get()); it != descs.end()) {
        in[i] = it->second;
      } else {
        DNNGRAPH_ASSIGN_OR_RETURN(in[i], cx.tensor(t));
      }
    }
    const ir::Tensor out = m.output(Role::OUT_0);
    const std::string tag = detail::cat(name, "::", m.name);
    DNNGRAPH_ASSIGN_OR_RETURN(auto y,
                              cx.virtual_tensor(what + "::" + tag, out->dim, out->data_type));
    descs[out.get()] = y;
    DNNGRAPH_TRY(add_pointwise_node(cx, what + " " + tag, m, in[0], in[1], in[2], y));
  }
  return descs.at(sg->output.get());
}

}  // namespace dnngraph::cudnn
