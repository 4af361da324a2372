// The port roles of the op table (ops.hpp): every role any op knows, one enum.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string_view>

namespace dnngraph::ir {

// Every port role any op knows, spelled as the cuDNN frontend spells them. Which roles an op
// family accepts is declared in its op table entry; strings exist only at the user boundary
// (JSON, Python keywords, messages, dot): role_name / role_from_name convert.
#define DNNGRAPH_ROLES(R) \
  R(X)                    \
  R(W)                    \
  R(Y)                    \
  R(DY)                   \
  R(DX)                   \
  R(DW)                   \
  R(A)                    \
  R(B)                    \
  R(C)                    \
  R(IN_0)                 \
  R(IN_1)                 \
  R(IN_2)                 \
  R(OUT_0)                \
  R(SCALE)                \
  R(BIAS)                 \
  R(EPSILON)              \
  R(MOMENTUM)             \
  R(PREV_RUNNING_MEAN)    \
  R(PREV_RUNNING_VAR)     \
  R(MEAN)                 \
  R(INV_VARIANCE)         \
  R(NEXT_RUNNING_MEAN)    \
  R(NEXT_RUNNING_VAR)     \
  R(DSCALE)               \
  R(DBIAS)                \
  R(STATS)                \
  R(Q)                    \
  R(K)                    \
  R(V)                    \
  R(O)                    \
  R(DO)                   \
  R(DQ)                   \
  R(DK)                   \
  R(DV)                   \
  R(ATTN_SCALE)           \
  R(SEQ_LEN_Q)            \
  R(SEQ_LEN_KV)           \
  R(SEED)                 \
  R(OFFSET)               \
  R(DROPOUT_MASK)         \
  R(DROPOUT_SCALE)        \
  R(RNG_DUMP)             \
  R(SINK_TOKEN)           \
  R(DSINK_TOKEN)          \
  R(SUM)                  \
  R(SQ_SUM)               \
  R(IN_3)                 \
  R(IN_4)                 \
  R(IN_5)                 \
  R(IN_6)                 \
  R(IN_7)                 \
  R(DESCALE_Q)            \
  R(DESCALE_K)            \
  R(DESCALE_V)            \
  R(DESCALE_S)            \
  R(DESCALE_O)            \
  R(DESCALE_DO)           \
  R(DESCALE_DP)           \
  R(SCALE_S)              \
  R(SCALE_O)              \
  R(SCALE_DQ)             \
  R(SCALE_DK)             \
  R(SCALE_DV)             \
  R(SCALE_DP)             \
  R(AMAX_S)               \
  R(AMAX_O)               \
  R(AMAX_DQ)              \
  R(AMAX_DK)              \
  R(AMAX_DV)              \
  R(AMAX_DP)              \
  R(Q_RAGGED_OFFSET)      \
  R(K_RAGGED_OFFSET)      \
  R(V_RAGGED_OFFSET)      \
  R(O_RAGGED_OFFSET)      \
  R(STATS_RAGGED_OFFSET)  \
  R(DO_RAGGED_OFFSET)     \
  R(DQ_RAGGED_OFFSET)     \
  R(DK_RAGGED_OFFSET)     \
  R(DV_RAGGED_OFFSET)     \
  R(PAGE_TABLE_K)         \
  R(PAGE_TABLE_V)         \
  R(SCORE_MOD_IN_0)       \
  R(SCORE_MOD_IN_1)       \
  R(SCORE_MOD_IN_2)       \
  R(SCORE_MOD_IN_3)       \
  R(SCORE_MOD_IN_4)       \
  R(SCORE_MOD_IN_5)       \
  R(SCORE_MOD_IN_6)       \
  R(SCORE_MOD_IN_7)       \
  R(TOKEN)                \
  R(WEIGHT)               \
  R(FIRST_TOKEN_OFFSET)   \
  R(OUTPUT)               \
  R(SCORE_MAX)            \
  R(SCORE_SUM_EXP)

enum class Role : uint8_t {
#define DNNGRAPH_ROLE_ENUM(r) r,
  DNNGRAPH_ROLES(DNNGRAPH_ROLE_ENUM)
#undef DNNGRAPH_ROLE_ENUM
};
std::string_view role_name(Role r);  // "INV_VARIANCE"
std::optional<Role> role_from_name(std::string_view name);
std::ostream& operator<<(std::ostream& os, Role r);  // writes role_name(r), for messages

}  // namespace dnngraph::ir
