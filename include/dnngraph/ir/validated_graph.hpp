// The only graph form an engine accepts: an immutable snapshot that only Graph::validate()
// can create, taken after every shape, dtype, attribute and extent rule of src/ir/ passed.
// Engines therefore check *support* (can they run this dtype / layout / size) and never
// validity; edits the user makes to the builder graph afterwards do not reach it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dnngraph/ir/ops.hpp"
#include "dnngraph/ir/tensor.hpp"

namespace dnngraph::ir {

class Graph;

class ValidatedGraph {
 public:
  ValidatedGraph(const ValidatedGraph&) = delete;  // tensors are shared by pointer
  ValidatedGraph& operator=(const ValidatedGraph&) = delete;

  const std::string& name() const { return name_; }
  DataType io_data_type() const { return io_; }
  DataType intermediate_data_type() const { return intermediate_; }
  DataType compute_data_type() const { return compute_; }
  bool dynamic_shape_enabled() const { return dynamic_shape_; }
  // The SM count target (Graph::set_sm_count): >= 1, or -1 (Graph::kAllSms) when unset.
  int32_t sm_count() const { return sm_count_; }

  // Nodes in topological order; their ports point at tensors(), private copies whose dims,
  // strides, data types and uids are all set and checked.
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<Tensor>& tensors() const { return tensors_; }
  // Non-virtual tensors (graph inputs and outputs), ordered by uid.
  std::vector<Tensor> io_tensors() const;
  Tensor find_tensor_by_uid(int64_t uid) const;
  Tensor find_tensor_by_name(std::string_view name) const;

 private:
  friend class Graph;  // Graph::validate() is the only way to make one
  ValidatedGraph() = default;

  std::string name_;
  DataType io_ = DataType::NotSet;
  DataType intermediate_ = DataType::Float;
  DataType compute_ = DataType::Float;
  bool dynamic_shape_ = false;
  int32_t sm_count_ = -1;
  std::vector<Tensor> tensors_;
  std::vector<Node> nodes_;
};

using ValidatedGraphPtr = std::shared_ptr<const ValidatedGraph>;

}  // namespace dnngraph::ir
