// What every dnngraph torch op shares: dtype mapping and checks, the graph cache, one handle
// per device, execution with the current stream and a workspace from torch's allocator, and
// the ATen fallback's policy (a one-time warning, or an error) and counter.
//
// Hot path of a call (no Python): build the key (shapes, strides, dtypes, attributes, device)
// -> look it up in the bounded LRU cache -> make the variant pack -> take the device's lock,
// set the stream if it changed, execute.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/FunctionRef.h>
#include <c10/util/SmallVector.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dnngraph/graph.hpp"

namespace dnngraph::torch_ops {

// ---------------------------------------------------------------- checks
// dnngraph's data type of a torch tensor; TypeError naming the op and the tensor otherwise.
DataType data_type_of(at::ScalarType t, const char* op, const char* name);
inline DataType data_type_of(const at::Tensor& t, const char* op, const char* name) {
  return data_type_of(t.scalar_type(), op, name);
}
// CPU or CUDA, else an error; every given tensor on x's device.
void check_device(const char* op, const at::Tensor& x, const char* x_name,
                  std::initializer_list<std::pair<const at::Tensor*, const char*>> others);
void check_same_dtype(const char* op, const at::Tensor& x, const char* x_name, const at::Tensor& t,
                      const char* t_name);
// The alignment cuDNN's tensor descriptors declare, in bytes.
inline constexpr int64_t kAlignmentBytes = 16;
// Whether t starts on a kAlignmentBytes boundary.
inline bool aligned16(const at::Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.data_ptr()) % kAlignmentBytes == 0;
}
// The dims/strides of a torch tensor as dnngraph wants them.
std::vector<int64_t> dims_of(const at::Tensor& t);
std::vector<int64_t> strides_of(const at::Tensor& t);

// Throws the error of a failed Status as the matching Python exception (ValueError for bad
// input, NotImplementedError for NotSupported, RuntimeError for the rest), prefixed by op.
[[noreturn]] void throw_status(const char* op, const Status& s);

// ---------------------------------------------------------------- activation names
enum class Act : int { None, Relu, Gelu, GeluTanh, Silu, Tanh, Sigmoid };
Act parse_act(const char* op, std::string_view name);
// Applies the activation to a graph tensor (None returns x).
ir::Tensor apply_act(ir::Graph& g, Act act, ir::Tensor x);
// The ATen form (for fallbacks and backward).
at::Tensor aten_act(Act act, const at::Tensor& x);
// d act(z) / dz * dy, through ATen.
at::Tensor aten_act_backward(Act act, const at::Tensor& dy, const at::Tensor& z);
// The same written into `out` (any layout: one kernel reads dy and z as they are laid out).
void aten_act_backward_out(Act act, at::Tensor& out, const at::Tensor& dy, const at::Tensor& z);
// `out` = `x` summed over the dims `out` broadcasts along (sum_to_size), in place: one
// reduction kernel, no copy.
void sum_to_out(at::Tensor& out, const at::Tensor& x);

// ---------------------------------------------------------------- cache key
class Key {
 public:
  explicit Key(const char* op) { add_str(op); }
  Key& add(int64_t v) {
    words_.push_back(v);
    return *this;
  }
  Key& add(double v) {
    int64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    return add(bits);
  }
  Key& add(bool v) { return add(static_cast<int64_t>(v)); }
  Key& add_str(std::string_view s);
  Key& add(const at::Tensor& t);  // rank, sizes, strides, dtype (undefined: one marker)
  Key& add(const std::optional<at::Tensor>& t) {
    return t && t->defined() ? add(*t) : add(int64_t{-7});
  }
  Key& add(at::IntArrayRef v);
  Key& add_device(const at::Device& d);

  bool operator==(const Key& o) const { return words_ == o.words_; }
  size_t hash() const;

 private:
  // Inline storage: building a key on a call allocates nothing (it is copied into the cache
  // on a miss only).
  c10::SmallVector<int64_t, 64> words_;
};

// ---------------------------------------------------------------- built graphs
// One built graph (or the reason the device's engine could not build one).
struct BuiltGraph {
  std::unique_ptr<Graph> graph;  // null when unsupported
  int64_t workspace_bytes = 0;
  std::vector<int64_t> io_uids;      // the graph's non-virtual tensors: what a variant pack holds
  std::vector<int64_t> output_uids;  // those of them the graph writes
  Status unsupported;                // why the engine has no plan (the op then falls back to ATen)
  bool autotuned = false;  // its plan was chosen by timing (torch.backends.cudnn.benchmark)
};
// Adds tensors (explicit uids) and ops. A reference to the caller's lambda: nothing is
// allocated to pass it on a cache hit (a std::function of a capturing lambda would be).
using GraphBuilder = c10::function_ref<void(Graph& g)>;

// Returns the cached graph for `key`, building it on the tensors' device with `build`
// (validate + build with heuristics A then FALLBACK) on a miss. Invalid graphs throw (bad
// input); NotSupported is cached as `unsupported` so that the caller falls back to ATen.
std::shared_ptr<const BuiltGraph> cached_graph(const Key& key, const at::Device& device,
                                               const char* op, GraphBuilder build);

// Runs a built graph: uid -> tensor pointers (entries whose uid the graph does not hold, e.g.
// an optional input it was built without, are skipped), the device's current stream (set on the
// handle only when it changed), a workspace from torch's caching allocator for this call. A
// tensor that does not start on a 16-byte boundary (a view such as x[..., 1:] in bf16; cuDNN's
// descriptors declare 16) is bound through an aligned copy of the memory it spans, written back
// after the call when the graph writes it.
void execute(const BuiltGraph& g, const at::Device& device, const char* op,
             c10::ArrayRef<std::pair<int64_t, const at::Tensor*>> pack);
inline void execute(const BuiltGraph& g, const at::Device& device, const char* op,
                    std::initializer_list<std::pair<int64_t, const at::Tensor*>> pack) {
  execute(g, device, op, c10::ArrayRef<std::pair<int64_t, const at::Tensor*>>(pack));
}

// Called by an op whose engine has no plan for its inputs, before it runs on ATen instead. Counts
// the fallback, then follows the fallback policy: "warn" (the default) warns once per op and
// returns; "error" throws a RuntimeError naming the op and why, so that nothing runs on ATen.
void warn_fallback(const char* op, const Status& why);

// The fallback policy: "warn" or "error". Its first value comes from DNNGRAPH_TORCH_FALLBACK
// (unset: "warn"); set_fallback_policy changes it for the process and returns the previous one
// (ValueError for another name). Tests set "error" so that a result ATen computed cannot pass
// for dnngraph's.
std::string fallback_policy();
std::string set_fallback_policy(std::string_view policy);
// How many op calls have reached the fallback since the library was loaded (under either
// policy).
int64_t fallback_count();

// How the ops' plans execute on a GPU: "off" (every call runs cuDNN's execute), "repeated"
// (a CUDA graph recorded once the same pointers come back, then replayed) or "always". The first
// value comes from DNNGRAPH_TORCH_CUDA_GRAPHS (unset: "off"); set_cuda_graphs changes it for the
// process, cached graphs included, and returns the previous one (ValueError for another name).
std::string cuda_graphs();
std::string set_cuda_graphs(std::string_view mode);

// Cache statistics and control (for tests and users): {size, capacity, hits, misses, and the
// cached graphs' CUDA-graph replayed, recorded and direct executes}.
std::vector<int64_t> cache_stats();
void cache_clear();
// The JSON description (ir::to_json) of every cached graph the op `op` built, most recently
// used first: lets tests compare the op's graph with one built through the Python API.
std::vector<std::string> cached_graph_json(std::string_view op);
void cache_set_capacity(int64_t capacity);

// Makes a graph tensor with explicit uid, dims and strides of a torch tensor.
ir::Tensor tensor_like(Graph& g, int64_t uid, const char* name, const at::Tensor& t);
ir::Tensor tensor_like(Graph& g, int64_t uid, const char* name, std::vector<int64_t> dims,
                       std::vector<int64_t> strides, DataType type);
// Marks an op output as a graph output with the torch tensor's uid, dims, strides and type.
void output_like(const ir::Tensor& out, int64_t uid, const char* name, const at::Tensor& t);

}  // namespace dnngraph::torch_ops
