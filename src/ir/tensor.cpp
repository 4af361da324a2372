#include "dnngraph/ir/tensor.hpp"

#include <algorithm>
#include <numeric>
#include <sstream>

namespace dnngraph::ir {

int64_t TensorAttrs::volume() const {
  int64_t v = 1;
  for (int64_t d : dim) v *= d;
  return v;
}

int64_t TensorAttrs::storage_elements() const {
  if (dim.empty()) return 1;
  int64_t span = 1;
  for (size_t i = 0; i < dim.size(); ++i) {
    if (dim[i] == 0) return 0;
    span += (dim[i] - 1) * (i < stride.size() ? stride[i] : 0);
  }
  return span;
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
    s *= std::max<int64_t>(dim[static_cast<size_t>(order[k])], 1);
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
