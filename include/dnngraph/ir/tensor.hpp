// Tensor attributes of the graph IR. No CUDA here.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dnngraph/types.hpp"

namespace dnngraph::ir {

// A host scalar carried by a pass-by-value tensor (e.g. alpha, epsilon, attn_scale).
struct Scalar {
  DataType type = DataType::Float;
  double f = 0.0;  // used when type is floating or Boolean
  int64_t i = 0;   // used when type is integral
  static Scalar of_float(double v, DataType t = DataType::Float) { return {t, v, 0}; }
  static Scalar of_int(int64_t v, DataType t = DataType::Int64) { return {t, 0.0, v}; }
  double as_double() const { return is_integral(type) ? static_cast<double>(i) : f; }
  bool operator==(const Scalar&) const = default;
};

// Chainable attributes of one tensor. Shared by pointer so that a tensor returned by an
// op can be configured after the op was added (set_output, set_dim, ...).
class TensorAttrs {
 public:
  TensorAttrs& set_name(std::string v) {
    name = std::move(v);
    return *this;
  }
  TensorAttrs& set_dim(std::vector<int64_t> v) {
    dim = std::move(v);
    return *this;
  }
  TensorAttrs& set_stride(std::vector<int64_t> v) {
    stride = std::move(v);
    return *this;
  }
  TensorAttrs& set_data_type(DataType v) {
    data_type = v;
    return *this;
  }
  TensorAttrs& set_uid(int64_t v) {
    uid = v;
    uid_assigned = true;
    return *this;
  }
  TensorAttrs& clear_uid() {
    uid = 0;
    uid_assigned = false;
    return *this;
  }
  TensorAttrs& set_is_virtual(bool v) {
    is_virtual = v;
    return *this;
  }
  // An output is a non-virtual tensor the user reads back.
  TensorAttrs& set_output(bool v) {
    is_output = v;
    is_virtual = !v;
    return *this;
  }
  TensorAttrs& set_is_pass_by_value(bool v) {
    is_pass_by_value = v;
    return *this;
  }
  // The cuDNN frontend's ragged (THD) layout: `v` [b+1,1,1,1] holds where each batch item
  // starts, in elements x ragged_offset_multiplier (read by sdpa / sdpa_backward only).
  TensorAttrs& set_ragged_offset(std::shared_ptr<TensorAttrs> v) {
    ragged_offset = std::move(v);
    return *this;
  }
  TensorAttrs& set_ragged_offset_multiplier(int64_t v) {
    ragged_offset_multiplier = v;
    return *this;
  }
  TensorAttrs& set_value(Scalar v) {
    value = v;
    is_pass_by_value = true;
    if (data_type == DataType::NotSet) data_type = v.type;
    if (dim.empty()) {
      dim = {1};
      stride = {1};
    }
    return *this;
  }

  // Product of dims (1 for rank 0); INT64_MAX when it does not fit in int64 or a dim is
  // negative (validate() rejects such a tensor, naming it).
  int64_t volume() const;
  // 1 + sum((dim-1)*stride): span in elements; INT64_MAX when it does not fit in int64 or a
  // dim or stride is negative. A ragged rank-4 tensor (ragged_offset set) spans at least b
  // times one sequence's span: its offsets, not the batch stride, place the sequences.
  int64_t storage_elements() const;
  // The bytes storage_elements() elements of the data type occupy (FP4_E2M1: two elements per
  // byte, rounded up), or nullopt when that leaves int64.
  std::optional<int64_t> storage_bytes() const;
  // For a sub-byte data type (FP4_E2M1), the axis along which elements pack in pairs: the
  // unit-stride axis (of those with stride 1, the one of largest extent, the last on a tie);
  // nullopt when no axis has stride 1.
  std::optional<size_t> packed_axis() const;
  // Empty when the layout suits the data type; otherwise what is wrong, for a message that
  // starts with the tensor's name: a sub-byte tensor needs a unit-stride axis of even extent
  // and even strides elsewhere, so that each byte holds two elements of one row (element 2k
  // of the row in the low nibble of its byte k), as torch's float4_e2m1fn_x2 and cuDNN lay
  // FP4 out.
  std::string packing_problem() const;
  bool is_packed() const;        // strides describe a dense, non-overlapping layout
  std::string describe() const;  // "'X' [32,128,56,56]:[401408,1,7168,128] BFLOAT16"

  std::string name;
  std::vector<int64_t> dim;
  std::vector<int64_t> stride;
  DataType data_type = DataType::NotSet;
  // validate() gave this virtual tensor the intermediate data type because none was set. Where a
  // partition's cut makes it an input or an output, it is stored in the io data type instead
  // (runtime/partition.cpp), as an output marked without a type would be.
  bool data_type_inferred = false;
  int64_t uid = 0;
  bool uid_assigned = false;
  bool is_virtual = false;
  bool is_output = false;
  bool is_pass_by_value = false;
  std::optional<Scalar> value;  // constant host value of a pass-by-value tensor
  // Ragged offsets (set_ragged_offset). validate() binds ragged_offset to the reading op's
  // <ROLE>_RAGGED_OFFSET port (the graph keeps that port; a copied graph's tensors do not
  // carry the pointer).
  std::shared_ptr<TensorAttrs> ragged_offset;
  int64_t ragged_offset_multiplier = 1;
};

using Tensor = std::shared_ptr<TensorAttrs>;

// Checked extent arithmetic: nullopt when a product or sum leaves int64 or a value is negative.
std::optional<int64_t> checked_volume(const std::vector<int64_t>& dim);
std::optional<int64_t> checked_span(const std::vector<int64_t>& dim,
                                    const std::vector<int64_t>& stride);

// Packed strides for `dim` whose dims are ordered from slowest to fastest by `order`
// (order[0] = outermost dim index). Empty order means row-major.
std::vector<int64_t> packed_strides(const std::vector<int64_t>& dim,
                                    const std::vector<int64_t>& order = {});
// The dim order of `stride` from outermost to innermost (ties keep the lower index outer).
std::vector<int64_t> stride_order(const std::vector<int64_t>& stride);

}  // namespace dnngraph::ir
