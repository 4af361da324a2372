// Strided gather/scatter for the reference engine (element conversions: src/ir/storage.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "engines/reference/kernel.hpp"

namespace dnngraph::reference {
Dense::Dense(std::vector<int64_t> d, double fill) : dim(std::move(d)) {
  int64_t n = 1;
  for (int64_t x : dim) n *= x;
  data.assign(static_cast<size_t>(n), fill);
}

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& dim) {
  std::vector<int64_t> s(dim.size(), 1);
  for (size_t i = dim.size(); i-- > 1;) s[i - 1] = s[i] * dim[i];
  return s;
}

namespace {

// Calls f(logical_index, storage_offset) for every element of `dims` in row-major order,
// where storage offsets follow `stride` (a stride of 0 broadcasts).
template <class F>
void for_each_offset(const std::vector<int64_t>& dims, const std::vector<int64_t>& stride, F&& f) {
  const size_t r = dims.size();
  int64_t total = 1;
  for (int64_t d : dims) total *= d;
  if (total == 0) return;
  std::vector<int64_t> idx(r, 0);
  int64_t off = 0;
  for (int64_t i = 0; i < total; ++i) {
    f(i, off);
    for (size_t k = r; k-- > 0;) {
      if (++idx[k] < dims[k]) {
        off += stride[k];
        break;
      }
      off -= stride[k] * (dims[k] - 1);
      idx[k] = 0;
    }
  }
}

// Calls f(dense_index, storage_offset) for every element of a rank-4 ragged tensor [B, H, S, D]
// whose row r of sequence i is present (r < rows[i]); sequence i's storage starts at base[i].
// dense_index counts all B*H*S*D elements in row-major order, present or not.
template <class F>
void for_each_ragged(const ir::TensorAttrs& t, const std::vector<int64_t>& base,
                     const std::vector<int64_t>& rows, F&& f) {
  const auto& d = t.dim;
  const auto& st = t.stride;
  int64_t e = 0;
  for (int64_t i = 0; i < d[0]; ++i)
    for (int64_t h = 0; h < d[1]; ++h)
      for (int64_t r = 0; r < d[2]; ++r)
        for (int64_t c = 0; c < d[3]; ++c, ++e)
          if (r < rows[static_cast<size_t>(i)])
            f(e, base[static_cast<size_t>(i)] + h * st[1] + r * st[2] + c * st[3]);
}

double constant_of(const ir::TensorAttrs& t) { return t.value->as_double(); }

}  // namespace

void gather_strided(const Dense& x, int64_t base, const std::vector<int64_t>& step, Dense& y) {
  for_each_offset(y.dim, step, [&](int64_t i, int64_t off) { y[i] = x[base + off]; });
}

KernelContext::KernelContext(const ir::Node& node, Ports inputs, Ports outputs, DataType compute)
    : node_(node), inputs_(std::move(inputs)), outputs_(std::move(outputs)), compute_(compute) {}

const Bound* KernelContext::find(const Ports& ports, Role role) {
  for (const auto& [r, b] : ports)
    if (r == role) return &b;
  return nullptr;
}

const ir::TensorAttrs& KernelContext::tensor(Role role) const {
  const Bound* b = find(inputs_, role);
  if (!b) b = find(outputs_, role);
  return *b->attrs;
}

Dense KernelContext::load(Role role) const {
  return load_broadcast(role, find(inputs_, role)->attrs->dim);
}

Dense KernelContext::load_broadcast(Role role, const std::vector<int64_t>& dims) const {
  const Bound& b = *find(inputs_, role);
  const ir::TensorAttrs& t = *b.attrs;
  Dense out(dims);
  if (t.value) {
    const double v = constant_of(t);
    for (double& x : out.data) x = v;
    return out;
  }
  std::vector<int64_t> stride(dims.size(), 0);
  for (size_t k = 0; k < dims.size() && k < t.dim.size(); ++k)
    stride[k] = (t.dim[k] == 1 && dims[k] != 1) ? 0 : t.stride[k];
  const DataType type = t.data_type;
  for_each_offset(dims, stride,
                  [&](int64_t i, int64_t off) { out[i] = load_element(b.data, type, off); });
  return out;
}

double KernelContext::scalar(Role role) const {
  const Bound& b = *find(inputs_, role);
  if (b.attrs->value) return constant_of(*b.attrs);
  return load_element(b.data, b.attrs->data_type, 0);
}

void KernelContext::store(Role role, const Dense& value) const {
  const Bound& b = *find(outputs_, role);
  const ir::TensorAttrs& t = *b.attrs;
  const DataType type = t.data_type;
  for_each_offset(t.dim, t.stride,
                  [&](int64_t i, int64_t off) { store_element(b.data, type, off, value[i]); });
}

Status KernelContext::check_ragged(Role role, const ir::TensorAttrs& t,
                                   const std::vector<int64_t>& base,
                                   const std::vector<int64_t>& rows) const {
  const int64_t extent = t.storage_elements();
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] <= 0) continue;
    // Strides are >= 1 (validated) and base, dims and strides were checked against int64 by
    // validate(), so the span below cannot wrap unless base is beyond the extent already.
    const int64_t reach =
        (t.dim[1] - 1) * t.stride[1] + (rows[i] - 1) * t.stride[2] + (t.dim[3] - 1) * t.stride[3];
    if (base[i] < 0 || base[i] >= extent || reach >= extent - base[i])
      return make_error(ErrorCode::InvalidArgument, op_kind_name(node_.kind()), " '", name(),
                        "': ", role, " '", t.name, "': sequence ", i, " starts at element ",
                        base[i], " (its ragged offset x multiplier) and its ", rows[i],
                        " rows span ", reach + 1, " elements from there, outside the tensor's ",
                        extent, " elements (", t.describe(),
                        "); fix the ragged offsets or the sequence lengths");
  }
  return Status::ok();
}

// An output's sequences must not share elements (validate checked one sequence's layout; the
// offsets place the sequences): with the sequences ordered by start, each must start past the
// last element of the one before.
Status KernelContext::check_ragged_apart(Role role, const ir::TensorAttrs& t,
                                         const std::vector<int64_t>& base,
                                         const std::vector<int64_t>& rows) const {
  std::vector<std::pair<int64_t, size_t>> starts;  // (first element, sequence)
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i] > 0) starts.emplace_back(base[i], i);
  std::sort(starts.begin(), starts.end());
  for (size_t k = 1; k < starts.size(); ++k) {
    const size_t prev = starts[k - 1].second, cur = starts[k].second;
    // Bounded by the extent (check_ragged ran first): no wrap.
    const int64_t last = base[prev] + (t.dim[1] - 1) * t.stride[1] +
                         (rows[prev] - 1) * t.stride[2] + (t.dim[3] - 1) * t.stride[3];
    if (base[cur] <= last)
      return make_error(ErrorCode::InvalidArgument, op_kind_name(node_.kind()), " '", name(),
                        "': ", role, " '", t.name, "': sequence ", cur, " starts at element ",
                        base[cur], " (its ragged offset x multiplier), inside sequence ", prev,
                        " (elements ", base[prev], " to ", last, " for its ", rows[prev],
                        " rows): the op writes both; give ragged offsets that place the "
                        "sequences apart (e.g. the running sum of the sequence lengths)");
  }
  return Status::ok();
}

Result<Dense> KernelContext::load_ragged(Role role, const std::vector<int64_t>& base,
                                         const std::vector<int64_t>& rows) const {
  const Bound& b = *find(inputs_, role);
  const ir::TensorAttrs& t = *b.attrs;
  DNNGRAPH_TRY(check_ragged(role, t, base, rows));
  Dense out(t.dim);
  for_each_ragged(t, base, rows,
                  [&](int64_t e, int64_t off) { out[e] = load_element(b.data, t.data_type, off); });
  return out;
}

Status KernelContext::store_ragged(Role role, const Dense& value, const std::vector<int64_t>& base,
                                   const std::vector<int64_t>& rows) const {
  const Bound& b = *find(outputs_, role);
  const ir::TensorAttrs& t = *b.attrs;
  DNNGRAPH_TRY(check_ragged(role, t, base, rows));
  DNNGRAPH_TRY(check_ragged_apart(role, t, base, rows));
  for_each_ragged(t, base, rows, [&](int64_t e, int64_t off) {
    store_element(b.data, t.data_type, off, value[e]);
  });
  return Status::ok();
}

}  // namespace dnngraph::reference
