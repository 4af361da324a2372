// The CPU reference engine: runs every op of the IR, node by node, in fp64, reading and
// writing each tensor in its storage type. Virtual intermediates live in the workspace, in
// their own data type and strides, so the engine rounds exactly where the graph stores.
#include <map>

#include "dnngraph/engines/interface.hpp"
#include "engines/reference/kernel.hpp"
#include "engines/registry.hpp"

namespace dnngraph::reference {
namespace {

constexpr int64_t kAlign = 64;

struct Family {
  Status (*check)(const ir::Node&);
  Status (*run)(KernelContext&);
};

Family family_of(ir::OpKind k) {
  switch (k) {
    case ir::OpKind::ConvFprop:
    case ir::OpKind::ConvDgrad:
    case ir::OpKind::ConvWgrad:
      return {check_conv, run_conv};
    case ir::OpKind::Matmul:
      return {check_matmul, run_matmul};
    case ir::OpKind::Pointwise:
      return {check_pointwise, run_pointwise};
    case ir::OpKind::Reduction:
      return {check_reduction, run_reduction};
    case ir::OpKind::NormFwd:
    case ir::OpKind::NormBwd:
      return {check_norm, run_norm};
    case ir::OpKind::Softmax:
      return {check_softmax, run_softmax};
    case ir::OpKind::SdpaFwd:
    case ir::OpKind::SdpaBwd:
      return {check_sdpa, run_sdpa};
  }
  return {nullptr, nullptr};
}

// A snapshot of the validated graph: later edits of the user's graph do not reach a plan.
struct Program {
  std::vector<ir::Node> nodes;                          // tensors re-pointed at `tensors`
  std::vector<ir::Tensor> tensors;                      // private copies
  std::map<const ir::TensorAttrs*, int64_t> ws_offset;  // virtual tensor -> workspace offset
  int64_t workspace = 0;
};

std::shared_ptr<const Program> snapshot(const ir::Graph& g) {
  auto p = std::make_shared<Program>();
  std::map<const ir::TensorAttrs*, ir::Tensor> copy;
  auto clone = [&](const ir::Tensor& t) -> ir::Tensor {
    if (!t) return nullptr;
    auto it = copy.find(t.get());
    if (it != copy.end()) return it->second;
    auto c = std::make_shared<ir::TensorAttrs>(*t);
    copy.emplace(t.get(), c);
    p->tensors.push_back(c);
    if (c->is_virtual) {
      p->ws_offset[c.get()] = p->workspace;
      const int64_t bytes = c->storage_elements() * data_type_size(c->data_type);
      p->workspace += (bytes + kAlign - 1) / kAlign * kAlign;
    }
    return c;
  };
  for (const ir::Node& n : g.nodes()) {
    ir::Node c = n;
    for (auto& port : c.inputs) port.tensor = clone(port.tensor);
    for (auto& port : c.outputs) port.tensor = clone(port.tensor);
    p->nodes.push_back(std::move(c));
  }
  return p;
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
    auto bind = [&](const ir::Tensor& t) -> Bound {
      if (t->is_virtual)
        return {t.get(), static_cast<char*>(workspace) + p_->ws_offset.at(t.get())};
      if (t->value) return {t.get(), nullptr};
      auto it = pack.find(t->uid);
      return {t.get(), it == pack.end() ? nullptr : it->second};
    };
    // The runtime checked the pack; re-check what a kernel would dereference.
    for (const ir::Tensor& t : p_->tensors) {
      Bound b = bind(t);
      if (!b.data && !t->value)
        return make_error(ErrorCode::InvalidArgument, "tensor '", t->name, "' (uid ", t->uid,
                          "): no buffer in the variant pack");
    }
    for (const ir::Node& n : p_->nodes) {
      std::vector<std::pair<Role, Bound>> in, out;
      for (const auto& port : n.inputs) in.emplace_back(port.role, bind(port.tensor));
      for (const auto& port : n.outputs) out.emplace_back(port.role, bind(port.tensor));
      KernelContext ctx(n, std::move(in), std::move(out), n.compute_data_type);
      DNNGRAPH_TRY(family_of(n.kind()).run(ctx));
    }
    return Status::ok();
  }

 private:
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
  Result<std::unique_ptr<LoweredGraph>> lower(const ir::Graph& g, Handle&) override {
    if (!g.is_validated())
      return make_error(ErrorCode::Internal, "reference engine: graph '", g.name(),
                        "' must be validated before lowering");
    for (const ir::Node& n : g.nodes()) DNNGRAPH_TRY(family_of(n.kind()).check(n));
    return std::unique_ptr<LoweredGraph>(std::make_unique<ReferenceLowered>(snapshot(g)));
  }
};

Engine& engine() {
  static ReferenceEngine e;
  return e;
}
// Asked first; runs on CPU handles.
const EngineRegistrar kRegistrar(0, engine);

}  // namespace
}  // namespace dnngraph::reference
