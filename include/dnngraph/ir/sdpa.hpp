// Facts about scaled dot-product attention that the IR decides once and every engine (and the
// PyTorch ops) reads: the default score scale and the ragged-offset port of each tensor.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

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

}  // namespace dnngraph::ir
