// Header-only core of the GPU checks, shared by tests/gpu (with GoogleTest) and bench/gpu
// (without): build a graph on the cuDNN engine (CUDA handle) and on the reference engine (CPU
// handle), feed both the same fresh random inputs, poison every output first (all bits set:
// NaN for floating types), compare with a per-dtype tolerance.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "dnngraph/dnngraph.hpp"
#include "dnngraph/storage.hpp"

namespace dnngraph::gpu_test {

struct Tolerance {
  double rel = 0, abs = 0;
};

struct CompareOptions {
  double tol_scale = 1.0;  // multiplies the default tolerances
  double min_abs = 0.0;    // absolute floor added to the tolerance
  float input_lo = -1.0f, input_hi = 1.0f;
  uint32_t seed = 1234;
  // Mode A alone keeps the suite fast: check_support finalizes (and may compile) every candidate.
  std::vector<HeurMode> modes{HeurMode::A};
  // Optional: rewrites an input's host bytes after the random fill (e.g. sequence lengths).
  std::function<void(const ir::TensorAttrs&, std::vector<unsigned char>&)> adjust_input{};
  // Optional: output elements (by multi-index) left out of the verdict, e.g. padded rows whose
  // values cuDNN does not define; they are still counted in RunReport::skipped*.
  std::function<bool(const ir::TensorAttrs&, const std::vector<int64_t>&)> skip{};
  // Optional: builds the cuDNN graph in place of Graph::build(handle, modes, policy).
  std::function<Status(Graph&, const HandlePtr&)> build{};
  // Optional: for outputs whose elements are sums that can cancel, the magnitude of each
  // element's largest term (e.g. max_j P_ij |V_jd|), from the inputs (by tensor name: host
  // bytes) into `terms` (by output name: one value per element, row-major over the dims). The
  // relative tolerance then applies to the larger of that and the value: a rounding step in one
  // term moves the result by a fraction of that term, however much the terms cancel.
  using HostTensors = std::map<std::string, const std::vector<unsigned char>*>;
  std::function<void(const HostTensors& in, std::map<std::string, std::vector<double>>& terms)>
      largest_term{};
  int report_mismatches = 1;  // how many mismatches RunReport::mismatch_list describes
};

struct RunReport {
  Status status;          // Ok or the first failure (build or execute)
  std::string plan_name;  // cuDNN plan used
  int64_t compared = 0;   // elements compared
  int64_t mismatches = 0;
  double max_abs_err = 0;
  std::string first_mismatch;              // readable
  std::vector<std::string> mismatch_list;  // the first CompareOptions::report_mismatches
  int64_t skipped = 0;                     // elements CompareOptions::skip left out
  int64_t skipped_mismatches = 0;          // of those, how many differ from the reference
  std::string first_skipped_mismatch;
};

inline std::string gpu_unavailable_reason() {
  static const std::string reason = [] {
    SystemInfo s = system_info();
    CudnnInfo c = cudnn_info();
    if (!c.built) return std::string("dnngraph was built without the cuDNN engine");
    if (s.gpus.empty()) return "no GPU: " + s.gpu_error;
    if (!c.loaded) return "cuDNN not loaded: " + c.error;
    return std::string();
  }();
  return reason;
}

inline Tolerance default_tolerance(DataType t) {
  switch (t) {
    case DataType::Float:
      return {1e-5, 1e-6};
    case DataType::Double:
      return {1e-12, 1e-14};
    case DataType::BFloat16:
      return {2e-2, 1e-2};
    case DataType::Half:
      return {1e-2, 2e-3};
    case DataType::FP8_E4M3:  // one FP8 step (3 mantissa bits)
      return {0.13, 1e-2};
    case DataType::FP8_E5M2:  // one FP8 step (2 mantissa bits)
      return {0.26, 2e-2};
    case DataType::FP4_E2M1:  // one FP4 step: 0.5 below 2, a third of the value above
      return {0.34, 0.5};
    default:
      return {0, 0};
  }
}

inline std::vector<int64_t> strides_for(const std::vector<int64_t>& dim, bool channels_last) {
  if (!channels_last || dim.size() < 3) return ir::packed_strides(dim);
  // N, spatial..., C from outermost to innermost.
  std::vector<int64_t> order{0};
  for (size_t i = 2; i < dim.size(); ++i) order.push_back(static_cast<int64_t>(i));
  order.push_back(1);
  return ir::packed_strides(dim, order);
}

// A graph input named `name`: packed strides, row-major or (rank >= 3) channels-last.
inline ir::Tensor input(Graph& g, const char* name, std::vector<int64_t> dim, DataType t,
                        bool channels_last = false) {
  auto s = strides_for(dim, channels_last);
  return g.tensor(
      ir::TensorAttrs().set_name(name).set_dim(std::move(dim)).set_stride(s).set_data_type(t));
}

// Makes `y` a graph output with that name, type and layout; nothing when `y` is null (an
// optional output the op did not create).
inline void finish(const ir::Tensor& y, const char* name, const std::vector<int64_t>& dim,
                   DataType t, bool channels_last = false) {
  if (!y) return;
  y->set_output(true).set_name(name).set_data_type(t).set_dim(dim).set_stride(
      strides_for(dim, channels_last));
}

namespace detail_ {

inline double load(const unsigned char* p, DataType t) { return load_element(p, t, 0); }
// Element e of a buffer (FP4_E2M1: a nibble, so element offsets, not byte pointers).
inline double load_at(const unsigned char* base, DataType t, int64_t e) {
  return load_element(base, t, e);
}

// Test inputs: Boolean from the sign (about half true), UInt8 from |v|, integers rounded half
// away from zero, half/bf16 through float; then stored as every value is (storage.hpp).
inline void store_at(unsigned char* base, DataType t, int64_t e, double v);
inline void store(unsigned char* p, DataType t, double v) { store_at(p, t, 0, v); }
inline void store_at(unsigned char* base, DataType t, int64_t e, double v) {
  if (t == DataType::Boolean) {
    v = v > 0 ? 1 : 0;
  } else if (t == DataType::UInt8) {
    v = std::round(std::fabs(v));
  } else if (is_integral(t)) {
    v = std::round(v);
  } else if (t == DataType::Half || t == DataType::BFloat16) {
    v = static_cast<float>(v);
  }
  store_element(base, t, e, v);
}

struct Buffer {
  ir::Tensor t;
  size_t bytes = 0;
  std::vector<unsigned char> host;  // inputs: data; outputs: results
  bool is_output = false;
};

inline size_t storage_bytes(const ir::TensorAttrs& t) {
  // Whole bytes (FP4_E2M1: two elements per byte); at least one.
  return static_cast<size_t>(std::max<int64_t>(t.storage_bytes().value_or(0), 1));
}

// Non-virtual tensors of a built graph: inputs (no producer) get data, outputs get poison.
inline std::vector<Buffer> buffers_of(const Graph& g) {
  std::vector<Buffer> out;
  std::vector<const ir::TensorAttrs*> produced;
  for (const auto& n : g.nodes())
    for (const auto& p : n.outputs) produced.push_back(p.tensor.get());
  for (const auto& t : g.tensors()) {
    if (t->is_virtual || t->value) continue;
    Buffer b;
    b.t = t;
    b.bytes = storage_bytes(*t);
    b.is_output = std::find(produced.begin(), produced.end(), t.get()) != produced.end();
    out.push_back(std::move(b));
  }
  std::sort(out.begin(), out.end(),
            [](const Buffer& a, const Buffer& b) { return a.t->uid < b.t->uid; });
  return out;
}

struct DeviceBuffers {
  std::vector<void*> ptrs;
  void* ws = nullptr;
  DeviceBuffers() = default;
  DeviceBuffers(const DeviceBuffers&) = delete;
  DeviceBuffers& operator=(const DeviceBuffers&) = delete;
  ~DeviceBuffers() {
    for (void* p : ptrs) cudaFree(p);
    if (ws) cudaFree(ws);
  }
};

}  // namespace detail_

// A graph built on the cuDNN engine with device buffers: random inputs, poisoned outputs.
struct GpuRun {
  Graph g;
  HandlePtr handle;
  std::vector<detail_::Buffer> bufs;  // host copies, ordered by uid
  detail_::DeviceBuffers dev;
  VariantPack pack;
  int64_t ws = 0;
  std::string plan_name;

  // Builds (policy HeuristicsChoice or All) and fills the buffers.
  Status prepare(const std::function<void(Graph&)>& make, const CompareOptions& o,
                 BuildPlanPolicy policy = BuildPlanPolicy::HeuristicsChoice) {
    auto h = Handle::create(Device::cuda(0));
    if (!h) return h.status();
    handle = h.value();
    make(g);
    if (Status s = o.build ? o.build(g, handle) : g.build(handle, o.modes, policy); !s)
      return Status(s.code(), "cuDNN build: " + s.message());
    const int64_t sel = g.selected_plan_index();
    int64_t k = 0;
    for (const auto& c : g.candidates())
      if (c.support.is_ok() && k++ == sel) plan_name = c.info.name;
    bufs = detail_::buffers_of(g);
    std::mt19937 gen(o.seed);
    std::uniform_real_distribution<float> dist(o.input_lo, o.input_hi);
    for (auto& b : bufs) {
      b.host.assign(b.bytes, 0xff);  // poison (NaN) for outputs, overwritten for inputs
      if (!b.is_output) {
        for (int64_t e = 0; e < b.t->storage_elements(); ++e) {
          double v = dist(gen);
          if (is_integral(b.t->data_type)) v = std::round(v * 4);
          detail_::store_at(b.host.data(), b.t->data_type, e, v);
        }
        if (o.adjust_input) o.adjust_input(*b.t, b.host);
      }
      void* p = nullptr;
      if (cudaMalloc(&p, b.bytes) != cudaSuccess)
        return make_error(ErrorCode::BackendError, "cudaMalloc of ", b.bytes, " bytes failed");
      dev.ptrs.push_back(p);
      cudaMemcpy(p, b.host.data(), b.bytes, cudaMemcpyHostToDevice);
      pack[b.t->uid] = p;
    }
    for (int64_t i = 0; i < g.get_execution_plan_count(); ++i) {
      auto w = g.get_workspace_size_plan_at_index(i);
      if (w) ws = std::max(ws, w.value());
    }
    if (ws > 0 && cudaMalloc(&dev.ws, static_cast<size_t>(ws)) != cudaSuccess)
      return make_error(ErrorCode::BackendError, "cudaMalloc of the workspace failed");
    return Status::ok();
  }

  // Poisons the outputs on the device, executes once, copies outputs back.
  Status run_once() {
    for (size_t i = 0; i < bufs.size(); ++i)
      if (bufs[i].is_output) cudaMemset(dev.ptrs[i], 0xff, bufs[i].bytes);
    if (Status s = g.execute(*handle, pack, dev.ws, ws); !s)
      return Status(s.code(), "cuDNN execute: " + s.message());
    if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess)
      return make_error(ErrorCode::BackendError, "CUDA: ", cudaGetErrorString(e));
    for (size_t i = 0; i < bufs.size(); ++i)
      if (bufs[i].is_output)
        cudaMemcpy(bufs[i].host.data(), dev.ptrs[i], bufs[i].bytes, cudaMemcpyDeviceToHost);
    return Status::ok();
  }
};

// Runs `make` on the reference engine with the inputs of `run` and compares its outputs.
inline RunReport compare_with_reference(const GpuRun& run, const std::function<void(Graph&)>& make,
                                        const CompareOptions& o) {
  RunReport r;
  r.plan_name = run.plan_name;
  auto cpu = Handle::create(Device::cpu());
  if (!cpu) {
    r.status = cpu.status();
    return r;
  }
  Graph cg;
  make(cg);
  if (Status s = cg.build(cpu.value()); !s) {
    r.status = Status(s.code(), "reference build: " + s.message());
    return r;
  }
  std::vector<detail_::Buffer> cb = detail_::buffers_of(cg);
  if (cb.size() != run.bufs.size()) {
    r.status = make_error(ErrorCode::Internal, "graphs differ in their tensors");
    return r;
  }
  VariantPack cpack;
  for (size_t i = 0; i < cb.size(); ++i) {
    cb[i].host =
        run.bufs[i].is_output ? std::vector<unsigned char>(cb[i].bytes, 0xff) : run.bufs[i].host;
    cpack[cb[i].t->uid] = cb[i].host.data();
  }
  std::vector<unsigned char> cws(
      static_cast<size_t>(std::max<int64_t>(cg.get_workspace_size().value(), 1)));
  if (Status s = cg.execute(*cpu.value(), cpack, cws.data(), static_cast<int64_t>(cws.size()));
      !s) {
    r.status = Status(s.code(), "reference execute: " + s.message());
    return r;
  }
  std::map<std::string, std::vector<double>> terms;
  if (o.largest_term) {
    CompareOptions::HostTensors in;
    for (const auto& b : run.bufs)
      if (!b.is_output) in[b.t->name] = &b.host;
    o.largest_term(in, terms);
  }
  for (size_t i = 0; i < cb.size(); ++i) {
    if (!run.bufs[i].is_output) continue;
    const ir::TensorAttrs& t = *run.bufs[i].t;
    const auto m = terms.find(t.name);
    const std::vector<double>* largest = m == terms.end() ? nullptr : &m->second;
    Tolerance tol = default_tolerance(t.data_type);
    tol.rel *= o.tol_scale;
    tol.abs = tol.abs * o.tol_scale + o.min_abs;
    std::vector<int64_t> idx(t.dim.size(), 0);
    for (int64_t n = 0; n < t.volume(); ++n) {
      int64_t off = 0;
      for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.stride[d];
      const double got = detail_::load_at(run.bufs[i].host.data(), t.data_type, off);
      const double want = detail_::load_at(cb[i].host.data(), t.data_type, off);
      const double scale = largest ? std::max(std::fabs(want), largest->at(n)) : std::fabs(want);
      const bool skipped = o.skip && o.skip(t, idx);
      if (!skipped) ++r.compared;
      const bool ok = std::isfinite(got) ? std::fabs(got - want) <= tol.abs + tol.rel * scale
                                         : (std::isnan(got) ? std::isnan(want) : got == want);
      if (skipped) {
        ++r.skipped;
        if (!ok) ++r.skipped_mismatches;
      } else if (std::isfinite(got) && std::isfinite(want)) {
        r.max_abs_err = std::max(r.max_abs_err, std::fabs(got - want));
      }
      if (!ok) {
        const int64_t nth = skipped ? r.skipped_mismatches - 1 : r.mismatches++;
        if (nth == 0 || (!skipped && nth < o.report_mismatches)) {
          std::ostringstream os;
          os << "tensor '" << t.name << "' element " << n << " [";
          for (size_t d = 0; d < idx.size(); ++d) os << (d ? "," : "") << idx[d];
          os << "]: cuDNN " << got << " vs reference " << want;
          if (largest) os << " (largest term " << largest->at(n) << ")";
          if (nth == 0) (skipped ? r.first_skipped_mismatch : r.first_mismatch) = os.str();
          if (!skipped) r.mismatch_list.push_back(os.str());
        }
      }
      for (size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < t.dim[d]) break;
        idx[d] = 0;
      }
    }
  }
  return r;
}

inline RunReport run_and_compare(const std::function<void(Graph&)>& make,
                                 const CompareOptions& o = {}) {
  GpuRun run;
  if (Status s = run.prepare(make, o); !s) {
    RunReport r;
    r.status = s;
    return r;
  }
  if (Status s = run.run_once(); !s) {
    RunReport r;
    r.status = s;
    r.plan_name = run.plan_name;
    return r;
  }
  return compare_with_reference(run, make, o);
}

}  // namespace dnngraph::gpu_test
