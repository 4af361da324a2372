// Where the sequences of a ragged (THD) attention tensor lie: which tensors hold its offsets
// and lengths, and how far one sequence reaches. Read at execute, where the offsets and lengths
// are known, to check buffers that hold only the packed tokens.
#include <optional>
#include <utility>
#include <vector>

#include "dnngraph/ir/sdpa.hpp"

namespace dnngraph::ir {

namespace {

// The sequence-length port that counts the rows of the tensor at `role`.
Role rows_role(Role role) {
  switch (role) {
    case Role::K:
    case Role::V:
    case Role::DK:
    case Role::DV:
      return Role::SEQ_LEN_KV;
    default:
      return Role::SEQ_LEN_Q;
  }
}

}  // namespace

std::vector<SdpaRaggedTensor> sdpa_ragged_tensors(const std::vector<Node>& nodes) {
  std::vector<SdpaRaggedTensor> out;
  for (const Node& n : nodes) {
    if (n.kind() != OpKind::SdpaFwd && n.kind() != OpKind::SdpaBwd) continue;
    for (auto [role, offset_role] : kSdpaRaggedRoles) {
      Tensor off = n.input(offset_role);
      if (!off) continue;
      Tensor t = n.input(role);
      if (!t) t = n.output(role);
      if (!t) continue;
      out.push_back({t, off, n.input(rows_role(role))});
    }
  }
  return out;
}

std::optional<int64_t> ragged_sequence_span(const TensorAttrs& t, int64_t rows) {
  if (t.dim.size() != 4 || t.stride.size() != 4 || rows < 1) return std::nullopt;
  int64_t span = 1;
  for (auto [extent, stride] : {std::pair{t.dim[1], t.stride[1]}, std::pair{rows, t.stride[2]},
                                std::pair{t.dim[3], t.stride[3]}}) {
    int64_t step = 0;
    if (extent < 1 || stride < 0 || __builtin_mul_overflow(extent - 1, stride, &step) ||
        __builtin_add_overflow(span, step, &span))
      return std::nullopt;
  }
  return span;
}

}  // namespace dnngraph::ir
