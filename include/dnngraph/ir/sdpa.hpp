// Facts about scaled dot-product attention that the IR decides once and every engine (and the
// PyTorch ops) reads: the default score scale and the ragged-offset port of each tensor.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "dnngraph/ir/ops.hpp"

namespace dnngraph::ir {

// The scale Q.K^T is multiplied by when no ATTN_SCALE tensor is bound: a.attn_scale when set,
// else 1/sqrt(d) (d: the head dim of Q and K).
double sdpa_scale_of(const SdpaOptions& a, int64_t d);

// Each SDPA tensor that may be ragged (THD) and the port carrying its offsets:
// {tensor role, <ROLE>_RAGGED_OFFSET}.
inline constexpr std::pair<Role, Role> kSdpaRaggedRoles[] = {
    {Role::Q, Role::Q_RAGGED_OFFSET},         {Role::K, Role::K_RAGGED_OFFSET},
    {Role::V, Role::V_RAGGED_OFFSET},         {Role::O, Role::O_RAGGED_OFFSET},
    {Role::STATS, Role::STATS_RAGGED_OFFSET}, {Role::DO, Role::DO_RAGGED_OFFSET},
    {Role::DQ, Role::DQ_RAGGED_OFFSET},       {Role::DK, Role::DK_RAGGED_OFFSET},
    {Role::DV, Role::DV_RAGGED_OFFSET}};

// The port carrying the ragged offsets of the tensor at `role` of a node of `kind`, when the
// op table gives that kind such a port (sdpa: Q, K, V, O, STATS; sdpa_backward: also DO, DQ,
// DK, DV); nullopt otherwise.
std::optional<Role> sdpa_ragged_role(OpKind kind, Role role);

// A ragged (THD) tensor of an sdpa / sdpa_backward node with the tensors that place its
// sequences: `offsets` (its <ROLE>_RAGGED_OFFSET) and `rows` (its sequence lengths: SEQ_LEN_Q
// for Q, O, STATS, DO, DQ; SEQ_LEN_KV for K, V, DK, DV).
struct SdpaRaggedTensor {
  Tensor tensor, offsets, rows;
};
// Every ragged tensor of the (validated) nodes, once per node that binds it.
std::vector<SdpaRaggedTensor> sdpa_ragged_tensors(const std::vector<Node>& nodes);

// The elements of ragged rank-4 tensor `t` ([b, h, s, d]) that one sequence of `rows` rows
// (1..s) spans from its first element: 1 + (h-1)*stride[1] + (rows-1)*stride[2] +
// (d-1)*stride[3]; nullopt when that leaves int64.
std::optional<int64_t> ragged_sequence_span(const TensorAttrs& t, int64_t rows);

}  // namespace dnngraph::ir
