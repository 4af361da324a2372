#include "dnngraph/ir/tensor.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <sstream>

namespace dnngraph::ir {

std::optional<int64_t> checked_volume(const std::vector<int64_t>& dim) {
  int64_t v = 1;
  for (int64_t d : dim)
    if (d < 0 || __builtin_mul_overflow(v, d, &v)) return std::nullopt;
  return v;
}

std::optional<int64_t> checked_span(const std::vector<int64_t>& dim,
                                    const std::vector<int64_t>& stride) {
  int64_t span = 1;
  for (size_t i = 0; i < dim.size(); ++i) {
    if (dim[i] == 0) return 0;
    const int64_t s = i < stride.size() ? stride[i] : 0;
    int64_t step = 0;
    if (dim[i] < 0 || s < 0 || __builtin_mul_overflow(dim[i] - 1, s, &step) ||
        __builtin_add_overflow(span, step, &span))
      return std::nullopt;
  }
  return span;
}

int64_t TensorAttrs::volume() const {
  return checked_volume(dim).value_or(std::numeric_limits<int64_t>::max());
}

int64_t TensorAttrs::storage_elements() const {
  return checked_span(dim, stride).value_or(std::numeric_limits<int64_t>::max());
}

std::optional<int64_t> TensorAttrs::storage_bytes() const {
  const std::optional<int64_t> span = checked_span(dim, stride);
  int64_t bytes = 0;
  if (!span || __builtin_mul_overflow(*span, data_type_size(data_type), &bytes))
    return std::nullopt;
  return bytes;
}

bool TensorAttrs::is_packed() const {
  if (stride.size() != dim.size()) return false;
  return storage_elements() == volume() && packed_strides(dim, stride_order(stride)) == stride;
}

std::string TensorAttrs::describe() const {
  std::ostringstream os;
  os << "'" << name << "' [";
  for (size_t i = 0; i < dim.size(); ++i) os << (i ? "," : "") << dim[i];
  os << "]:[";
  for (size_t i = 0; i < stride.size(); ++i) os << (i ? "," : "") << stride[i];
  os << "] " << data_type_name(data_type);
  return os.str();
}

std::vector<int64_t> packed_strides(const std::vector<int64_t>& dim,
                                    const std::vector<int64_t>& order_in) {
  std::vector<int64_t> order = order_in;
  if (order.size() != dim.size()) {
    order.resize(dim.size());
    std::iota(order.begin(), order.end(), 0);
  }
  std::vector<int64_t> stride(dim.size(), 1);
  int64_t s = 1;
  for (size_t k = dim.size(); k-- > 0;) {
    stride[static_cast<size_t>(order[k])] = s;
    // Saturates instead of wrapping: validate() rejects a tensor whose volume overflows.
    if (__builtin_mul_overflow(s, std::max<int64_t>(dim[static_cast<size_t>(order[k])], 1), &s))
      s = std::numeric_limits<int64_t>::max();
  }
  return stride;
}

std::vector<int64_t> stride_order(const std::vector<int64_t>& stride) {
  std::vector<int64_t> order(stride.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return stride[static_cast<size_t>(a)] > stride[static_cast<size_t>(b)];
  });
  return order;
}

}  // namespace dnngraph::ir
