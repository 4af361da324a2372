// Tensor descriptors: uid, dims/strides from the canonical view, alignment, virtual, by-value.
#include <algorithm>
#include <cstring>

#include "dnngraph/storage.hpp"
#include "engines/cudnn/lowering.hpp"

namespace dnngraph::cudnn {

namespace {

// CUDNN_DATA_* in DataType order (NotSet as FLOAT). FP4_E2M1's dims and strides are in
// elements, two elements per byte.
constexpr std::array<cudnnDataType_t, 14> kDataTypes = {
    CUDNN_DATA_FLOAT,    CUDNN_DATA_FLOAT,    CUDNN_DATA_DOUBLE,   CUDNN_DATA_HALF,
    CUDNN_DATA_BFLOAT16, CUDNN_DATA_FP8_E4M3, CUDNN_DATA_FP8_E5M2, CUDNN_DATA_INT8,
    CUDNN_DATA_UINT8,    CUDNN_DATA_INT32,    CUDNN_DATA_INT64,    CUDNN_DATA_BOOLEAN,
    CUDNN_DATA_FP8_E8M0, CUDNN_DATA_FP4_E2M1};
static_assert(kDataTypes.back() == CUDNN_DATA_FP4_E2M1, "one type per DataType");

}  // namespace

cudnnDataType_t to_cudnn(DataType t) { return entry_of(kDataTypes, t, CUDNN_DATA_FLOAT); }

LowerContext::LowerContext(ir::ValidatedGraphPtr graph, ViewMap views)
    : graph_(std::move(graph)), views_(std::move(views)) {
  for (const auto& t : graph_->tensors()) next_uid_ = std::max(next_uid_, t->uid + 1);
}

DataType LowerContext::compute_type(const ir::Node& n) const {
  if (n.compute_data_type != DataType::NotSet) return n.compute_data_type;
  if (graph_->compute_data_type() != DataType::NotSet) return graph_->compute_data_type();
  return DataType::Float;
}

Result<cudnnBackendDescriptor_t> LowerContext::make_tensor(
    const std::string& name, const TensorView& v, DataType type, int64_t uid, bool is_virtual,
    bool by_value, cudnnBackendDescriptor_t ragged, int64_t alignment) {
  // execute() rejects pointers aligned to less than `alignment`: kTensorAlignment (16) for
  // every tensor but the views of slices (set_view_of), which declare what their offset keeps.
  DNNGRAPH_ASSIGN_OR_RETURN(
      Descriptor t, Descriptor::create(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor '" + name + "'"));
  const cudnnDataType_t dt = to_cudnn(type);
  DNNGRAPH_TRY(t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, dt));
  DNNGRAPH_TRY(t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, v.dim));
  DNNGRAPH_TRY(t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, v.stride));
  DNNGRAPH_TRY(t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, uid));
  DNNGRAPH_TRY(t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, alignment));
  const bool virt = is_virtual;
  DNNGRAPH_TRY(t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, virt));
  if (by_value) DNNGRAPH_TRY(t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, by_value));
  if (ragged) DNNGRAPH_TRY(t.set(CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, ragged));
  DNNGRAPH_TRY(t.finalize(ErrorCode::NotSupported));
  return keep(std::move(t));
}

Result<cudnnBackendDescriptor_t> LowerContext::ragged_of(const ir::Tensor& t) {
  auto it = ragged_.find(t.get());
  if (it == ragged_.end()) return cudnnBackendDescriptor_t{nullptr};
  // cuDNN 9.19's backend has no multiplier attribute (CUDNN_ATTR_TENSOR_RAGGED_OFFSET_MULTIPLIER
  // arrived in 9.24): offsets must count elements.
  if (t->ragged_offset_multiplier != 1)
    return make_error(ErrorCode::NotSupported, "tensor ", t->describe(),
                      ": ragged_offset_multiplier ", t->ragged_offset_multiplier,
                      " needs cuDNN 9.24's CUDNN_ATTR_TENSOR_RAGGED_OFFSET_MULTIPLIER; dnngraph's "
                      "cuDNN engine is built against 9.19's API (the reference engine runs it; or "
                      "give offsets in elements with multiplier 1)");
  return tensor(it->second);
}

Result<cudnnBackendDescriptor_t> LowerContext::tensor(const ir::Tensor& t) {
  if (!t) return make_error(ErrorCode::Internal, "cuDNN lowering: null tensor");
  if (auto it = by_tensor_.find(t.get()); it != by_tensor_.end()) return it->second;
  auto vit = views_.find(t.get());
  if (vit == views_.end())
    return make_error(ErrorCode::Internal, "tensor ", t->describe(), " is not in the graph");
  return graph_tensor(t, vit->second);
}

Result<cudnnBackendDescriptor_t> LowerContext::tensor_as(const ir::Tensor& t, const TensorView& v) {
  if (by_tensor_.count(t.get()))
    return make_error(ErrorCode::Internal, "tensor ", t->describe(), " was lowered twice");
  return graph_tensor(t, v);
}

Result<cudnnBackendDescriptor_t> LowerContext::graph_tensor(const ir::Tensor& t,
                                                            const TensorView& v) {
  DNNGRAPH_ASSIGN_OR_RETURN(auto ragged, ragged_of(t));
  cudnnBackendDescriptor_t d = nullptr;
  if (auto vo = views_of_.find(t.get()); vo != views_of_.end()) {
    // A slice lowered as a view: a non-virtual tensor of its own, bound by the plan to the
    // source's pointer plus the offset. Its uid is fresh (the graph's uid of `t` names a
    // virtual tensor, which a variant pack may not carry).
    const int64_t uid = next_uid_++;
    DNNGRAPH_ASSIGN_OR_RETURN(
        d, make_tensor(t->name, v, t->data_type, uid, false, false, ragged, vo->second.alignment));
    derived_.push_back({uid, t->name, vo->second.source->uid, vo->second.source->name,
                        vo->second.byte_offset, vo->second.alignment});
  } else {
    DNNGRAPH_ASSIGN_OR_RETURN(d, make_tensor(t->name, v, t->data_type, t->uid, t->is_virtual,
                                             t->is_pass_by_value, ragged));
    if (t->is_pass_by_value && t->value) constants_.push_back({t->uid, *t->value});
  }
  by_tensor_[t.get()] = d;
  return d;
}

Result<cudnnBackendDescriptor_t> LowerContext::virtual_tensor(const std::string& name,
                                                              const std::vector<int64_t>& dim,
                                                              DataType type) {
  return make_tensor(name, {dim, ir::packed_strides(dim)}, type, next_uid_++, true, false);
}

Result<cudnnBackendDescriptor_t> LowerContext::virtual_tensor(const std::string& name,
                                                              const TensorView& v, DataType type) {
  return make_tensor(name, v, type, next_uid_++, true, false);
}

Result<cudnnBackendDescriptor_t> LowerContext::scratch_tensor(const std::string& name,
                                                              const TensorView& v, DataType type) {
  int64_t extent = 1;  // elements from the first to the last one addressed
  for (size_t i = 0; i < v.dim.size(); ++i) extent += (v.dim[i] - 1) * v.stride[i];
  const std::optional<int64_t> bytes = data_type_bytes(type, extent);
  if (!bytes)
    return make_error(ErrorCode::Internal, "scratch tensor '", name, "': no byte size for ",
                      data_type_name(type));
  const int64_t uid = next_uid_++;
  DNNGRAPH_ASSIGN_OR_RETURN(auto d, make_tensor(name, v, type, uid, false, false));
  scratch_.push_back({uid, name, scratch_bytes_});
  scratch_bytes_ += scratch_base(*bytes);
  return d;
}

Result<cudnnBackendDescriptor_t> LowerContext::constant(const std::string& name, ir::Scalar value,
                                                        size_t rank) {
  std::vector<int64_t> ones(rank, 1);
  const int64_t uid = next_uid_++;
  DNNGRAPH_ASSIGN_OR_RETURN(auto d, make_tensor(name, {ones, ones}, value.type, uid, false, true));
  constants_.push_back({uid, value});
  return d;
}

Result<cudnnBackendDescriptor_t> LowerContext::device_constant(const std::string& name,
                                                               const std::vector<int64_t>& dim,
                                                               std::vector<float> values) {
  int64_t count = 1;
  for (int64_t d : dim) count *= d;
  if (count != static_cast<int64_t>(values.size()))
    return make_error(ErrorCode::Internal, "device constant '", name, "': ", values.size(),
                      " values for ", count, " elements");
  const int64_t uid = next_uid_++;
  DNNGRAPH_ASSIGN_OR_RETURN(auto d, make_tensor(name, {dim, ir::packed_strides(dim)},
                                                DataType::Float, uid, false, false));
  device_constants_.push_back({uid, name, std::move(values)});
  return d;
}

cudnnBackendDescriptor_t LowerContext::keep(Descriptor d) {
  owned_.push_back(std::move(d));
  return owned_.back().get();
}

Status LowerContext::add_op(Descriptor op) {
  DNNGRAPH_TRY(op.finalize(ErrorCode::NotSupported));
  ops_.push_back(std::move(op));
  return Status::ok();
}

Result<std::array<unsigned char, 16>> scalar_bytes(const ir::Scalar& s, DataType type,
                                                   const std::string& name) {
  std::array<unsigned char, 16> b{};
  auto put = [&](auto v) { std::memcpy(b.data(), &v, sizeof v); };
  const double d = s.as_double();
  switch (type) {
    case DataType::Float:
      put(static_cast<float>(d));
      break;
    case DataType::Double:
      put(d);
      break;
    case DataType::Half:
    case DataType::BFloat16:
      store_element(b.data(), type, 0, static_cast<float>(d));
      break;
    case DataType::Int32:
      put(static_cast<int32_t>(is_integral(s.type) ? s.i : d));
      break;
    case DataType::Int64:
      put(static_cast<int64_t>(is_integral(s.type) ? s.i : d));
      break;
    case DataType::Int8:
      put(static_cast<int8_t>(is_integral(s.type) ? s.i : d));
      break;
    case DataType::UInt8:
      put(static_cast<uint8_t>(is_integral(s.type) ? s.i : d));
      break;
    case DataType::Boolean:
      put(static_cast<uint8_t>(d != 0.0));
      break;
    default:
      return make_error(ErrorCode::NotSupported, "pass-by-value tensor '", name, "' of type ",
                        data_type_name(type), " cannot carry a constant for cuDNN");
  }
  return b;
}

}  // namespace dnngraph::cudnn
