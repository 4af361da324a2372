// What a reference kernel sees: its node's tensors as dense row-major fp64 arrays.
// Every tensor (user buffer, pass-by-value scalar or virtual intermediate in the workspace)
// is read through the same path: strided storage of any data type -> Dense, and back with
// round-to-nearest-even into the storage type.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "dnngraph/ir/ops.hpp"
#include "dnngraph/status.hpp"
#include "dnngraph/storage.hpp"

namespace dnngraph::reference {

using ir::Role;

// Dense row-major tensor in fp64 (the reference computes in fp64 and rounds where the graph
// says a value is stored).
struct Dense {
  std::vector<int64_t> dim;
  std::vector<double> data;

  Dense() = default;
  explicit Dense(std::vector<int64_t> d, double fill = 0.0);
  int64_t size() const { return static_cast<int64_t>(data.size()); }
  double& operator[](int64_t i) { return data[static_cast<size_t>(i)]; }
  double operator[](int64_t i) const { return data[static_cast<size_t>(i)]; }
};

// Row-major packed strides of `dim`.
std::vector<int64_t> row_major_strides(const std::vector<int64_t>& dim);
// y[i] = x[base + sum_k idx_k(i) * step[k]] for every row-major index i of y (idx_k: i's index
// along y's dim k): the copy behind slice and transpose.
void gather_strided(const Dense& x, int64_t base, const std::vector<int64_t>& step, Dense& y);

// Element conversions (include/dnngraph/storage.hpp), also reachable as reference::*.
using dnngraph::load_element;
using dnngraph::round_to;
using dnngraph::store_element;

// A tensor bound to its memory during one execution.
struct Bound {
  const ir::TensorAttrs* attrs = nullptr;
  void* data = nullptr;  // user buffer, host scalar, or workspace slice
};

class KernelContext {
 public:
  KernelContext(const ir::Node& node, std::vector<std::pair<Role, Bound>> inputs,
                std::vector<std::pair<Role, Bound>> outputs, DataType compute);

  const ir::Node& node() const { return node_; }
  const std::string& name() const { return node_.name; }
  // Node's compute type (Float, Double, ...). round_compute(x) rounds x to it.
  DataType compute_type() const { return compute_; }
  double round_compute(double v) const { return round_to(compute_, v); }

  bool has_input(Role role) const { return find(inputs_, role) != nullptr; }
  bool has_output(Role role) const { return find(outputs_, role) != nullptr; }
  // Attributes of the tensor bound to role (input or output); role must exist.
  const ir::TensorAttrs& tensor(Role role) const;

  // Reads an input in logical row-major order.
  Dense load(Role role) const;
  // Reads an input broadcast (dims of 1 repeated) to `dims` (same rank).
  Dense load_broadcast(Role role, const std::vector<int64_t>& dims) const;
  // The single value of a 1-element input (pass-by-value constant, host scalar or buffer).
  double scalar(Role role) const;
  // Writes an output (dims must equal the output's dims), rounding to its storage type.
  void store(Role role, const Dense& value) const;
  // Ragged (THD) rank-4 tensors: batch item i starts at element base[i] (instead of i times
  // dim 0's stride) and only its rows [0, rows[i]) of dim 2 exist. load_ragged reads those
  // (other rows read as 0); store_ragged writes only those. Both fail, naming the tensor, when
  // a sequence reaches outside the tensor's extent (storage_elements()), never reading or
  // writing out of bounds.
  Result<Dense> load_ragged(Role role, const std::vector<int64_t>& base,
                            const std::vector<int64_t>& rows) const;
  Status store_ragged(Role role, const Dense& value, const std::vector<int64_t>& base,
                      const std::vector<int64_t>& rows) const;

 private:
  using Ports = std::vector<std::pair<Role, Bound>>;
  static const Bound* find(const Ports& ports, Role role);
  Status check_ragged(Role role, const ir::TensorAttrs& t, const std::vector<int64_t>& base,
                      const std::vector<int64_t>& rows) const;
  Status check_ragged_apart(Role role, const ir::TensorAttrs& t, const std::vector<int64_t>& base,
                            const std::vector<int64_t>& rows) const;
  const ir::Node& node_;
  Ports inputs_;
  Ports outputs_;
  DataType compute_;
};

// One kernel per op of the table, in src/engines/reference/<family>.cpp. Each runs a node of a
// validated graph (ir::ValidatedGraph): every shape, data type and attribute rule has been
// checked in src/ir/, so a kernel checks nothing about the graph; it fails only for
// data-dependent problems (e.g. a sequence length above s_kv). Each is named run_<name> after
// the op's table name (run_conv_fprop, run_matmul, ...); the engine dispatches on the
// table (engine.cpp), so a new op adds its kernel there and nothing here.
#define DNNGRAPH_OP_KERNEL_DECL(kind, name, Attrs, in, out) Status run_##name(KernelContext& ctx);
DNNGRAPH_OPS(DNNGRAPH_OP_KERNEL_DECL)
#undef DNNGRAPH_OP_KERNEL_DECL

// Elements of the zero-padded fp64 copy a conv works on.
int64_t conv_padded_elements(const ir::Node& n);
// One element of a pointwise op (mode and parameters of `a`; not GEN_INDEX), in fp64.
double pointwise_value(const ir::PointwiseAttrs& a, double x, double y, double z);

// An SDPA node's score modifiers (ir::Subgraph "score_mod" / "score_mod_bprop") evaluated one
// score element at a time (sdpa_score_mod.cpp). Without them, forward() and backward() return
// their argument.
class ScoreModEval {
 public:
  static Result<ScoreModEval> make(const KernelContext& ctx);
  // score_mod at score element (b, h, i, j) of the scaled score s.
  double forward(int64_t b, int64_t h, int64_t i, int64_t j, double s) const;
  // The gradient of the scaled score: score_mod_bprop of ds (the gradient of the modified
  // score) after score_mod ran on s (bprop reads what it saved); ds itself without bprop, as
  // the cuDNN frontend does.
  double backward(int64_t b, int64_t h, int64_t i, int64_t j, double s, double ds) const;

 private:
  struct Operand {
    int kind = 2;  // 0: slot, 1: graph input (inputs_), 2: absent
    int index = 0;
  };
  struct Step {  // one pointwise node
    ir::PointwiseAttrs attrs;
    DataType compute = DataType::Float, out_type = DataType::Float;
    Operand in[3];
    int out = 0;  // slot
  };
  void run(const std::vector<Step>& steps, int64_t b, int64_t h, int64_t i, int64_t j,
           std::vector<double>& slots) const;
  double read(const Operand& o, const int64_t idx[4], const std::vector<double>& slots) const;
  std::vector<Step> fwd_, bwd_;
  int fwd_in_ = -1, fwd_out_ = -1, bwd_in_ = -1, bwd_out_ = -1;  // slots
  int slot_count_ = 0;
  std::vector<Dense> inputs_;                   // SCORE_MOD_IN_* values
  std::vector<std::vector<int64_t>> in_steps_;  // their strides over [b,h,s_q,s_kv]; 0: broadcast
};

}  // namespace dnngraph::reference
