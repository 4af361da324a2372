// The CPU reference engine: runs every op of the IR, node by node, in fp64, reading and
// writing each tensor in its storage type. Virtual intermediates live in the workspace, in
// their own data type and strides, so the engine rounds exactly where the graph stores.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <new>
#include <set>
#include <utility>
#include <vector>

#include "dnngraph/engines/interface.hpp"
#include "engines/reference/kernel.hpp"
#include "engines/registry.hpp"

namespace dnngraph::reference {
namespace {

constexpr int64_t kAlign = 64;

using RunFn = Status (*)(KernelContext&);

RunFn kernel_of(ir::OpKind k) {
  switch (k) {
#define DNNGRAPH_OP_KERNEL_CASE(kind, name, Attrs, in, out) \
  case ir::OpKind::kind:                                    \
    return run_##name;
    DNNGRAPH_OPS(DNNGRAPH_OP_KERNEL_CASE)
#undef DNNGRAPH_OP_KERNEL_CASE
  }
  return nullptr;
}

// ---- memory bound: the engine computes on fp64 copies; their size is checked before any is
// made, at lowering (build), against DNNGRAPH_REFERENCE_MAX_BYTES.
constexpr int64_t kDefaultMaxBytes = int64_t{4} << 30;

int64_t max_working_bytes() {
  const char* v = std::getenv("DNNGRAPH_REFERENCE_MAX_BYTES");
  if (!v || !*v) return kDefaultMaxBytes;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  return (end && !*end && n > 0) ? n : kDefaultMaxBytes;
}

int64_t sat_add(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}
int64_t sat_mul(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}
int64_t elements(const ir::Tensor& t) {
  int64_t e = 1;
  for (int64_t d : t->dim) e = sat_mul(e, std::max<int64_t>(d, 0));
  return e;
}

// An upper estimate of one node's fp64 working memory in bytes: every port as a dense copy,
// each input once more broadcast to the largest port, conv's zero-padded input, SDPA's score
// rows (a full score matrix for the backward's bias gradient), the norms' group index.
int64_t working_bytes(const ir::Node& n) {
  int64_t total = 0, largest = 0;
  for (const auto* ports : {&n.inputs, &n.outputs})
    for (const auto& p : *ports)
      if (p.tensor) {
        total = sat_add(total, elements(p.tensor));
        largest = std::max(largest, elements(p.tensor));
      }
  total = sat_add(total, sat_mul(static_cast<int64_t>(n.inputs.size()), largest));
  switch (n.kind()) {
    case ir::OpKind::ConvFprop:
    case ir::OpKind::ConvDgrad:
    case ir::OpKind::ConvWgrad:
      total = sat_add(total, conv_padded_elements(n));
      break;
    case ir::OpKind::SdpaFwd:
    case ir::OpKind::SdpaBwd:
    case ir::OpKind::SdpaFp8Fwd:
    case ir::OpKind::SdpaFp8Bwd: {
      const ir::Tensor q = n.input(ir::Role::Q), k = n.input(ir::Role::K);
      if (q && k && q->dim.size() == 4 && k->dim.size() == 4)
        total =
            sat_add(total, sat_mul(sat_mul(q->dim[0], q->dim[1]), sat_mul(q->dim[2], k->dim[2])));
      break;
    }
    case ir::OpKind::NormFwd:
    case ir::OpKind::NormBwd:
      // The element -> statistics-group index and the members sorted by group (int64 each).
      if (const ir::Tensor x = n.input(ir::Role::X))
        total = sat_add(total, sat_mul(2, elements(x)));
      break;
    default:
      break;
  }
  return sat_mul(total, int64_t{sizeof(double)});
}

std::string mib(int64_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB"; }

Status check_memory(const ir::ValidatedGraph& g) {
  const int64_t limit = max_working_bytes();
  for (const ir::Node& n : g.nodes()) {
    const int64_t need = working_bytes(n);
    if (need > limit)
      return make_error(ErrorCode::NotSupported, "reference engine: ", ir::op_kind_name(n.kind()),
                        " '", n.name, "' of graph '", g.name(), "' needs about ",
                        need == INT64_MAX ? std::string("more than 8 EiB") : mib(need),
                        " of fp64 working memory, above the limit of ", mib(limit),
                        ": use smaller shapes, or raise DNNGRAPH_REFERENCE_MAX_BYTES (bytes)");
  }
  return Status::ok();
}

// The validated graph (immutable: later edits of the user's graph do not reach a plan) and
// where each virtual tensor lives in the workspace.
struct Program {
  ir::ValidatedGraphPtr graph;
  std::map<const ir::TensorAttrs*, int64_t> ws_offset;  // virtual tensor -> workspace offset
  std::set<const ir::TensorAttrs*> produced;            // tensors some node writes
  int64_t workspace = 0;
};

// Validation bounded every tensor's byte extent by INT64_MAX; the sum of a graph's virtual
// tensors can still exceed it.
Result<std::shared_ptr<const Program>> plan_memory(const ir::ValidatedGraphPtr& g) {
  auto p = std::make_shared<Program>();
  p->graph = g;
  for (const ir::Node& n : g->nodes())
    for (const auto& port : n.outputs) p->produced.insert(port.tensor.get());
  for (const ir::Tensor& t : g->tensors()) {
    if (!t->is_virtual) continue;
    p->ws_offset[t.get()] = p->workspace;
    const int64_t bytes = t->storage_bytes().value_or(INT64_MAX);
    const int64_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
    if (rounded < bytes || p->workspace > INT64_MAX - rounded)
      return make_error(ErrorCode::NotSupported, "reference engine: graph '", g->name(),
                        "': the virtual tensors need more than ", INT64_MAX,
                        " bytes of workspace (at tensor '", t->name, "')");
    p->workspace += rounded;
  }
  return std::shared_ptr<const Program>(std::move(p));
}

class ReferencePlan final : public Plan {
 public:
  explicit ReferencePlan(std::shared_ptr<const Program> p) : p_(std::move(p)) {}
  std::string name() const override { return "reference"; }
  int64_t workspace_size() const override { return p_->workspace; }

  Status execute(Handle& handle, const VariantPack& pack, void* workspace) override {
    if (handle.device().kind != Device::Kind::CPU)
      return make_error(ErrorCode::InvalidArgument, "reference plan: handle is on ",
                        handle.device().to_string(), ", expected a cpu handle");
    // Graph inputs whose memory an output shares (an in-place update, e.g. the frontend's RoPE
    // test writing into the slices it reads) are read from a copy taken before any node runs,
    // as a fused kernel reads each element before it writes it.
    const std::map<const ir::TensorAttrs*, std::vector<char>> staged = stage_aliased_inputs(pack);
    auto bind = [&](const ir::Tensor& t) -> Bound {
      if (t->is_virtual)
        return {t.get(), static_cast<char*>(workspace) + p_->ws_offset.at(t.get())};
      if (t->value) return {t.get(), nullptr};
      if (auto s = staged.find(t.get()); s != staged.end())
        return {t.get(), const_cast<char*>(s->second.data())};
      auto it = pack.find(t->uid);
      return {t.get(), it == pack.end() ? nullptr : it->second};
    };
    // The runtime checked the pack; re-check what a kernel would dereference.
    for (const ir::Tensor& t : p_->graph->tensors()) {
      Bound b = bind(t);
      if (!b.data && !t->value)
        return make_error(ErrorCode::InvalidArgument, "tensor '", t->name, "' (uid ", t->uid,
                          "): no buffer in the variant pack");
    }
    // The working copies were bounded at build (check_memory); an allocation failure below
    // that bound is still an error, not an escaping exception.
    try {
      for (const ir::Node& n : p_->graph->nodes()) {
        std::vector<std::pair<Role, Bound>> in, out;
        for (const auto& port : n.inputs) in.emplace_back(port.role, bind(port.tensor));
        for (const auto& port : n.outputs) out.emplace_back(port.role, bind(port.tensor));
        KernelContext ctx(n, std::move(in), std::move(out), n.compute_data_type);
        DNNGRAPH_TRY(kernel_of(n.kind())(ctx));
      }
    } catch (const std::bad_alloc&) {
      return make_error(ErrorCode::BackendError,
                        "reference engine: out of memory for the fp64 working copies "
                        "(lower DNNGRAPH_REFERENCE_MAX_BYTES so that build refuses such graphs)");
    }
    return Status::ok();
  }

 private:
  // The byte range [first, last) a non-virtual tensor's buffer spans in the pack (empty when
  // it has none). A ragged tensor's buffer may hold only the packed tokens, less than its
  // declared extent, so it has no span here (reading that extent would run past the buffer);
  // execute checks its sequences against each other and the buffer instead.
  static std::pair<const char*, const char*> span(const VariantPack& pack, const ir::Tensor& t) {
    auto it = pack.find(t->uid);
    if (t->is_virtual || t->value || t->ragged_offset || it == pack.end() || !it->second)
      return {nullptr, nullptr};
    const char* p = static_cast<const char*>(it->second);
    return {p, p + t->storage_bytes().value_or(0)};
  }

  std::map<const ir::TensorAttrs*, std::vector<char>> stage_aliased_inputs(
      const VariantPack& pack) const {
    std::map<const ir::TensorAttrs*, std::vector<char>> staged;
    std::vector<std::pair<const char*, const char*>> written;
    for (const ir::Node& n : p_->graph->nodes())
      for (const auto& port : n.outputs)
        if (auto r = span(pack, port.tensor); r.first) written.push_back(r);
    if (written.empty()) return staged;
    for (const ir::Node& n : p_->graph->nodes())
      for (const auto& port : n.inputs) {
        const ir::Tensor& t = port.tensor;
        auto r = span(pack, t);
        if (!r.first || staged.count(t.get()) || p_->produced.count(t.get())) continue;
        for (const auto& w : written)
          if (r.first < w.second && w.first < r.second) {
            staged.emplace(t.get(), std::vector<char>(r.first, r.second));
            break;
          }
      }
    return staged;
  }

  std::shared_ptr<const Program> p_;
};

class ReferenceCandidate final : public Candidate {
 public:
  explicit ReferenceCandidate(std::shared_ptr<const Program> p, HeurMode mode) : p_(std::move(p)) {
    info_.engine = "reference";
    info_.name = "reference";
    info_.source = mode;
    info_.numerical_notes = {"FP64_ACCUMULATION"};
  }
  const CandidateInfo& info() const override { return info_; }
  Status check_support() override { return Status::ok(); }
  Result<std::unique_ptr<Plan>> build() override {
    return std::unique_ptr<Plan>(std::make_unique<ReferencePlan>(p_));
  }

 private:
  std::shared_ptr<const Program> p_;
  CandidateInfo info_;
};

class ReferenceLowered final : public LoweredGraph {
 public:
  explicit ReferenceLowered(std::shared_ptr<const Program> p) : p_(std::move(p)) {}
  Result<std::vector<std::unique_ptr<Candidate>>> candidates(HeurMode mode) override {
    std::vector<std::unique_ptr<Candidate>> c;
    c.push_back(std::make_unique<ReferenceCandidate>(p_, mode));
    return c;
  }

 private:
  std::shared_ptr<const Program> p_;
};

class ReferenceEngine final : public Engine {
 public:
  std::string_view name() const override { return "reference"; }
  bool runs_on(const Device& d) const override { return d.kind == Device::Kind::CPU; }
  // Every op of the IR runs here; the only support limits are the workspace's size and the
  // fp64 working memory (check_memory).
  Result<std::unique_ptr<LoweredGraph>> lower(const ir::ValidatedGraphPtr& g, Handle&) override {
    DNNGRAPH_TRY(check_memory(*g));
    DNNGRAPH_ASSIGN_OR_RETURN(auto program, plan_memory(g));
    return std::unique_ptr<LoweredGraph>(std::make_unique<ReferenceLowered>(program));
  }
  Result<std::unique_ptr<PlanTimer>> make_timer(Handle&) override { return make_host_timer(); }
};

Engine& engine() {
  static ReferenceEngine e;
  return e;
}
// Asked first; runs on CPU handles.
const EngineRegistrar kRegistrar(0, engine);

}  // namespace
}  // namespace dnngraph::reference
