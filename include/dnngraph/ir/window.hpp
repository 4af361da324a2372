// Ops whose output only selects elements of their one input (slice): their attribute struct
// has a window() giving where the output lies in the input's memory, so that engines may read
// the output as a view of the input instead of computing it.
#pragma once

#include <cstdint>
#include <vector>

namespace dnngraph::ir {

// Y's element [i_0, i_1, ...] is X's element at offset + sum(i_d * stride_d), counted in
// elements of X.
struct StridedWindow {
  int64_t offset = 0;
  std::vector<int64_t> stride;
};

}  // namespace dnngraph::ir
