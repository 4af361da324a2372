// dnngraph::run_graph(str graph_json, Tensor[] inputs) -> Tensor[]: any dnngraph graph, given in
// the JSON graph format (docs/json-format.md), as one op. The torch.compile backend runs each
// partition it cuts through it (docs/torch.md, "Graph partitions").
//   inputs  bind, in order, to the graph's non-virtual tensors that no op produces and that carry
//           no constant value, by ascending uid;
//   outputs are the non-virtual tensors an op produces, by ascending uid, allocated here with the
//           dims, strides and data types the graph declares, on the inputs' device.
// The parsed graph's signature is cached per text; the built graph per (text, device, input
// alignment) in the runtime's graph cache. The Meta kernel reads the signature alone, so tracing
// builds nothing. No autograd: the backend calls the op on the forward and backward graphs.
#include <ATen/ops/empty_strided.h>

#include <atomic>
#include <cstring>
#include <limits>
#include <list>
#include <mutex>
#include <unordered_map>

#include "core/op_support.hpp"
#include "dnngraph/ir/json.hpp"

namespace dnngraph::torch_ops {
namespace {

constexpr const char* kOp = "run_graph";

// The text's identity: two independent 64-bit hashes and the length.
struct TextId {
  uint64_t a = 0, b = 0;
  uint64_t size = 0;
  bool operator==(const TextId&) const = default;
};
struct TextIdHash {
  size_t operator()(const TextId& t) const { return static_cast<size_t>(t.a ^ (t.b << 1)); }
};
// std::hash of the text and a second, independent hash: a multiply-xorshift mix 8 bytes a step.
TextId text_id(std::string_view text) {
  uint64_t b = 0x9e3779b97f4a7c15ull ^ text.size();
  size_t i = 0;
  for (; i + 8 <= text.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, text.data() + i, 8);
    b = (b ^ w) * 0xff51afd7ed558ccdull;
    b ^= b >> 32;
  }
  for (; i < text.size(); ++i)
    b = (b ^ static_cast<unsigned char>(text[i])) * 0xc4ceb9fe1a85ec53ull;
  b ^= b >> 29;
  return {std::hash<std::string_view>{}(text), b, text.size()};
}

// One bound tensor of the graph as the op sees it.
struct IoTensor {
  int64_t uid = 0;
  std::string name;
  std::vector<int64_t> dims, strides;
  at::ScalarType dtype = at::kFloat;
  bool by_value = false;  // a pass-by-value scalar without a constant value: read on the host
};
struct Signature {
  std::vector<IoTensor> inputs, outputs;
};

at::ScalarType scalar_type_of(DataType t, const std::string& tensor) {
  switch (t) {
    case DataType::Float:
      return at::kFloat;
    case DataType::Double:
      return at::kDouble;
    case DataType::Half:
      return at::kHalf;
    case DataType::BFloat16:
      return at::kBFloat16;
    case DataType::FP8_E4M3:
      return at::kFloat8_e4m3fn;
    case DataType::FP8_E5M2:
      return at::kFloat8_e5m2;
    case DataType::Int8:
      return at::kChar;
    case DataType::UInt8:
      return at::kByte;
    case DataType::Int32:
      return at::kInt;
    case DataType::Int64:
      return at::kLong;
    default:
      TORCH_CHECK_TYPE(false, "dnngraph::", kOp, ": graph tensor '", tensor, "' has data type ",
                       data_type_name(t),
                       ", which no torch dtype stores element for element; run_graph binds "
                       "float, half, bfloat16, fp8, int8/uint8, int32 and int64 tensors");
  }
}

// Parses and validates the text; ValueError naming what is wrong.
std::unique_ptr<Graph> parse(std::string_view json) {
  auto g = std::make_unique<Graph>();
  if (Status s = ir::from_json(json, *g); !s.is_ok()) throw_status(kOp, s);
  if (Status s = g->validate(); !s.is_ok()) throw_status(kOp, s);
  return g;
}

IoTensor io_of(const ir::TensorAttrs& t) {
  return {t.uid, t.name, t.dim, t.stride, scalar_type_of(t.data_type, t.name), t.is_pass_by_value};
}

std::shared_ptr<const Signature> make_signature(std::string_view json) {
  std::unique_ptr<Graph> g = parse(json);
  std::unordered_map<const ir::TensorAttrs*, bool> produced;
  for (const ir::Node& n : g->nodes())
    for (const ir::Port& p : n.outputs)
      if (p.tensor) produced[p.tensor.get()] = true;
  auto sig = std::make_shared<Signature>();
  for (const ir::Tensor& t : g->io_tensors()) {  // non-virtual, by uid
    if (produced.count(t.get()))
      sig->outputs.push_back(io_of(*t));
    else if (!t->value)
      sig->inputs.push_back(io_of(*t));
  }
  return sig;
}

// Signatures by text, bounded (least recently used dropped first).
std::shared_ptr<const Signature> signature_of(std::string_view json, const TextId& id) {
  static std::mutex mu;
  static std::list<TextId> lru;
  static std::unordered_map<
      TextId, std::pair<std::shared_ptr<const Signature>, decltype(lru)::iterator>, TextIdHash>
      map;
  constexpr size_t kCapacity = 1024;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = map.find(id); it != map.end()) {
      lru.splice(lru.begin(), lru, it->second.second);
      return it->second.first;
    }
  }
  auto sig = make_signature(json);  // outside the lock: parsing may throw
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = map.find(id); it != map.end()) return it->second.first;
  lru.push_front(id);
  map.emplace(id, std::make_pair(sig, lru.begin()));
  while (map.size() > kCapacity) {
    map.erase(lru.back());
    lru.pop_back();
  }
  return sig;
}

// The device of the first input that is not a pass-by-value scalar (those may stay on the host).
at::Device device_of(const Signature& sig, at::TensorList inputs) {
  for (size_t k = 0; k < inputs.size() && k < sig.inputs.size(); ++k)
    if (!sig.inputs[k].by_value && inputs[k].defined()) return inputs[k].device();
  TORCH_CHECK_VALUE(false, "dnngraph::", kOp, ": the graph has no input tensor besides host ",
                    "scalars, so the device to run on is unknown; give it at least one input");
}

// Whether t is laid out as the graph says (strides of dims of extent 1 do not matter).
bool same_layout(const at::Tensor& t, const IoTensor& want) {
  for (size_t d = 0; d < want.dims.size(); ++d)
    if (want.dims[d] > 1 && t.stride(static_cast<int64_t>(d)) != want.strides[d]) return false;
  return true;
}

std::string dims_text(const std::vector<int64_t>& d) { return c10::str(at::IntArrayRef(d)); }

// Count, dtype, rank and dims of each input against the graph (symbolic dims are guarded on:
// the graph is built for one shape). ValueError naming the tensor.
void check_inputs(const Signature& sig, at::TensorList inputs) {
  TORCH_CHECK_VALUE(inputs.size() == sig.inputs.size(), "dnngraph::", kOp, ": the graph has ",
                    sig.inputs.size(), " inputs (its non-virtual tensors no op produces, by uid)",
                    " but ", inputs.size(), " tensors were given");
  const at::Device device = device_of(sig, inputs);
  for (size_t k = 0; k < inputs.size(); ++k) {
    const at::Tensor& t = inputs[k];
    const IoTensor& want = sig.inputs[k];
    TORCH_CHECK_VALUE(t.defined(), "dnngraph::", kOp, ": input ", k, " ('", want.name,
                      "') is undefined");
    TORCH_CHECK_VALUE(want.by_value || t.device() == device, "dnngraph::", kOp, ": input ", k,
                      " ('", want.name, "') is on ", t.device(),
                      " but the graph's first input is on ", device, "; move them to one device");
    TORCH_CHECK_VALUE(!want.by_value || t.numel() == 1, "dnngraph::", kOp, ": input ", k, " ('",
                      want.name, "') is a pass-by-value scalar of the graph but has ", t.numel(),
                      " elements; give a one-element tensor");
    TORCH_CHECK_VALUE(t.scalar_type() == want.dtype, "dnngraph::", kOp, ": input ", k, " ('",
                      want.name, "') has dtype ", t.scalar_type(), "; the graph expects ",
                      want.dtype);
    if (want.by_value) continue;  // any one-element tensor
    bool same = t.dim() == static_cast<int64_t>(want.dims.size());
    for (size_t d = 0; same && d < want.dims.size(); ++d) same = t.sym_size(d) == want.dims[d];
    TORCH_CHECK_VALUE(same, "dnngraph::", kOp, ": input ", k, " ('", want.name, "') has shape ",
                      t.sym_sizes(), "; the graph expects ", dims_text(want.dims));
  }
}

// Tests: outputs filled with NaN (integers: a sentinel) before the graph runs, so that an output
// the graph does not write cannot pass for a result.
std::atomic<bool>& poison_outputs() {
  static std::atomic<bool> on{false};
  return on;
}
bool set_poison_outputs(bool on) { return poison_outputs().exchange(on); }

at::Tensor empty_output(const IoTensor& out, const at::TensorOptions& like) {
  at::Tensor t = at::empty_strided(out.dims, out.strides, like.dtype(out.dtype));
  if (poison_outputs().load(std::memory_order_relaxed) && !t.is_meta())
    t.fill_(at::isFloatingType(out.dtype) ? std::numeric_limits<double>::quiet_NaN() : 77.0);
  return t;
}

// One kernel cache per device for the graphs with dynamic shapes (docs/torch.md).
KernelCachePtr kernel_cache_for(const at::Device& device) {
  static std::mutex mu;
  static std::unordered_map<int64_t, KernelCachePtr> caches;
  const int64_t slot = device.is_cpu() ? -1 : device.index();
  std::lock_guard<std::mutex> lock(mu);
  KernelCachePtr& c = caches[slot];
  if (!c) c = KernelCache::create();
  return c;
}

std::vector<at::Tensor> run_graph(c10::string_view json_in, at::TensorList inputs) {
  const std::string_view json(json_in.data(), json_in.size());
  const TextId id = text_id(json);
  const std::shared_ptr<const Signature> sig = signature_of(json, id);
  check_inputs(*sig, inputs);
  const at::Device device = device_of(*sig, inputs);
  TORCH_CHECK_NOT_IMPLEMENTED(device.is_cpu() || device.is_cuda(), "dnngraph::", kOp,
                              ": the inputs are on ", device,
                              "; dnngraph runs on cpu (reference engine) and cuda (cuDNN) tensors "
                              "only");
  // Each input in the graph's layout (a copy when its strides differ) and a pass-by-value scalar
  // on the host.
  std::vector<at::Tensor> bound(inputs.size());
  Key key(kOp);
  key.add(static_cast<int64_t>(id.a)).add(static_cast<int64_t>(id.b));
  key.add(static_cast<int64_t>(id.size)).add_device(device);
  for (size_t k = 0; k < inputs.size(); ++k) {
    const IoTensor& want = sig->inputs[k];
    const at::Tensor& t = inputs[k];
    if (want.by_value)
      bound[k] = t.to(at::kCPU).contiguous();
    else if (!same_layout(t, want))
      bound[k] = at::empty_strided(want.dims, want.strides, t.options()).copy_(t);
    else
      bound[k] = t;
  }
  auto g = cached_graph(key, device, kOp, [&](Graph& gr) {
    if (Status s = ir::from_json(json, gr); !s.is_ok()) throw_status(kOp, s);
    // Graphs that declare dynamic shapes share the device's kernels across their shapes.
    if (gr.dynamic_shape_enabled()) gr.set_kernel_cache(kernel_cache_for(device));
  });
  // No ATen form of an arbitrary graph exists: an engine without a plan is an error.
  if (!g->graph) throw_status(kOp, g->unsupported);
  std::vector<at::Tensor> outputs;
  outputs.reserve(sig->outputs.size());
  const at::TensorOptions opts = at::TensorOptions().device(device);
  std::vector<std::pair<int64_t, const at::Tensor*>> pack;
  pack.reserve(inputs.size() + sig->outputs.size());
  for (const IoTensor& out : sig->outputs) outputs.push_back(empty_output(out, opts));
  for (size_t k = 0; k < inputs.size(); ++k) pack.emplace_back(sig->inputs[k].uid, &bound[k]);
  for (size_t k = 0; k < outputs.size(); ++k) pack.emplace_back(sig->outputs[k].uid, &outputs[k]);
  execute(*g, device, kOp, pack);
  return outputs;
}

// Shapes and dtypes from the graph alone, on the inputs' (meta / fake) device.
std::vector<at::Tensor> run_graph_meta(c10::string_view json_in, at::TensorList inputs) {
  const std::string_view json(json_in.data(), json_in.size());
  const std::shared_ptr<const Signature> sig = signature_of(json, text_id(json));
  check_inputs(*sig, inputs);
  std::vector<at::Tensor> outputs;
  const at::TensorOptions opts = at::TensorOptions().device(device_of(*sig, inputs));
  for (const IoTensor& out : sig->outputs) outputs.push_back(empty_output(out, opts));
  return outputs;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(dnngraph, m) {
  m.def("run_graph(str graph_json, Tensor[] inputs) -> Tensor[]");
  // Tests: run_graph fills its outputs with NaN before running; returns the previous setting.
  m.def("_run_graph_poison_outputs(bool on) -> bool", &set_poison_outputs);
}
TORCH_LIBRARY_IMPL(dnngraph, CPU, m) { m.impl("run_graph", &run_graph); }
TORCH_LIBRARY_IMPL(dnngraph, CUDA, m) { m.impl("run_graph", &run_graph); }
TORCH_LIBRARY_IMPL(dnngraph, Meta, m) { m.impl("run_graph", &run_graph_meta); }

}  // namespace dnngraph::torch_ops
