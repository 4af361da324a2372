// Internal helpers shared by the per-family inference files: port lookup, rank and dims
// checks, broadcasting, default strides and default data types. Every error names the op
// (kind and name) and the tensor (port role and name).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dnngraph/ir/ops.hpp"
#include "dnngraph/status.hpp"
#include "ir/ops/op_family.hpp"

// Binds `var` to the tensor of a required port or returns the error from the enclosing
// function: DNNGRAPH_PORT(x, required_input(n, "X"));
#define DNNGRAPH_PORT(var, expr)                         \
  ::dnngraph::ir::Tensor var;                            \
  {                                                      \
    auto var##_res_ = (expr);                            \
    if (!var##_res_.is_ok()) return var##_res_.status(); \
    var = var##_res_.value();                            \
  }

namespace dnngraph::ir {

// "matmul 'mm0'"
std::string op_label(const Node& n);
// "A 'x'"
std::string port_label(Role role, const Tensor& t);
// "[1,2,3]"
std::string dims_str(const std::vector<int64_t>& d);

// Rejects a port whose role the family does not know (hand-built nodes, JSON typos).
// (validate() calls it with the ports of the op table before the family's rule runs.)
Status check_roles(const Node& n, std::span<const Role> inputs, std::span<const Role> outputs);
// The tensor bound to `role`, or an error saying it is missing.
Result<Tensor> required_input(const Node& n, Role role);
Result<Tensor> required_output(const Node& n, Role role);

// rank in [lo, hi]
Status check_rank(const Node& n, Role role, const Tensor& t, size_t lo, size_t hi);
// An input's dims must equal `expected`; `why` says where the expectation comes from.
Status expect_dims(const Node& n, Role role, const Tensor& t, const std::vector<int64_t>& expected,
                   std::string_view why);
// An input must be broadcastable to `target` (same rank, each dim equal or 1).
Status expect_broadcastable(const Node& n, Role role, const Tensor& t,
                            const std::vector<int64_t>& target, std::string_view why);
// Same rank and each dim of `from` equal to the one in `to` or 1.
bool broadcastable(const std::vector<int64_t>& from, const std::vector<int64_t>& to);

// A one-element tensor (volume 1); with `pass_by_value`, it must also be a host scalar.
Status check_scalar(const Node& n, Role role, const Tensor& t, bool pass_by_value);

// The dim order (outermost first) of `like` when it has `rank` dims and strides, else
// row-major. Outputs follow the layout of the op's main input (NHWC in -> NHWC out).
std::vector<int64_t> order_like(const Tensor& like, size_t rank);

// Layout ops (slice, transpose, reshape, concatenate) keep their input's data type: an output
// type the user set must equal input `x`'s (port `role`), else an error naming both.
Status check_keeps_data_type(const Node& n, std::string_view op, Role role, const Tensor& x,
                             const Tensor& y);

// Sets an output's dims to those the op produces, or checks the ones the user set against them.
Status set_output_dims(const Node& n, Role role, const Tensor& out,
                       const std::vector<int64_t>& dims);

// Fills (or checks, when the user set them) an output's dims, then fills missing strides
// (packed, in the dim order of `layout_like`, row-major when null) and a missing data type:
// `forced` when given (e.g. FLOAT statistics), else the graph's intermediate type for a
// virtual tensor, the io type for a non-virtual one, and `fallback` when that is unset.
Status infer_output(const Node& n, Role role, const Tensor& out, const std::vector<int64_t>& dims,
                    const Tensor& layout_like, const InferContext& ctx, DataType fallback,
                    DataType forced = DataType::NotSet);

}  // namespace dnngraph::ir
