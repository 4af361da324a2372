// The cuDNN engine: lowers an ir::ValidatedGraph into one cuDNN operation graph, proposes the
// engine configs of heuristics modes A / B / FALLBACK as candidates, checks support by
// finalizing an execution plan, and builds plans (plan.cpp runs them).
#include <algorithm>
#include <initializer_list>
#include <map>
#include <mutex>
#include <set>

#include <cuda_runtime_api.h>

#include "dnngraph/engines/cudnn.hpp"
#include "dnngraph/ir/sdpa.hpp"
#include "dnngraph/storage.hpp"
#include "engines/cudnn/plan.hpp"
#include "engines/registry.hpp"

namespace dnngraph::cudnn {
namespace {

// ---------------------------------------------------------------- lowering
Status lower_node(LowerContext& cx, const ir::Node& n) {
  switch (n.kind()) {
#define DNNGRAPH_OP_LOWER_CASE(kind, name, Attrs, in, out) \
  case ir::OpKind::kind:                                   \
    return lower_##name(cx, n);
    DNNGRAPH_OPS(DNNGRAPH_OP_LOWER_CASE)
#undef DNNGRAPH_OP_LOWER_CASE
  }
  return make_error(ErrorCode::Internal, "op '", n.name, "': unknown kind");
}

std::string describe_graph(const ir::ValidatedGraph& g) {
  std::string s = "graph '" + g.name() + "' (";
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (i == 3) {
      s += ", ...";
      break;
    }
    s +=
        detail::cat(i ? ", " : "", op_kind_name(g.nodes()[i].kind()), " '", g.nodes()[i].name, "'");
  }
  return s + ")";
}

// CUDNN_HEUR_MODE_* in HeurMode order.
constexpr std::array<cudnnBackendHeurMode_t, 3> kHeurModes = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B,
                                                              CUDNN_HEUR_MODE_FALLBACK};

cudnnBackendHeurMode_t heur_of(HeurMode m) { return entry_of(kHeurModes, m, CUDNN_HEUR_MODE_A); }

// Engine configs proposed by one heuristics mode, best first.
Result<std::vector<Descriptor>> engine_configs(const LoweredState& st, HeurMode mode) {
  const std::string what = detail::cat(st.what, " heuristics ", heur_mode_name(mode));
  DNNGRAPH_ASSIGN_OR_RETURN(auto hd, Descriptor::create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, what));
  const cudnnBackendHeurMode_t m = heur_of(mode);
  DNNGRAPH_TRY(hd.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, st.op_graph));
  DNNGRAPH_TRY(hd.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, m));
  DNNGRAPH_TRY(set_device_properties(hd, DevicePropUse::Heuristics, st.device_properties));
  DNNGRAPH_TRY(set_sm_count_target(hd, SmCountUse::Heuristics, st.sm_count_target));
  DNNGRAPH_TRY(hd.finalize(ErrorCode::NotSupported));
  int64_t count = 0;
  DNNGRAPH_TRY(
      hd.get(CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr));
  std::vector<Descriptor> cfgs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    auto c =
        Descriptor::create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, detail::cat(what, " config ", i));
    if (!c) return c.status();
    raw.push_back(c->get());
    cfgs.push_back(std::move(c.value()));
  }
  if (count > 0) {
    int64_t got = 0;
    DNNGRAPH_TRY(hd.get(CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                        raw.data()));
    cfgs.resize(static_cast<size_t>(std::min(got, count)));
  }
  return cfgs;
}

// Whether the graph has a node of one of `kinds`.
bool has(const ir::ValidatedGraph& g, std::initializer_list<ir::OpKind> kinds) {
  return std::any_of(g.nodes().begin(), g.nodes().end(), [&](const ir::Node& n) {
    return std::find(kinds.begin(), kinds.end(), n.kind()) != kinds.end();
  });
}

// Engine configs (default knobs) of every engine cuDNN holds that accepts the graph, in global
// index order. Used when a heuristics mode proposes nothing: cuDNN's heuristics may give no
// config for a graph that one of its engines still runs (docs/cudnn-engine.md). The
// engine descriptors are kept in `st` for as long as the configs that refer to them.
// `count` receives how many engines were asked.
Result<std::vector<Descriptor>> enumerated_configs(LoweredState& st, int64_t& count) {
  int64_t n = 0;
  DNNGRAPH_TRY(st.op_graph.get(CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, CUDNN_TYPE_INT64, 1,
                               &n, &count));
  std::vector<Descriptor> cfgs;
  for (int64_t id = 0; id < count; ++id) {
    auto ed = finalized_engine(st, id);
    if (!ed) {
      if (ed.status().code() == ErrorCode::NotSupported) continue;  // it cannot run the graph
      return ed.status();
    }
    DNNGRAPH_ASSIGN_OR_RETURN(
        auto cfg, Descriptor::create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, ed->what() + " config"));
    DNNGRAPH_TRY(cfg.set(CUDNN_ATTR_ENGINECFG_ENGINE, ed.value()));
    if (!cfg.finalize(ErrorCode::NotSupported)) continue;
    st.engines.push_back(std::move(ed).value());
    cfgs.push_back(std::move(cfg));
  }
  return cfgs;
}

// A note for a refusal of a graph with FP4_E2M1 tensors (empty without one): cuDNN runs FP4
// only in block-scaled engines that need FP4 tensor cores, so on other GPUs every FP4 graph is
// refused, and the generic reason would not say so.
std::string fp4_note(const ir::ValidatedGraph& g) {
  for (const auto& t : g.tensors())
    if (t->data_type == DataType::FP4_E2M1)
      return detail::cat(
          "; the graph has FP4_E2M1 tensor '", t->name,
          "': cuDNN runs FP4 only in its block-scaled engines, on GPUs with FP4 tensor cores "
          "(docs/cudnn-engine.md says which); on other GPUs run the graph on the reference engine "
          "(a cpu handle)");
  return "";
}

// Why nothing can run the graph: neither heuristics nor any of the `count` engines of the
// library took it.
Status no_engine(const LoweredState& st, HeurMode mode, int64_t count) {
  const ir::ValidatedGraph& g = st.cx->graph();
  std::string hint = fp4_note(g);
  if (has(g, {ir::OpKind::Reduction, ir::OpKind::Softmax}) &&
      !has(g, {ir::OpKind::Matmul, ir::OpKind::ConvFprop, ir::OpKind::ConvDgrad,
               ir::OpKind::ConvWgrad, ir::OpKind::SdpaFwd, ir::OpKind::SdpaBwd}))
    hint +=
        ": cuDNN fuses reductions (and so softmax) only into the epilogue of a matmul or "
        "convolution, so a graph of reductions and pointwise ops alone has no engine; run it "
        "on the reference engine (a cpu handle) or after a matmul or convolution "
        "(docs/cudnn-engine.md)";
  if (st.sm_count_target != ir::Graph::kAllSms)
    hint += detail::cat(
        hint.empty() ? ": " : "; ", "the graph asks for plans on at most ", st.sm_count_target,
        " SMs (sm_count), which only some engines can target: leave sm_count unset to use "
        "every SM");
  return make_error(ErrorCode::NotSupported, st.what, ": cuDNN ", backend_version_string(),
                    " has no engine for this graph (heuristics ", heur_mode_name(mode),
                    " proposed none and none of its ", count, " engines accepts it)", hint);
}

// "eng<id> KNOB=v ..." plus the notes.
Result<CandidateInfo> describe_config(const Descriptor& cfg, HeurMode mode) {
  CandidateInfo info;
  info.engine = "cudnn";
  info.source = mode;
  DNNGRAPH_ASSIGN_OR_RETURN(
      auto ed, Descriptor::create(CUDNN_BACKEND_ENGINE_DESCRIPTOR, cfg.what() + " engine"));
  cudnnBackendDescriptor_t eraw = ed.get();
  int64_t n = 0;
  DNNGRAPH_TRY(cfg.get(CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &eraw));
  int64_t id = -1;
  DNNGRAPH_TRY(ed.get(CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &id));
  info.name = "eng" + std::to_string(id);
  info.engine_id = id;
  info.sm_count_target = reported_sm_count_target(ed);
  std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT> notes{};
  if (ed.get(CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
             static_cast<int64_t>(notes.size()), &n, notes.data()))
    for (int64_t i = 0; i < n; ++i)
      info.numerical_notes.emplace_back(numerical_note_name(static_cast<int>(notes[i])));
  std::array<cudnnBackendBehaviorNote_t, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT> beh{};
  if (ed.get(CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
             static_cast<int64_t>(beh.size()), &n, beh.data()))
    for (int64_t i = 0; i < n; ++i)
      info.behavior_notes.emplace_back(behavior_note_name(static_cast<int>(beh[i])));
  // Knob choices.
  std::vector<Descriptor> knobs;
  std::vector<cudnnBackendDescriptor_t> kraw;
  for (int i = 0; i < CUDNN_KNOB_TYPE_COUNTS; ++i) {
    DNNGRAPH_ASSIGN_OR_RETURN(
        auto k, Descriptor::create(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, cfg.what() + " knob"));
    kraw.push_back(k.get());
    knobs.push_back(std::move(k));
  }
  int64_t nk = 0;
  if (cfg.get(CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
              static_cast<int64_t>(kraw.size()), &nk, kraw.data())) {
    for (int64_t i = 0; i < nk && i < static_cast<int64_t>(knobs.size()); ++i) {
      cudnnBackendKnobType_t type{};
      int64_t value = 0;
      if (!knobs[static_cast<size_t>(i)].get(CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE,
                                             1, &n, &type))
        continue;
      if (!knobs[static_cast<size_t>(i)].get(CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1,
                                             &n, &value))
        continue;
      info.name += " " + knob_name(static_cast<int>(type)) + "=" + std::to_string(value);
      info.knobs.emplace_back(knob_name(static_cast<int>(type)), value);
    }
  }
  return info;
}

Result<Descriptor> finalize_plan(const LoweredState& st, cudnnBackendDescriptor_t cfg,
                                 const std::string& name) {
  DNNGRAPH_ASSIGN_OR_RETURN(
      auto pd, Descriptor::create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
                                  detail::cat("cudnn candidate '", name, "' for ", st.what)));
  // Deviceless: the engine config carries the target (its engine was given it), as in the
  // frontend, which gives a plan built from a config no handle.
  if (st.build_handle)
    DNNGRAPH_TRY(pd.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, st.build_handle));
  DNNGRAPH_TRY(pd.set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfg));
  std::unique_lock<std::mutex> cache_lock;
  if (st.kernel_cache) {
    DNNGRAPH_ASSIGN_OR_RETURN(auto kc, lock_kernel_cache(st));
    cache_lock = std::move(kc.lock);
    DNNGRAPH_TRY(pd.set(CUDNN_ATTR_EXECUTION_PLAN_KERNEL_CACHE, kc.desc));
  }
  DNNGRAPH_TRY(pd.finalize(ErrorCode::NotSupported));
  return pd;
}

// ---------------------------------------------------------------- candidates
}  // namespace

int64_t device_attribute(int device, cudaDeviceAttr attr) {
  static std::mutex mu;
  static std::map<std::pair<int, int>, int64_t> known;
  std::lock_guard<std::mutex> lock(mu);
  const std::pair<int, int> key{device, static_cast<int>(attr)};
  auto it = known.find(key);
  if (it != known.end()) return it->second;
  int v = 0;
  if (cudaDeviceGetAttribute(&v, attr, device) != cudaSuccess) {
    (void)cudaGetLastError();
    v = -1;  // unknown: the check is left to cuDNN
  }
  return known[key] = v;
}

namespace {

// The most shared memory one block may opt into on `device`.
int64_t max_shared_memory(int device) {
  return device_attribute(device, cudaDevAttrMaxSharedMemoryPerBlockOptin);
}

// Whether the loaded cuDNN (and the headers dnngraph was built with) answer an engine config's
// workspace and shared memory needs without finalizing a plan (cuDNN >= 9.2).
bool config_queries_available() {
#if CUDNN_VERSION >= 90200
  return load_info().version >= 90200;
#else
  return false;
#endif
}

class CudnnCandidate final : public Candidate {
 public:
  CudnnCandidate(std::shared_ptr<LoweredState> st, Descriptor cfg, CandidateInfo info)
      : st_(std::move(st)), cfg_(std::move(cfg)), info_(std::move(info)) {}
  const CandidateInfo& info() const override { return info_; }

  // Cheap: reads the engine config's shared memory and workspace needs (no kernel is
  // compiled). Only where cuDNN cannot answer that does it finalize the plan.
  Status check_support() override {
    if (plan_ || checked_) return Status::ok();
    if (!config_queries_available()) {
      DNNGRAPH_ASSIGN_OR_RETURN(auto p, finalize_plan(*st_, cfg_.get(), info_.name));
      plan_ = std::move(p);
      return Status::ok();
    }
#if CUDNN_VERSION >= 90200
    int64_t n = 0;
    int32_t smem = 0;
    const int64_t limit =
        st_->device_properties ? st_->target_smem_optin : max_shared_memory(st_->device);
    if (limit >= 0 &&
        cfg_.get(CUDNN_ATTR_ENGINECFG_SHARED_MEMORY_USED, CUDNN_TYPE_INT32, 1, &n, &smem) &&
        smem > limit)
      return make_error(ErrorCode::NotSupported, "cudnn candidate '", info_.name, "' for ",
                        st_->what, " needs ", smem, " bytes of shared memory per block but ",
                        st_->device_name, " allows ", limit, "; another candidate may fit");
    int64_t ws = 0;
    if (cfg_.get(CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &ws))
      info_.workspace_size = plan_workspace(*st_, ws);
#endif
    checked_ = true;
    return Status::ok();
  }

  Result<std::unique_ptr<Plan>> build() override {
    if (!plan_) {
      auto p = finalize_plan(*st_, cfg_.get(), info_.name);
      if (!p && p.status().code() == ErrorCode::NotSupported) {
        if (const std::string note = fp4_note(st_->cx->graph()); !note.empty())
          return make_error(ErrorCode::NotSupported, p.status().message(), note);
      }
      DNNGRAPH_TRY(p.status());
      plan_ = std::move(p).value();
    }
    return make_plan(st_, std::move(plan_), info_.name);
  }

 private:
  std::shared_ptr<LoweredState> st_;
  Descriptor cfg_;
  CandidateInfo info_;
  bool checked_ = false;
  Descriptor plan_;  // finalized by build (or by check_support where cuDNN is older than 9.2)
};

class CudnnLoweredGraph final : public LoweredGraph {
 public:
  explicit CudnnLoweredGraph(std::shared_ptr<LoweredState> st) : st_(std::move(st)) {}
  // Used by dynamic-shape graphs only (as in the frontend); others compile their own kernels.
  Status set_kernel_cache(const KernelCachePtr& cache) override {
    if (!st_->cx->graph().dynamic_shape_enabled()) return Status::ok();
    DNNGRAPH_TRY(sdpa_kernel_cache_rule(st_->cx->graph()));
    st_->kernel_cache = cache;
    return Status::ok();
  }
  Result<std::vector<std::unique_ptr<Candidate>>> candidates(HeurMode mode) override {
    Result<std::vector<Descriptor>> cfgs = std::vector<Descriptor>{};
    if (mode == HeurMode::A && st_->has_configs_a) {
      cfgs = std::move(st_->configs_a);  // asked once while lowering
      st_->has_configs_a = false;
    } else {
      cfgs = engine_configs(*st_, mode);
    }
    if (!cfgs) return cfgs.status();
    if (cfgs->empty()) {
      int64_t count = 0;
      cfgs = enumerated_configs(*st_, count);
      if (!cfgs) return cfgs.status();
      if (cfgs->empty()) return no_engine(*st_, mode, count);
    }
    std::vector<std::unique_ptr<Candidate>> out;
    std::set<std::string> seen;
    for (auto& c : cfgs.value()) {
      DNNGRAPH_ASSIGN_OR_RETURN(auto info, describe_config(c, mode));
      if (!seen.insert(info.name).second) continue;
      out.push_back(std::make_unique<CudnnCandidate>(st_, std::move(c), std::move(info)));
    }
    return out;
  }
  Result<int64_t> engine_count() override { return cudnn::engine_count(*st_); }
  Result<std::vector<KnobInfo>> engine_knobs(int64_t engine) override {
    return cudnn::engine_knobs(*st_, engine);
  }
  Result<std::unique_ptr<Candidate>> engine_candidate(int64_t engine,
                                                      const KnobChoices& knobs) override {
    DNNGRAPH_ASSIGN_OR_RETURN(auto cfg, engine_config(*st_, engine, knobs));
    DNNGRAPH_ASSIGN_OR_RETURN(auto info, describe_config(cfg, HeurMode::A));
    return std::unique_ptr<Candidate>(
        std::make_unique<CudnnCandidate>(st_, std::move(cfg), std::move(info)));
  }

 private:
  std::shared_ptr<LoweredState> st_;
};

}  // namespace

std::span<const LoweringVariant> lowering_variants(const ir::ValidatedGraph& g) {
  static constexpr LoweringVariant kDefault[] = {{"default"}};
  // SDPA forward, in the order tried.
  // The stats are always computed (into a virtual tensor in inference), as the frontend's
  // graph does: without them cuDNN 9.19's engine 2 hit an illegal memory access on the H200
  // (padding + bottom-right causal mask, s_q 1024 > s_kv 24, fp16;
  // GpuSdpaForward.InferencePaddingCausalBottomRightSqFarAboveSkv).
  static constexpr LoweringVariant kSdpa[] = {
      {"sdpa: P in V's type, softmax stats always kept", true, false},
      {"sdpa: P in V's type", false, false},
      {"sdpa: P in float", false, true},
  };
  if (has(g, {ir::OpKind::SdpaFwd})) return kSdpa;
  // FP8 forward: P is always FP8, so only the stats form varies.
  static constexpr LoweringVariant kSdpaFp8[] = {
      {"sdpa_fp8", false, false},
      {"sdpa_fp8: softmax stats always kept", true, false},
  };
  if (has(g, {ir::OpKind::SdpaFp8Fwd})) return kSdpaFp8;
  // SDPA backward: the frontend's float dQ accumulator first (no dS in the workspace), then dQ
  // straight from its matmul. dBias and ragged tensors take only the second form (the frontend
  // too needs it for dBias).
  static constexpr LoweringVariant kSdpaBwd[] = {
      {"sdpa_backward: dQ through a float accumulator", false, false, true},
      {"sdpa_backward: dQ from its matmul", false, false, false},
  };
  const bool accumulator_fits =
      std::all_of(g.nodes().begin(), g.nodes().end(), [](const ir::Node& n) {
        if (n.kind() != ir::OpKind::SdpaBwd) return true;
        if (n.output(Role::DBIAS)) return false;
        for (auto [role, offsets] : ir::kSdpaRaggedRoles)
          if (n.input(offsets)) return false;
        return true;
      });
  if (has(g, {ir::OpKind::SdpaBwd}) && accumulator_fits) return kSdpaBwd;
  return kDefault;
}

namespace {

// Lowers every node and finalizes the operation graph.
Result<std::shared_ptr<LoweredState>> lower_once(const ir::ValidatedGraphPtr& gp,
                                                 const ViewMap& views, HandleState& hs,
                                                 const LoweringVariant& variant) {
  const ir::ValidatedGraph& g = *gp;
  auto st = std::make_shared<LoweredState>();
  st->what = describe_graph(g);
  st->device = hs.device;
  st->build_handle = hs.handle;
  st->device_properties = hs.device_properties.get();
  st->device_name = hs.target ? hs.target->describe() : detail::cat("cuda:", hs.device);
  if (hs.target) st->target_smem_optin = hs.target->max_shared_memory_per_block_optin();
  st->sm_count_target = g.sm_count();
  st->cx = std::make_unique<LowerContext>(gp, views);
  st->cx->variant = variant;
  for (const auto& n : g.nodes()) DNNGRAPH_TRY(lower_node(*st->cx, n));
  DNNGRAPH_ASSIGN_OR_RETURN(auto od,
                            Descriptor::create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, st->what));
  std::vector<cudnnBackendDescriptor_t> ops;
  for (const auto& o : st->cx->ops()) ops.push_back(o.get());
  if (hs.handle)  // optional since cuDNN 9.8: a deviceless build has none
    DNNGRAPH_TRY(od.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, hs.handle));
  DNNGRAPH_TRY(od.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops));
  if (g.dynamic_shape_enabled()) {
    if (load_info().version < 90400)
      return make_error(ErrorCode::NotSupported, st->what,
                        ": dynamic shapes need cuDNN 9.4 or "
                        "later, this is ",
                        backend_version_string());
    const bool on = true;
    DNNGRAPH_TRY(
        od.set(CUDNN_ATTR_OPERATIONGRAPH_IS_DYNAMIC_SHAPE_ENABLED, CUDNN_TYPE_BOOLEAN, on));
  }
  DNNGRAPH_TRY(od.finalize(ErrorCode::NotSupported));
  st->op_graph = std::move(od);

  // Variant pack template: every non-virtual tensor a cuDNN operation reads or writes, plus
  // internal constants and the views of window ops. A window op emits no operation (view.cpp):
  // its input is bound only when another op reads it too (cuDNN refuses a variant pack that
  // carries a uid no operation uses), and its output's view is bound to the input's pointer
  // plus the offset.
  std::set<int64_t> seen;
  for (const auto& n : g.nodes()) {
    if (is_window_op(n.kind())) continue;  // lowered as a view: no operation
    for (const auto* ports : {&n.inputs, &n.outputs})
      for (const auto& p : *ports) {
        const ir::Tensor& t = p.tensor;
        if (!t || t->is_virtual || !seen.insert(t->uid).second) continue;
        // elem_size is read for pass-by-value tensors only (never FP4: validate() refuses it; a
        // Boolean scalar takes a byte: one element rounded up to whole bytes).
        st->io.push_back({t->uid, t->name, t->is_pass_by_value, -1,
                          data_type_bytes(t->data_type, 1).value_or(0)});
      }
  }
  for (const auto& d : st->cx->derived()) {
    IoSlot slot{d.uid, d.name, false, -1, 0};
    slot.source_uid = d.source_uid;
    slot.source_name = d.source_name;
    slot.byte_offset = d.byte_offset;
    slot.alignment = d.alignment;
    st->io.push_back(std::move(slot));
  }
  for (const auto& sc : st->cx->scratch()) {
    IoSlot slot{sc.uid, sc.name, false, -1, 0};
    slot.scratch_offset = sc.offset;
    st->io.push_back(std::move(slot));
  }
  st->scratch_bytes = st->cx->scratch_bytes();
  for (const auto& c : st->cx->constants()) {
    DataType type = c.value.type;
    std::string name = "constant uid " + std::to_string(c.uid);
    for (const auto& t : g.tensors())
      if (t->uid_assigned && t->uid == c.uid) type = t->data_type, name = t->name;
    DNNGRAPH_ASSIGN_OR_RETURN(auto bytes, scalar_bytes(c.value, type, name));
    st->constant_bytes.push_back(bytes);
    const int idx = static_cast<int>(st->constant_bytes.size() - 1);
    auto it =
        std::find_if(st->io.begin(), st->io.end(), [&](const IoSlot& s) { return s.uid == c.uid; });
    if (it != st->io.end())
      it->constant = idx;
    else
      st->io.push_back({c.uid, name, true, idx, data_type_bytes(type, 1).value_or(0)});
  }
  if (hs.target && !st->cx->device_constants().empty())
    return make_error(ErrorCode::NotSupported, st->what, ": its cuDNN form keeps constant '",
                      st->cx->device_constants().front().name,
                      "' in GPU memory, so it cannot be built without a GPU (deviceless); build "
                      "it with a handle on the GPU");
  for (const auto& c : st->cx->device_constants()) {
    DNNGRAPH_ASSIGN_OR_RETURN(
        void* p, upload_device_constant(st->device, c.values, st->what + ": " + c.name));
    st->device_buffers.push_back(p);
    const int idx = static_cast<int>(st->device_buffers.size() - 1);
    st->io.push_back({c.uid, c.name, false, -1, data_type_size(DataType::Float), idx});
  }
  std::sort(st->io.begin(), st->io.end(),
            [](const IoSlot& a, const IoSlot& b) { return a.uid < b.uid; });
  return st;
}

class CudnnEngine final : public Engine {
 public:
  std::string_view name() const override { return "cudnn"; }
  bool runs_on(const Device& d) const override { return d.kind == Device::Kind::CUDA; }
  BackendInfo backend_info() const override {
    const CudnnLoadInfo& l = load_info();
    return {l.loaded, l.version, l.path, l.error};
  }

  Status precheck(const ir::ValidatedGraph& g) const override {
    for (const auto& n : g.nodes()) {
      DNNGRAPH_TRY(sdpa_precheck(n));
      DNNGRAPH_TRY(view_precheck(g, n));
    }
    return Status::ok();
  }

  Result<std::unique_ptr<LoweredGraph>> lower(const ir::ValidatedGraphPtr& g,
                                              Handle& handle) override {
    DNNGRAPH_ASSIGN_OR_RETURN(auto st, lower_state(g, handle));
    return std::unique_ptr<LoweredGraph>(std::make_unique<CudnnLoweredGraph>(st));
  }

  bool loads_plans() const override { return true; }
  Result<std::unique_ptr<PlanTimer>> make_timer(Handle& handle) override {
    return make_cuda_timer(handle);
  }
  Result<std::unique_ptr<Plan>> deserialize_plan(const ir::ValidatedGraphPtr& g, Handle& handle,
                                                 std::string_view bytes) override {
    DNNGRAPH_ASSIGN_OR_RETURN(auto st, lower_state(g, handle));
    DNNGRAPH_ASSIGN_OR_RETURN(auto pd, Descriptor::create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
                                                          "deserialized plan for " + st->what));
    if (st->build_handle)
      DNNGRAPH_TRY(pd.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, st->build_handle));
    else
      DNNGRAPH_TRY(set_device_properties(pd, DevicePropUse::Plan, st->device_properties));
    DNNGRAPH_TRY(pd.set(CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR,
                        static_cast<int64_t>(bytes.size()), bytes.data()));
    DNNGRAPH_TRY(pd.finalize(ErrorCode::NotSupported));
    return make_plan(st, std::move(pd), "deserialized");
  }

 private:
  Result<std::shared_ptr<LoweredState>> lower_state(const ir::ValidatedGraphPtr& gp,
                                                    Handle& handle) {
    if (!api())
      return make_error(ErrorCode::NotSupported,
                        "the cuDNN engine is unavailable: ", load_info().error);
    const ir::ValidatedGraph& g = *gp;
    DNNGRAPH_TRY(check_sm_count_target(g, handle));
    DNNGRAPH_ASSIGN_OR_RETURN(auto hs, handle_state(handle));
    DNNGRAPH_ASSIGN_OR_RETURN(auto views, canonicalize(g));
    // Some graphs have several equivalent lowerings; keep the first cuDNN proposes an engine
    // for.
    const std::span<const LoweringVariant> variants = lowering_variants(g);
    for (const LoweringVariant& v : variants) {
      auto lowered = lower_once(gp, views, *hs, v);
      if (!lowered && lowered.status().code() == ErrorCode::NotSupported) {
        if (const std::string note = fp4_note(g); !note.empty())
          return make_error(ErrorCode::NotSupported, lowered.status().message(), note);
      }
      DNNGRAPH_ASSIGN_OR_RETURN(auto st, std::move(lowered));
      if (&v == &variants.back()) return st;
      auto cfgs = engine_configs(*st, HeurMode::A);
      if (cfgs && !cfgs->empty()) {
        st->configs_a = std::move(cfgs.value());
        st->has_configs_a = true;
        return st;
      }
    }
    return make_error(ErrorCode::Internal, describe_graph(g), ": no lowering variant to try");
  }
};

Engine& engine() {
  static CudnnEngine e;
  return e;
}
// Asked after the reference engine (rank 0); runs on CUDA handles.
const EngineRegistrar kRegistrar(10, engine);

}  // namespace
}  // namespace dnngraph::cudnn
