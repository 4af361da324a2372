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

namespace {

// The span of a tensor in elements. A ragged (THD) rank-4 tensor is placed per sequence by its
// offsets, not by its batch stride (in the packed layout the batch stride equals the token
// stride, so the plain span covers only b - 1 + s tokens): its buffer holds b sequences of up
// to s rows each, b times the span of one sequence (the padded buffer the frontend allocates),
// and execute checks each sequence against that.
std::optional<int64_t> span_of(const TensorAttrs& t) {
  const std::optional<int64_t> span = checked_span(t.dim, t.stride);
  if (!span || !t.ragged_offset || t.dim.size() != 4 || t.dim[0] <= 1) return span;
  std::vector<int64_t> one = t.dim;
  one[0] = 1;
  const std::optional<int64_t> per = checked_span(one, t.stride);
  int64_t all = 0;
  if (!per || __builtin_mul_overflow(*per, t.dim[0], &all)) return std::nullopt;
  return std::max(*span, all);
}

}  // namespace

int64_t TensorAttrs::storage_elements() const {
  return span_of(*this).value_or(std::numeric_limits<int64_t>::max());
}

std::optional<int64_t> TensorAttrs::storage_bytes() const {
  const std::optional<int64_t> span = span_of(*this);
  if (!span) return std::nullopt;
  return data_type_bytes(data_type, *span);
}

std::optional<size_t> TensorAttrs::packed_axis() const {
  std::optional<size_t> axis;
  for (size_t d = 0; d < dim.size() && d < stride.size(); ++d)
    if (stride[d] == 1 && (!axis || dim[d] >= dim[*axis])) axis = d;
  return axis;
}

std::string TensorAttrs::packing_problem() const {
  if (data_type != DataType::FP4_E2M1) return "";  // Boolean bits follow element offsets
  const std::string type(data_type_name(data_type));
  const std::optional<size_t> axis = packed_axis();
  std::ostringstream os;
  if (!axis) {
    os << "is " << describe() << ": no dim has stride 1, but " << type
       << " packs two elements per byte along a unit-stride dim; give one dim stride 1 (e.g. "
          "packed strides)";
    return os.str();
  }
  const int64_t extent = dim[*axis];
  if (extent % 2 != 0) {
    os << "is " << describe() << ": its unit-stride dim " << *axis << " has extent " << extent
       << ", but " << type
       << " packs two elements per byte along that dim, so it must be even; pad that dim to "
       << extent + 1 << " or use a wider data type";
    return os.str();
  }
  for (size_t d = 0; d < dim.size(); ++d)
    if (d != *axis && dim[d] > 1 && stride[d] % 2 != 0) {
      os << "is " << describe() << ": stride " << d << " is " << stride[d] << ", but " << type
         << " packs two elements per byte, so every row must start on a byte: give dims other "
            "than the unit-stride dim "
         << *axis << " even strides (e.g. packed strides)";
      return os.str();
    }
  return "";
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
