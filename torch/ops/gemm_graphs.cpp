// The graphs of dnngraph::linear_act and matmul_epilogue (see gemm.hpp, and gemm.cpp for the
// ops). Forward: one graph Y = act(alpha * A @ B + bias) [+ AMAX] [+ the pre-activation Z for
// training]. Backward: two graphs, each with dZ = act'(Z) * dY fused in front of its product
//   data  : dA = alpha * dZ @ B^T   (summed over the batch where A was broadcast)
//   weight: dB = alpha * A^T @ dZ,  dbias = sum(dZ) over the dims bias was broadcast along,
// or, where the engine has no plan for those, dZ (and dbias) from one graph and then the plain
// matmul graphs.
#include <atomic>
#include <mutex>
#include <set>
#include <string>

#include "dnngraph/log.hpp"

#include "core/shape_rules.hpp"
#include "ops/gemm.hpp"

namespace dnngraph::torch_ops {

namespace {
std::atomic<bool> g_unfused_backward{false};
}  // namespace
bool unfused_backward() { return g_unfused_backward.load(std::memory_order_relaxed); }
void set_unfused_backward(bool v) { g_unfused_backward.store(v); }
namespace {
// Logs message() at info level the first time (op, cause) is seen; nothing is built while info
// logging is off (these notes sit on the backward's hot path).
template <class Message>
void log_info_once(const char* op, const char* cause, Message message) {
  if (!log_enabled(LogLevel::Info)) return;
  static std::mutex mu;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mu);
  if (said.insert(std::string(op) + '\n' + cause).second) log_message(LogLevel::Info, message());
}
}  // namespace
void note_unfused(const char* op, const Status& why) {
  log_info_once(op, "unfused", [&] {
    return std::string("dnngraph::") + op +
           ": no plan for a fused backward graph; running the unfused graphs (dZ written once). "
           "Why: " +
           why.message();
  });
}
void note_aten_part(const char* op, const char* part, const Status& why) {
  log_info_once(op, part, [&] {
    return std::string("dnngraph::") + op + ": " + part +
           " runs as ATen's kernels, the ones eager PyTorch runs for it. Why: " + why.message();
  });
}

bool pointwise_graph_on(const at::Device& device, const char* op, const char* part) {
  if (!device.is_cuda()) return true;
  static const Status why =
      make_error(ErrorCode::NotSupported,
                 "a graph of pointwise ops alone is not sent to the GPU engine by the torch ops "
                 "(docs/performance.md, \"Training: what runs where\")");
  note_aten_part(op, part, why);
  return false;
}

Tensor unfused_dz(const char* op, Act act, const Tensor& dy, const Tensor& saved,
                  const Tensor& dbias, at::MemoryFormat format) {
  enum Uid : int64_t { DY = 1, SAVED = 2, DZ = 100, DBIAS = 101 };
  const bool has_act = act != Act::None;
  if (!has_act && !dbias.defined()) return dy;
  Tensor dz = has_act ? at::empty(dy.sizes(), dy.options().memory_format(format)) : dy;
  if (!dbias.defined() && !pointwise_graph_on(dy.device(), op, "the activation derivative")) {
    aten_act_backward_out(act, dz, dy, saved);
    return dz;
  }
  Key key("unfused_dz");
  key.add(dy).add(saved).add(dz).add(dbias).add(static_cast<int64_t>(act)).add_device(dy.device());
  auto g = cached_graph(key, dy.device(), op, [&](Graph& gr) {
    set_numerics(gr, dy);
    ir::Tensor d = tensor_like(gr, DY, "dy", dy);
    if (has_act) {
      d = act_backward(gr, act, d, tensor_like(gr, SAVED, "saved", saved));
      output_like(d, DZ, "dz", dz);
    }
    if (dbias.defined()) output_like(gr.reduction(d, {ReductionMode::Add}), DBIAS, "dbias", dbias);
  });
  if (!g->graph) {
    note_aten_part(
        op, has_act ? "the activation derivative and the bias gradient" : "the bias gradient",
        g->unsupported);
    if (has_act) aten_act_backward_out(act, dz, dy, saved);
    if (dbias.defined()) {
      Tensor out = dbias;
      sum_to_out(out, dz);
    }
    return dz;
  }
  execute(*g, dy.device(), op,
          {{DY, &dy}, {SAVED, &saved}, {DZ, has_act ? &dz : nullptr}, {DBIAS, &dbias}});
  return dz;
}

namespace gemm {
namespace {

enum Uid : int64_t {
  A = 1,
  B = 2,
  BIAS = 3,
  DY = 4,
  SAVED = 5,
  Y = 100,
  AMAX = 101,
  Z = 102,
  DA = 103,
  DB = 104,
  DBIAS = 105
};

}  // namespace

Tensor matmul_operand(const Tensor& t_in) {
  const Tensor t = rules::engine_operand(t_in);
  if (t.stride(-1) == 1 || t.stride(-2) == 1) return t;
  return t.contiguous();
}

void activation_graph(const char* op, const Tensor& z, Act act, const Tensor& y,
                      const Tensor& amax) {
  auto aten = [&] {
    y.copy_(aten_act(act, z));
    if (amax.defined()) amax.copy_(y.abs().max());
  };
  if (!pointwise_graph_on(z.device(), op, "the activation")) return aten();
  Key key("activation");
  key.add(z).add(y).add(amax).add(static_cast<int64_t>(act)).add_device(z.device());
  auto g = cached_graph(key, z.device(), op, [&](Graph& gr) {
    set_numerics(gr, z);
    ir::Tensor in = tensor_like(gr, Z, "preactivation", z);
    ir::Tensor out =
        act == Act::None ? gr.unary(PointwiseMode::Identity, in) : apply_act(gr, act, in);
    output_like(out, Y, "y", y);
    if (amax.defined()) {
      ir::Tensor m = gr.reduction(out, {ReductionMode::Amax});
      m->set_output(true).set_name("amax").set_uid(AMAX);
      m->set_dim(std::vector<int64_t>(z.dim(), 1)).set_stride(std::vector<int64_t>(z.dim(), 1));
      m->set_data_type(data_type_of(amax, op, "amax"));
    }
  });
  if (!g->graph) {
    note_aten_part(op, "the activation", g->unsupported);
    return aten();
  }
  execute(*g, z.device(), op, {{Z, &z}, {Y, &y}, {AMAX, &amax}});
}

namespace {

// The graph Y = act(alpha * (A @ B) + bias) [, AMAX] [, Z] writing r's tensors (bias may be
// undefined). Cached; ->graph is null when the engine has no plan for it.
std::shared_ptr<const BuiltGraph> epilogue_graph(const char* op, const Tensor& a, const Tensor& b,
                                                 const Tensor& bias, double alpha, Act act,
                                                 bool want_amax, bool want_z, const Epilogue& r,
                                                 at::ScalarType st) {
  Key key(op);
  key.add(a)
      .add(b)
      .add(bias)
      .add(alpha)
      .add(static_cast<int64_t>(act))
      .add(want_amax)
      .add(want_z)
      .add_device(a.device());
  return cached_graph(key, a.device(), op, [&](Graph& gr) {
    set_numerics(gr, a);
    ir::Tensor z = gr.matmul(tensor_like(gr, A, "a", a), tensor_like(gr, B, "b", b));
    if (alpha != 1.0) z = gr.scale(z, gr.scalar(ir::Scalar::of_float(alpha), "alpha"));
    if (bias.defined()) z = gr.bias(z, tensor_like(gr, BIAS, "bias", bias));
    ir::Tensor out = apply_act(gr, act, z);
    output_like(out, Y, "y", r.y);
    if (want_z) output_like(z, Z, "preactivation", r.z);
    if (want_amax) {
      ir::Tensor m = gr.reduction(out, {ReductionMode::Amax});
      m->set_output(true).set_name("amax").set_uid(AMAX).set_dim({1, 1, 1}).set_stride({1, 1, 1});
      m->set_data_type(data_type_of(st, op, "amax"));
    }
  });
}

// The product alone, alpha * (A @ B) + bias, into `pre` as one graph; false without a plan.
bool run_product(const char* op, const Tensor& a, const Tensor& b, const Tensor& bias, double alpha,
                 const Tensor& pre, at::ScalarType st) {
  const Epilogue p{pre, Tensor(), Tensor()};
  auto g = epilogue_graph(op, a, b, bias, alpha, Act::None, false, false, p, st);
  if (!g->graph) return false;
  execute(*g, a.device(), op, {{A, &a}, {B, &b}, {BIAS, &bias}, {Y, &pre}});
  return true;
}

// When the fused graph has no plan: the matmul as a smaller graph (with the scale and bias,
// else alone), the rest by ATen's elementwise kernels, the ones eager runs for it
// (note_aten_part; the activation and AMAX: a pointwise graph where the engine takes one). Not
// an ATen fallback: the matmul is still dnngraph's. False when the matmul alone has no plan.
bool epilogue_unfused(const char* op, const Tensor& a, const Tensor& b, const Tensor& bias,
                      double alpha, Act act, bool want_amax, const Status& why, Epilogue& r,
                      at::ScalarType st) {
  const bool rest = act != Act::None || want_amax;
  const bool scaled = alpha != 1.0 || bias.defined();
  // The pre-activation: y itself when nothing follows, else z when kept, else a temporary.
  const Tensor pre = !rest ? r.y : r.z.defined() ? r.z : at::empty_like(r.y);
  if (!(rest && scaled && run_product(op, a, b, bias, alpha, pre, st))) {
    if (!rest && !scaled) return false;  // the fused graph was the matmul alone
    if (!run_product(op, a, b, Tensor(), 1.0, pre, st)) return false;
    if (scaled) {
      note_aten_part(op, "the scale and bias", why);
      if (alpha != 1.0) pre.mul_(alpha);
      if (bias.defined()) pre.add_(bias);
    }
  }
  if (rest) activation_graph(op, pre, act, r.y, want_amax ? r.amax : Tensor());
  if (r.z.defined() && !r.z.is_same(pre)) r.z.copy_(pre);
  return true;
}

}  // namespace

Epilogue epilogue(const char* op, const Tensor& a_in, const Tensor& b_in, const Tensor& bias,
                  double alpha, Act act, bool want_amax, bool want_z) {
  const Tensor a = matmul_operand(a_in), b = matmul_operand(b_in);
  const int64_t batch = a.size(0) == 1 ? b.size(0) : a.size(0);  // 1 broadcasts, even to 0
  const at::ScalarType st = stat_dtype(a.scalar_type());
  Epilogue r;
  r.y = at::empty({batch, a.size(1), b.size(2)}, a.options());
  r.amax = want_amax ? at::empty({}, a.options().dtype(st)) : at::empty({0}, a.options().dtype(st));
  if (want_z) r.z = at::empty_like(r.y);
  auto aten = [&] {
    Tensor z = at::matmul(a, b);
    if (alpha != 1.0) z = z * alpha;
    if (bias.defined()) z = z + bias;
    r.y.copy_(aten_act(act, z));
    if (want_z) r.z.copy_(z);
    if (want_amax) r.amax.copy_(r.y.abs().max());
    return r;
  };
  if (r.y.numel() == 0 || a.size(2) == 0) return aten();
  auto g = epilogue_graph(op, a, b, bias, alpha, act, want_amax, want_z, r, st);
  if (g->graph) {
    execute(*g, a.device(), op,
            {{A, &a}, {B, &b}, {BIAS, &bias}, {Y, &r.y}, {AMAX, &r.amax}, {Z, &r.z}});
    return r;
  }
  if (epilogue_unfused(op, a, b, bias, alpha, act, want_amax, g->unsupported, r, st)) return r;
  warn_fallback(op, g->unsupported);
  return aten();
}

// ---------------------------------------------------------------- backward graphs

namespace {

// Sums a [batch, R, C] graph tensor over the batch when the operand it is the gradient of
// was broadcast (batch 1).
ir::Tensor sum_batch_to(Graph& g, ir::Tensor t, const Tensor& like, int64_t batch) {
  if (like.size(0) != 1 || batch == 1) return t;
  ir::Tensor s = g.reduction(t, {ReductionMode::Add});
  s->set_dim({1, like.size(1), like.size(2)});
  return s;
}

ir::Tensor scaled(Graph& g, ir::Tensor t, double alpha) {
  if (alpha == 1.0) return t;
  return g.scale(t, g.scalar(ir::Scalar::of_float(alpha), "alpha"));
}

// dZ (virtual) from the graph's DY and SAVED inputs.
ir::Tensor dz_in(Graph& g, const BackwardProblem& p) {
  ir::Tensor dy = tensor_like(g, DY, "dy", p.dy);
  if (p.act == Act::None) return dy;
  return act_backward(g, p.act, dy, tensor_like(g, SAVED, "saved", p.saved));
}

// Runs one backward graph (data: dA; else dB and/or dbias). Returns false when the engine has
// no plan for it (the caller then takes the unfused path).
bool run_fused(const char* op, const BackwardProblem& p, bool data, const Tensor& da_out,
               const Tensor& db_out, const Tensor& dbias_out) {
  Key key(data ? "matmul_dgrad_fused" : "matmul_wgrad_fused");
  key.add(p.dy).add(p.saved).add(data ? p.b : p.a).add(p.alpha).add(static_cast<int64_t>(p.act));
  key.add(data ? da_out : db_out).add(data ? Tensor() : dbias_out).add(p.batch);
  key.add_device(p.dy.device());
  auto g = cached_graph(key, p.dy.device(), op, [&](Graph& gr) {
    set_numerics(gr, p.dy);
    ir::Tensor dz = dz_in(gr, p);
    if (data) {
      ir::Tensor bt = tensor_like(gr, B, "b", p.b.transpose(1, 2));
      ir::Tensor da = scaled(gr, gr.matmul(dz, bt), p.alpha);
      output_like(sum_batch_to(gr, da, p.a, p.batch), DA, "da", da_out);
      return;
    }
    if (db_out.defined()) {
      ir::Tensor at_ = tensor_like(gr, A, "a", p.a.transpose(1, 2));
      ir::Tensor db = scaled(gr, gr.matmul(at_, dz), p.alpha);
      output_like(sum_batch_to(gr, db, p.b, p.batch), DB, "db", db_out);
    }
    if (dbias_out.defined()) {
      ir::Tensor s = gr.reduction(dz, {ReductionMode::Add});
      output_like(s, DBIAS, "dbias", dbias_out);
    }
  });
  if (!g->graph) {
    note_unfused(op, g->unsupported);
    return false;
  }
  execute(*g, p.dy.device(), op,
          {{DY, &p.dy},
           {SAVED, &p.saved},
           {A, &p.a},
           {B, &p.b},
           {DA, &da_out},
           {DB, &db_out},
           {DBIAS, &dbias_out}});
  return true;
}

// The unfused path: dZ once, then the plain product graphs writing into the outputs (the same
// graphs as the fused path's without an activation); an epilogue graph and a copy only where
// the engine has no plan for those.
void run_unfused(const char* op, const BackwardProblem& p, const Tensor& da_out,
                 const Tensor& db_out, const Tensor& dbias_out) {
  BackwardProblem q = p;
  q.dy = unfused_dz(op, p.act, p.dy, p.saved, dbias_out, at::MemoryFormat::Contiguous);
  q.act = Act::None;
  q.saved = Tensor();
  if (da_out.defined() && !run_fused(op, q, true, da_out, {}, {})) {
    Tensor da = epilogue(op, q.dy, p.b.transpose(1, 2), Tensor(), p.alpha, Act::None, false).y;
    da_out.copy_(p.a.size(0) == 1 && da.size(0) != 1 ? da.sum(0, true) : da);
  }
  if (db_out.defined() && !run_fused(op, q, false, {}, db_out, {})) {
    Tensor db = epilogue(op, p.a.transpose(1, 2), q.dy, Tensor(), p.alpha, Act::None, false).y;
    db_out.copy_(p.b.size(0) == 1 && db.size(0) != 1 ? db.sum(0, true) : db);
  }
}

}  // namespace

void epilogue_backward(const char* op, BackwardProblem p, const Tensor& da_out,
                       const Tensor& db_out, const Tensor& dbias_out) {
  p.a = matmul_operand(p.a);
  p.b = matmul_operand(p.b);
  p.batch = p.a.size(0) == 1 ? p.b.size(0) : p.a.size(0);  // 1 broadcasts, even to 0
  if (p.act != Act::None && !p.saved.defined())            // a direct call without the saved tensor
    p.saved = epilogue(op, p.a, p.b, p.bias, p.alpha, Act::None, false).y;
  if (p.dy.numel() == 0 || p.a.size(2) == 0) {
    for (const Tensor* t : {&da_out, &db_out, &dbias_out})
      if (t->defined()) t->zero_();
    if (p.dy.numel() > 0 && dbias_out.defined())
      dbias_out.copy_(aten_act_backward(p.act, p.dy, p.saved).sum_to_size(dbias_out.sizes()));
    return;
  }
  if (!unfused_backward()) {
    const bool data_ok = !da_out.defined() || run_fused(op, p, true, da_out, {}, {});
    const bool weight_ok = (!db_out.defined() && !dbias_out.defined()) ||
                           run_fused(op, p, false, {}, db_out, dbias_out);
    if (data_ok && weight_ok) return;
    run_unfused(op, p, data_ok ? Tensor() : da_out, weight_ok ? Tensor() : db_out,
                weight_ok ? Tensor() : dbias_out);
    return;
  }
  run_unfused(op, p, da_out, db_out, dbias_out);
}

}  // namespace gemm
}  // namespace dnngraph::torch_ops
