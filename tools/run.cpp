// `dnngraph run GRAPH.json`: builds a graph on an engine, executes it once on seeded random
// inputs (outputs poisoned first), optionally compares every output with the reference
// engine's, and times further executes. Progress goes to stderr.
#include "run.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>

#include "common.hpp"
#include "dnngraph/graph.hpp"
#include "dnngraph/storage.hpp"
#include "progress.hpp"

#ifdef DNNGRAPH_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace dnngraph::tools {
namespace {

using Clock = std::chrono::steady_clock;

// One tensor the variant pack needs: its host bytes and, on a GPU, a device copy.
struct Buffer {
  ir::Tensor t;
  std::vector<unsigned char> host;
  void* dev = nullptr;
};

// Where the graph runs: host memory on the CPU, device memory through cudart on a GPU.
class Memory {
 public:
  explicit Memory(bool gpu) : gpu_(gpu) {}
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;
  ~Memory() {
#ifdef DNNGRAPH_WITH_CUDA
    for (void* p : owned_) cudaFree(p);
#endif
  }
  // The pointer the pack gets for `b` (pass-by-value scalars always stay on the host).
  Status place(Buffer& b) {
    if (!gpu_ || b.t->is_pass_by_value) return Status::ok();
#ifdef DNNGRAPH_WITH_CUDA
    if (cudaMalloc(&b.dev, std::max<size_t>(b.host.size(), 1)) != cudaSuccess)
      return make_error(ErrorCode::BackendError, "cudaMalloc of ", b.host.size(), " bytes for '",
                        b.t->name, "' failed");
    owned_.push_back(b.dev);
    if (cudaMemcpy(b.dev, b.host.data(), b.host.size(), cudaMemcpyHostToDevice) != cudaSuccess)
      return make_error(ErrorCode::BackendError, "copying '", b.t->name, "' to the GPU failed");
    return Status::ok();
#else
    return make_error(ErrorCode::NotSupported, "this dnngraph was built without CUDA");
#endif
  }
  void* ptr(Buffer& b) const { return b.dev ? b.dev : b.host.data(); }
  // Waits for the GPU and copies `b` back to its host bytes.
  Status fetch(Buffer& b) {
    if (!b.dev) return Status::ok();
#ifdef DNNGRAPH_WITH_CUDA
    if (cudaMemcpy(b.host.data(), b.dev, b.host.size(), cudaMemcpyDeviceToHost) != cudaSuccess)
      return make_error(ErrorCode::BackendError, "copying '", b.t->name, "' from the GPU failed");
#endif
    return Status::ok();
  }
  void sync() {
#ifdef DNNGRAPH_WITH_CUDA
    if (gpu_) cudaDeviceSynchronize();
#endif
  }

 private:
  bool gpu_;
  std::vector<void*> owned_;
};

// Inputs: uniform in [-1, 1] from `seed` (integers round, Boolean is bits); pass-by-value
// scalars 1; outputs poisoned (NaN, or 0xFF bytes for integer types).
std::vector<Buffer> make_buffers(const ir::ValidatedGraph& v, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<Buffer> out;
  for (const ir::Tensor& t : v.io_tensors()) {
    if (t->value) continue;  // a constant in the graph: not in the pack
    Buffer b{t, std::vector<unsigned char>(
                    static_cast<size_t>(std::max<int64_t>(t->storage_bytes().value_or(1), 16)))};
    const int64_t n = t->is_pass_by_value ? 1 : t->storage_elements();
    if (t->is_output && !t->is_pass_by_value) {
      if (is_floating(t->data_type))
        for (int64_t i = 0; i < n; ++i)
          store_element(b.host.data(), t->data_type, i, std::numeric_limits<double>::quiet_NaN());
      else
        std::memset(b.host.data(), 0xFF, b.host.size());
    } else {
      for (int64_t i = 0; i < n; ++i)
        store_element(b.host.data(), t->data_type, i, t->is_pass_by_value ? 1.0 : dist(gen));
    }
    out.push_back(std::move(b));
  }
  return out;
}

// --against: each input of the reference graph takes the values of GRAPH's input of that name
// (the same type and size).
Status share_inputs(const std::vector<Buffer>& bufs, std::vector<Buffer>& want,
                    const std::string& ref_name) {
  for (Buffer& w : want) {
    if (w.t->is_output || w.t->is_pass_by_value) continue;
    auto src = std::find_if(bufs.begin(), bufs.end(), [&](const Buffer& b) {
      return !b.t->is_output && b.t->name == w.t->name;
    });
    if (src == bufs.end() || src->host.size() != w.host.size() ||
        src->t->data_type != w.t->data_type)
      return make_error(ErrorCode::InvalidArgument, ref_name, ": input '", w.t->name,
                        "' is not an input of the graph it checks (the same name, type and "
                        "size): --against needs a graph with the same inputs");
    w.host = src->host;
  }
  return Status::ok();
}

// Relative tolerance of an output of type t against the reference engine (fp64 compute).
double tolerance(DataType t) {
  switch (t) {
    case DataType::Double:
      return 1e-12;
    case DataType::Float:
      return 1e-4;  // cuDNN may reduce in another order, or in TF32
    case DataType::Half:
    case DataType::BFloat16:
      return 2e-2;
    default:
      return is_floating(t) ? 0.25 : 0.0;  // FP8/FP4: a step of their grid; integers exact
  }
}

struct Comparison {
  int64_t compared = 0, mismatches = 0;
  double max_abs = 0;
};

// Every element of `got` against `want` (the same tensor's buffer from the reference run).
Comparison compare(const Buffer& got, const Buffer& want) {
  Comparison c;
  const DataType dt = got.t->data_type;
  const double rtol = tolerance(dt), atol = rtol;
  const int64_t n = got.t->storage_elements();
  for (int64_t i = 0; i < n; ++i) {
    const double a = load_element(got.host.data(), dt, i),
                 b = load_element(want.host.data(), dt, i);
    ++c.compared;
    if (std::isnan(a) && std::isnan(b)) continue;
    const double d = std::fabs(a - b);
    c.max_abs = std::isnan(d) ? c.max_abs : std::max(c.max_abs, d);
    if (!(d <= atol + rtol * std::fabs(b))) ++c.mismatches;
  }
  return c;
}

// Builds `g` on `dev`, executes it once on `bufs`, and (iters > 0) times iters more executes.
struct RunResult {
  Status status;
  std::vector<double> ms;
};
RunResult execute_on(Graph& g, const Device& dev, std::vector<Buffer>& bufs, int iters,
                     bool quiet) {
  RunResult r;
  auto handle = dnngraph_cli::open_handle(dev, "--engine cpu");
  if (!handle) return {handle.status(), {}};
  if (Status s = g.build(handle.value()); !s) return {s, {}};
  const bool gpu = dev.kind == Device::Kind::CUDA;
  Memory mem(gpu);
  VariantPack pack;
  for (Buffer& b : bufs) {
    if (Status s = mem.place(b); !s) return {s, {}};
    pack[b.t->uid] = mem.ptr(b);
  }
  auto ws_size = g.get_workspace_size();
  if (!ws_size) return {ws_size.status(), {}};
  Buffer ws{nullptr, std::vector<unsigned char>(static_cast<size_t>(*ws_size))};
  if (gpu && *ws_size > 0) {
    ws.t = std::make_shared<ir::TensorAttrs>();
    ws.t->name = "workspace";
    if (Status s = mem.place(ws); !s) return {s, {}};
  }
  void* wsp = *ws_size > 0 ? mem.ptr(ws) : nullptr;
  if (Status s = g.execute(**handle, pack, wsp, *ws_size); !s) return {s, {}};
  mem.sync();
  for (Buffer& b : bufs)
    if (b.t->is_output)
      if (Status s = mem.fetch(b); !s) return {s, {}};
  for (int i = 0; i < iters; ++i) {
    if (!quiet) progress_bar(i, iters, "timing");
    const auto t0 = Clock::now();
    if (Status s = g.execute(**handle, pack, wsp, *ws_size); !s) return {s, {}};
    mem.sync();
    r.ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  if (!quiet && iters > 0) {
    progress_bar(iters, iters, "done");
    std::fprintf(stderr, "\n");
  }
  return r;
}

}  // namespace

CLI::App* add_run_command(CLI::App& app, RunArgs& a) {
  auto* r = app.add_subcommand(
      "run",
      "Build a graph, execute it once on seeded random inputs in [-1, 1] (outputs poisoned "
      "first), and time --iters more executes (median and min ms, host clock around each "
      "synchronized call). --check also runs it on the CPU reference engine and compares every "
      "output element (relative tolerance by type: fp32 1e-4, fp16/bf16 2e-2, fp64 1e-12, "
      "integers exact). Exit 1 when the graph is invalid, does not run, or differs.\n"
      "Example: dnngraph run --engine cpu --check --iters 5 tests/data/matmul_epilogue.json");
  r->add_option("GRAPH", a.graph, "graph description (JSON)")->required();
  r->add_option("--engine", a.engine,
                "cuda or cpu (default: cuda when a GPU and cuDNN are present, else cpu)")
      ->check(CLI::IsMember({"cuda", "cpu"}));
  r->add_flag("--check", a.check, "compare every output with the CPU reference engine");
  r->add_option("--against", a.against,
                "with --check: run this graph description on the reference engine instead of "
                "GRAPH (another form of the same computation, e.g. an unfused one); its inputs "
                "get GRAPH's values and its outputs are matched to GRAPH's by name")
      ->check(CLI::ExistingFile);
  r->add_option("--iters", a.iters, "timed executes after the first (default 10)")
      ->check(CLI::NonNegativeNumber);
  r->add_option("--seed", a.seed, "seed of the random inputs (default 42)");
  r->add_flag("-q,--quiet", a.quiet, "no progress bar");
  return r;
}

int cmd_run(const RunArgs& a) {
  auto fail = [](int rc, const std::string& what) { return dnngraph_cli::fail("run", rc, what); };
  Graph g;
  if (int rc = dnngraph_cli::load_graph(a.graph, g, "run", true)) return rc;
  const std::string engine = a.engine.empty() ? dnngraph_cli::default_device() : a.engine;
  const Device dev = engine == "cuda" ? Device::cuda(0) : Device::cpu();

  std::vector<Buffer> bufs = make_buffers(*g.validated(), a.seed);
  RunResult r = execute_on(g, dev, bufs, a.iters, a.quiet);
  if (!r.status) return fail(1, a.graph + " on " + engine + ": " + r.status.to_string());
  std::printf("graph '%s' on %s: executed once on random inputs (seed %u)\n", g.name().c_str(),
              engine.c_str(), a.seed);
  if (!r.ms.empty()) {
    std::vector<double> ms = r.ms;
    std::sort(ms.begin(), ms.end());
    std::printf("time: median %.4f ms, min %.4f ms over %zu executes\n", ms[ms.size() / 2],
                ms.front(), ms.size());
  }
  if (!a.check) return 0;

  // The reference: the same graph (or --against's), the same inputs, on the CPU engine.
  const std::string ref_name = a.against.empty() ? "the reference graph" : a.against;
  Graph ref;
  if (int rc = dnngraph_cli::load_graph(a.against.empty() ? a.graph : a.against, ref, "run", true))
    return rc;
  std::vector<Buffer> want = make_buffers(*ref.validated(), a.seed);
  if (!a.against.empty())
    if (Status s = share_inputs(bufs, want, ref_name); !s) return fail(1, s.message());
  RunResult rr = execute_on(ref, Device::cpu(), want, 0, true);
  if (!rr.status) return fail(1, "the reference engine: " + rr.status.to_string());
  if (engine == "cpu" && a.against.empty())
    std::printf("check: the cpu engine is the reference engine; compared with a second run\n");
  int64_t bad = 0;
  for (size_t i = 0; i < bufs.size(); ++i) {
    if (!bufs[i].t->is_output) continue;
    // The same tensor of the reference graph: the same uid from the same JSON, else the name.
    const bool by_name = !a.against.empty();
    auto same = std::find_if(want.begin(), want.end(), [&](const Buffer& w) {
      return w.t->is_output &&
             (by_name ? w.t->name == bufs[i].t->name : w.t->uid == bufs[i].t->uid);
    });
    if (same == want.end() || same->host.size() != bufs[i].host.size() ||
        same->t->data_type != bufs[i].t->data_type)
      return fail(1, ref_name + " has no output like '" + bufs[i].t->name +
                         "' (the same name, type and size)");
    const Comparison c = compare(bufs[i], *same);
    bad += c.mismatches;
    std::printf("check %-24s %10lld elements, max abs diff %.3g, %lld outside rtol %g: %s\n",
                bufs[i].t->name.c_str(), static_cast<long long>(c.compared), c.max_abs,
                static_cast<long long>(c.mismatches), tolerance(bufs[i].t->data_type),
                c.mismatches ? "FAIL" : "ok");
  }
  return bad ? 1 : 0;
}

}  // namespace dnngraph::tools
