// The tutorial's three graphs (conv->bias->relu, matmul epilogue with AMAX, causal SDPA) built
// with the graph API and run on the GPU (cuDNN) or the CPU reference engine, each checked
// against an independent fp64 computation on the host and timed. Shared by the demo and the
// samples; everything here uses the public API only.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "dnngraph/dnngraph.hpp"

#ifdef DNNGRAPH_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tutorial {

using namespace dnngraph;
using Clock = std::chrono::steady_clock;

// A bf16 (or fp32) buffer with host values and, on a GPU handle, a device copy.
struct Buffer {
  std::vector<double> host;  // values as stored (already rounded to the storage type)
  std::vector<char> bytes;   // storage
  DataType type;
  void* dev = nullptr;
  bool on_gpu = false;

  Buffer(size_t n, DataType t, bool gpu, std::mt19937* gen)
      : host(n), bytes(n * data_type_size(t)), type(t), on_gpu(gpu) {
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    for (size_t i = 0; i < n; ++i) set(i, gen ? d(*gen) : std::nanf(""));
#ifdef DNNGRAPH_WITH_CUDA
    if (on_gpu) {
      cudaMalloc(&dev, bytes.size());
      cudaMemcpy(dev, bytes.data(), bytes.size(), cudaMemcpyHostToDevice);
    }
#endif
  }
  ~Buffer() {
#ifdef DNNGRAPH_WITH_CUDA
    if (dev) cudaFree(dev);
#endif
  }
  // Stores v in the buffer's type (dnngraph/storage.hpp rounds to nearest even).
  void set(size_t i, float v) {
    store_element(bytes.data(), type, static_cast<int64_t>(i), v);
    host[i] = load_element(bytes.data(), type, static_cast<int64_t>(i));
  }
  void* ptr() { return on_gpu ? dev : bytes.data(); }
  // Reads the device result back into host[].
  void fetch() {
#ifdef DNNGRAPH_WITH_CUDA
    if (on_gpu) cudaMemcpy(bytes.data(), dev, bytes.size(), cudaMemcpyDeviceToHost);
#endif
    for (size_t i = 0; i < host.size(); ++i)
      host[i] = load_element(bytes.data(), type, static_cast<int64_t>(i));
  }
};

inline double rel_err(const std::vector<double>& got, const std::vector<double>& ref) {
  double e = 0, m = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    e = std::max(e, std::fabs(got[i] - ref[i]));  // NaN-propagating below
    if (std::isnan(got[i])) return INFINITY;
    m = std::max(m, std::fabs(ref[i]));
  }
  return e / std::max(m, 1e-30);
}

struct Runner {
  HandlePtr handle;
  bool gpu = false;

  // `--device cpu|cuda` (`--cpu` too); without it the GPU when one is usable, else the CPU.
  // Prints a usage line and returns false on other arguments or an unusable --device cuda.
  bool init(int argc, char** argv, const char* program) {
    std::string want = argc == 2 && std::string(argv[1]) == "--cpu" ? "cpu" : "";
    if (argc == 3 && std::string(argv[1]) == "--device") want = argv[2];
    if ((argc > 1 && want.empty()) || (!want.empty() && want != "cpu" && want != "cuda")) {
      std::printf("usage: %s [--device cpu|cuda]\n", program);
      return false;
    }
    const SystemInfo info = system_info();
    const CudnnInfo cudnn = cudnn_info();
    std::printf("dnngraph %s | cuDNN: %s | GPUs: %zu\n", info.dnngraph_version.c_str(),
                cudnn.loaded ? backend_version_string().c_str() : cudnn.error.c_str(),
                info.gpus.size());
    if (want != "cpu" && cudnn.loaded && !info.gpus.empty()) {
      if (auto h = Handle::create(Device::cuda(0))) {
        handle = *h;
        gpu = true;
      }
    }
    if (want == "cuda" && !gpu) {
      std::printf("%s: --device cuda: no usable GPU with cuDNN here (try --device cpu)\n", program);
      return false;
    }
    if (!handle) handle = Handle::create(Device::cpu()).value();
    std::printf("running on %s (%s engine), checked against an fp64 computation on the host\n",
                handle->device().to_string().c_str(), gpu ? "cuDNN" : "reference");
    return true;
  }
  void* workspace = nullptr;
  std::vector<char> host_ws;

  // Builds, runs once, then times `iters` executions; returns ms per execute.
  double run(Graph& g, VariantPack& pack, int iters) {
    Status s = g.build(handle);
    if (!s.is_ok()) throw std::runtime_error(s.to_string());
    int64_t ws = g.get_workspace_size().value();
    host_ws.assign(static_cast<size_t>(std::max<int64_t>(ws, 1)), 0);
    workspace = host_ws.data();
#ifdef DNNGRAPH_WITH_CUDA
    if (gpu) cudaMalloc(&workspace, static_cast<size_t>(std::max<int64_t>(ws, 1)));
#endif
    auto once = [&] {
      Status e = g.execute(*handle, pack, workspace, ws);
      if (!e.is_ok()) throw std::runtime_error(e.to_string());
    };
    once();
    sync();
    auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) once();
    sync();
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / iters;
#ifdef DNNGRAPH_WITH_CUDA
    if (gpu) cudaFree(workspace);
#endif
    return ms;
  }
  void sync() {
#ifdef DNNGRAPH_WITH_CUDA
    if (gpu) cudaDeviceSynchronize();
#endif
  }
};

inline void report(const char* name, double err, double tol, double ms) {
  std::printf("  %-34s rel err %.2e (tol %.0e)  %s  %9.3f ms/execute\n", name, err, tol,
              err <= tol ? "PASSED" : "FAILED", ms);
}

// --- 1. conv -> bias -> relu, NHWC bf16 -------------------------------------------------
struct ConvSizes {
  int64_t n, c, hw, k;
};
inline bool conv_bias_relu(Runner& r, std::mt19937& gen, ConvSizes z) {
  const int64_t N = z.n, C = z.c, H = z.hw, W = z.hw, K = z.k, R = 3, S = 3;
  Graph g;
  g.set_name("conv_bias_relu").set_io_data_type(DataType::BFloat16);
  auto X = g.tensor(
      ir::TensorAttrs().set_name("X").set_dim({N, C, H, W}).set_stride({C * H * W, 1, W * C, C}));
  auto Wt = g.tensor(
      ir::TensorAttrs().set_name("W").set_dim({K, C, R, S}).set_stride({C * R * S, 1, S * C, C}));
  auto B =
      g.tensor(ir::TensorAttrs().set_name("bias").set_dim({1, K, 1, 1}).set_stride({K, 1, K, K}));
  auto conv = g.conv_fprop(
      X, Wt, ir::ConvFpropAttrs().set_padding({1, 1}).set_stride({1, 1}).set_dilation({1, 1}));
  auto Y = g.relu(g.bias(conv, B));
  Y->set_output(true).set_name("Y");
  Buffer x(N * C * H * W, DataType::BFloat16, r.gpu, &gen),
      w(K * C * R * S, DataType::BFloat16, r.gpu, &gen), b(K, DataType::BFloat16, r.gpu, &gen),
      y(N * K * H * W, DataType::BFloat16, r.gpu, nullptr);
  Status s = g.validate();
  if (!s.is_ok()) throw std::runtime_error(s.to_string());
  VariantPack pack{{X->uid, x.ptr()}, {Wt->uid, w.ptr()}, {B->uid, b.ptr()}, {Y->uid, y.ptr()}};
  double ms = r.run(g, pack, r.gpu ? 50 : 3);
  y.fetch();
  // fp64 reference in NHWC storage order.
  std::vector<double> ref(y.host.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t p = 0; p < H; ++p)
      for (int64_t q = 0; q < W; ++q)
        for (int64_t k = 0; k < K; ++k) {
          double acc = b.host[k];
          for (int64_t rr = 0; rr < R; ++rr)
            for (int64_t ss = 0; ss < S; ++ss) {
              int64_t ih = p - 1 + rr, iw = q - 1 + ss;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              for (int64_t c = 0; c < C; ++c)
                acc += x.host[((n * H + ih) * W + iw) * C + c] *
                       w.host[((k * R + rr) * S + ss) * C + c];
            }
          ref[((n * H + p) * W + q) * K + k] = std::max(acc, 0.0);
        }
  double err = rel_err(y.host, ref);
  report("conv->bias->relu (NHWC bf16)", err, 1e-2, ms);
  return err <= 1e-2;
}

// --- 2. matmul -> *alpha -> +bias -> gelu, with AMAX ------------------------------------
struct MatmulSizes {
  int64_t b, m, k, n;
};
inline bool matmul_epilogue(Runner& r, std::mt19937& gen, MatmulSizes z) {
  const int64_t Bz = z.b, M = z.m, Kd = z.k, Nd = z.n;
  float alpha = 0.125f;
  Graph g;
  g.set_name("matmul_epilogue").set_io_data_type(DataType::BFloat16);
  auto A =
      g.tensor(ir::TensorAttrs().set_name("A").set_dim({Bz, M, Kd}).set_stride({M * Kd, Kd, 1}));
  auto Bm =
      g.tensor(ir::TensorAttrs().set_name("B").set_dim({Bz, Kd, Nd}).set_stride({Kd * Nd, Nd, 1}));
  auto bias =
      g.tensor(ir::TensorAttrs().set_name("bias").set_dim({1, 1, Nd}).set_stride({Nd, Nd, 1}));
  auto al = g.tensor(ir::TensorAttrs()
                         .set_name("alpha")
                         .set_dim({1, 1, 1})
                         .set_stride({1, 1, 1})
                         .set_data_type(DataType::Float)
                         .set_is_pass_by_value(true));
  auto act = g.gelu(g.bias(g.mul(g.matmul(A, Bm), al), bias));
  act->set_output(true).set_name("OUT");
  ir::ReductionAttrs ra;
  ra.mode = ReductionMode::Amax;
  auto amax = g.reduction(act, ra);
  amax->set_output(true)
      .set_name("AMAX")
      .set_data_type(DataType::Float)
      .set_dim({1, 1, 1})
      .set_stride({1, 1, 1});
  Buffer a(Bz * M * Kd, DataType::BFloat16, r.gpu, &gen),
      bm(Bz * Kd * Nd, DataType::BFloat16, r.gpu, &gen), bs(Nd, DataType::BFloat16, r.gpu, &gen),
      out(Bz * M * Nd, DataType::BFloat16, r.gpu, nullptr), am(1, DataType::Float, r.gpu, nullptr);
  Status s = g.validate();
  if (!s.is_ok()) throw std::runtime_error(s.to_string());
  VariantPack pack{{A->uid, a.ptr()}, {Bm->uid, bm.ptr()},   {bias->uid, bs.ptr()},
                   {al->uid, &alpha}, {act->uid, out.ptr()}, {amax->uid, am.ptr()}};
  double ms = r.run(g, pack, r.gpu ? 50 : 5);
  out.fetch();
  am.fetch();
  std::vector<double> ref(out.host.size());
  double ref_amax = 0;
  for (int64_t z = 0; z < Bz; ++z)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < Nd; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < Kd; ++k)
          acc += a.host[(z * M + i) * Kd + k] * bm.host[(z * Kd + k) * Nd + j];
        double v = acc * alpha + bs.host[j];
        v = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
        ref[(z * M + i) * Nd + j] = v;
        ref_amax = std::max(ref_amax, std::fabs(v));
      }
  double err = rel_err(out.host, ref);
  double err_amax = std::fabs(am.host[0] - ref_amax) / ref_amax;
  report("matmul*alpha+bias->gelu (bf16)", err, 1e-2, ms);
  report("  fused AMAX", err_amax, 1e-2, ms);
  return err <= 1e-2 && err_amax <= 1e-2;
}

// --- 3. causal SDPA ---------------------------------------------------------------------
struct SdpaSizes {
  int64_t b, h, s, d;
};
inline bool sdpa_causal(Runner& r, std::mt19937& gen, SdpaSizes z) {
  const int64_t b = z.b, h = z.h, s = z.s, d = z.d;
  const double scale = 1.0 / std::sqrt(double(d));
  Graph g;
  g.set_name("sdpa").set_io_data_type(DataType::BFloat16);
  auto mk = [&](const char* n) {
    return g.tensor(
        ir::TensorAttrs().set_name(n).set_dim({b, h, s, d}).set_stride({h * s * d, s * d, d, 1}));
  };
  auto Q = mk("Q"), K = mk("K"), V = mk("V");
  ir::SdpaAttrs at;
  at.is_inference = true;
  at.attn_scale = scale;
  at.causal = true;
  auto [O, stats] = g.sdpa(Q, K, V, at);
  O->set_output(true).set_name("O");
  Buffer q(b * h * s * d, DataType::BFloat16, r.gpu, &gen),
      k(b * h * s * d, DataType::BFloat16, r.gpu, &gen),
      v(b * h * s * d, DataType::BFloat16, r.gpu, &gen),
      o(b * h * s * d, DataType::BFloat16, r.gpu, nullptr);
  Status st = g.validate();
  if (!st.is_ok()) throw std::runtime_error(st.to_string());
  VariantPack pack{{Q->uid, q.ptr()}, {K->uid, k.ptr()}, {V->uid, v.ptr()}, {O->uid, o.ptr()}};
  double ms = r.run(g, pack, r.gpu ? 50 : 5);
  o.fetch();
  std::vector<double> ref(o.host.size());
  for (int64_t bh = 0; bh < b * h; ++bh)
    for (int64_t i = 0; i < s; ++i) {
      std::vector<double> p(static_cast<size_t>(i + 1));
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j <= i; ++j) {
        double acc = 0;
        for (int64_t c = 0; c < d; ++c)
          acc += q.host[(bh * s + i) * d + c] * k.host[(bh * s + j) * d + c];
        p[j] = acc * scale;
        mx = std::max(mx, p[j]);
      }
      for (auto& x : p) sum += (x = std::exp(x - mx));
      for (int64_t c = 0; c < d; ++c) {
        double acc = 0;
        for (int64_t j = 0; j <= i; ++j) acc += p[j] * v.host[(bh * s + j) * d + c];
        ref[(bh * s + i) * d + c] = acc / sum;
      }
    }
  double err = rel_err(o.host, ref);
  report("causal sdpa (bf16)", err, 2e-2, ms);
  return err <= 2e-2;
}

// Runs `fn` and reports an exception as a failure.
template <class Fn>
bool checked(Fn&& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    std::printf("  FAILED: %s\n", e.what());
    return false;
  }
}

// A sample's main: the runner from the command line, then `sample(runner, generator)` (seeded,
// checked), printing PASSED or FAILED; the exit code says which (2: bad arguments).
template <class Fn>
int sample_main(int argc, char** argv, const char* name, Fn&& sample) {
  Runner r;
  if (!r.init(argc, argv, name)) return 2;
  std::mt19937 gen(2026);
  const bool ok = checked([&] { return sample(r, gen); });
  std::printf("%s: %s\n", name, ok ? "PASSED" : "FAILED");
  return ok ? 0 : 1;
}

}  // namespace tutorial
