// Element storage of every DataType: how one element is read from and written to memory
// (round to nearest even; fp8 e4m3 overflows to NaN, e5m2/half/bf16 to inf; integers round to
// nearest even and saturate; Boolean is x != 0, one bit per element; fp4 e2m1 saturates to +-6 and
// stores NaN as +0). The reference engine reads and writes every tensor through these; hosts use
// them to fill or read buffers of any type.
#pragma once

#include <cstdint>

#include "dnngraph/types.hpp"

namespace dnngraph {

// The element at `offset` (in elements) of `base`, as a double. Sub-byte types count elements
// too: FP4_E2M1 element i is the low (i even) or high (i odd) nibble of byte i / 2; Boolean
// element i is bit i % 8 (least significant first) of byte i / 8.
double load_element(const void* base, DataType t, int64_t offset);
// Writes v, rounded to t, as the element at `offset` of `base`. For FP4_E2M1 (Boolean) this
// reads and rewrites byte offset / 2 (offset / 8), keeping the other elements: callers must not
// write two elements of one byte from two threads at once.
void store_element(void* base, DataType t, int64_t offset, double v);
// The value v takes once stored as t (e.g. round_to(DataType::BFloat16, x)).
double round_to(DataType t, double v);

}  // namespace dnngraph
