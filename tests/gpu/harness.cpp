#include "harness.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

namespace dnngraph::gpu_test {

std::string gpu_unavailable_reason() {
  static const std::string reason = [] {
    SystemInfo s = system_info();
    if (!s.cuda_built) return std::string("dnngraph was built without the cuDNN engine");
    if (s.gpus.empty()) return "no GPU: " + s.gpu_error;
    if (!s.cudnn_loaded) return "cuDNN not loaded: " + s.cudnn_error;
    return std::string();
  }();
  return reason;
}

Tolerance default_tolerance(DataType t) {
  switch (t) {
    case DataType::Float: return {1e-5, 1e-6};
    case DataType::Double: return {1e-12, 1e-14};
    case DataType::BFloat16: return {2e-2, 1e-2};
    case DataType::Half: return {1e-2, 2e-3};
    default: return {0, 0};
  }
}

std::vector<int64_t> strides_for(const std::vector<int64_t>& dim, bool channels_last) {
  if (!channels_last || dim.size() < 3) return ir::packed_strides(dim);
  // N, spatial..., C from outermost to innermost.
  std::vector<int64_t> order{0};
  for (size_t i = 2; i < dim.size(); ++i) order.push_back(static_cast<int64_t>(i));
  order.push_back(1);
  return ir::packed_strides(dim, order);
}

uint16_t to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int32_t e = static_cast<int32_t>((x >> 23) & 0xff);
  uint32_t mant = x & 0x7fffffu;
  if (e == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  int32_t exp = e - 127 + 15;
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - exp;
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(h);
}

float from_half(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  int32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0x1f) {
    x = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {
      exp = 1;
      while (!(mant & 0x400u)) mant <<= 1, --exp;
      mant &= 0x3ffu;
      x = sign | (static_cast<uint32_t>(exp - 15 + 127) << 23) | (mant << 13);
    }
  } else {
    x = sign | (static_cast<uint32_t>(exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint16_t to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float from_bf16(uint16_t b) {
  uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

namespace {

double load(const unsigned char* p, DataType t) {
  switch (t) {
    case DataType::Float: { float f; std::memcpy(&f, p, 4); return f; }
    case DataType::Double: { double d; std::memcpy(&d, p, 8); return d; }
    case DataType::Half: { uint16_t h; std::memcpy(&h, p, 2); return from_half(h); }
    case DataType::BFloat16: { uint16_t h; std::memcpy(&h, p, 2); return from_bf16(h); }
    case DataType::Int32: { int32_t i; std::memcpy(&i, p, 4); return i; }
    case DataType::Int64: { int64_t i; std::memcpy(&i, p, 8); return static_cast<double>(i); }
    case DataType::Int8: return static_cast<int8_t>(*p);
    case DataType::UInt8: case DataType::Boolean: return *p;
    default: return std::nan("");
  }
}

void store(unsigned char* p, DataType t, double v) {
  switch (t) {
    case DataType::Float: { float f = static_cast<float>(v); std::memcpy(p, &f, 4); break; }
    case DataType::Double: std::memcpy(p, &v, 8); break;
    case DataType::Half: { uint16_t h = to_half(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
    case DataType::BFloat16: { uint16_t h = to_bf16(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
    case DataType::Int32: { int32_t i = static_cast<int32_t>(std::lround(v)); std::memcpy(p, &i, 4); break; }
    case DataType::Int64: { int64_t i = std::llround(v); std::memcpy(p, &i, 8); break; }
    case DataType::Int8: *p = static_cast<unsigned char>(static_cast<int8_t>(std::lround(v))); break;
    case DataType::UInt8: *p = static_cast<unsigned char>(std::lround(std::fabs(v))); break;
    case DataType::Boolean: *p = v > 0 ? 1 : 0; break;
    default: break;
  }
}

struct Buffer {
  ir::Tensor t;
  size_t bytes = 0;
  std::vector<unsigned char> host;  // inputs: data; outputs: results
  bool is_output = false;
};

size_t storage_bytes(const ir::TensorAttrs& t) {
  return static_cast<size_t>(std::max<int64_t>(t.storage_elements(), 1) *
                             data_type_size(t.data_type));
}

// Non-virtual tensors of a built graph: inputs (no producer) get data, outputs get poison.
std::vector<Buffer> buffers_of(const Graph& g) {
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
  std::sort(out.begin(), out.end(), [](const Buffer& a, const Buffer& b) { return a.t->uid < b.t->uid; });
  return out;
}

struct DeviceBuffers {
  std::vector<void*> ptrs;
  void* ws = nullptr;
  ~DeviceBuffers() {
    for (void* p : ptrs) cudaFree(p);
    if (ws) cudaFree(ws);
  }
};

}  // namespace

RunReport run_and_compare(const std::function<void(Graph&)>& make, const CompareOptions& o) {
  RunReport r;
  auto gpu = Handle::create(Device::cuda(0));
  auto cpu = Handle::create(Device::cpu());
  if (!gpu) { r.status = gpu.status(); return r; }
  if (!cpu) { r.status = cpu.status(); return r; }
  Graph gg, cg;
  make(gg);
  make(cg);
  if (Status s = gg.build(gpu.value(), o.modes); !s) {
    r.status = Status(s.code(), "cuDNN build: " + s.message());
    return r;
  }
  if (Status s = cg.build(cpu.value()); !s) {
    r.status = Status(s.code(), "reference build: " + s.message());
    return r;
  }
  const int64_t sel = gg.selected_plan_index();
  for (const auto& c : gg.candidates())
    if (c.built && sel >= 0) { r.plan_name = c.info.name; break; }

  std::vector<Buffer> gb = buffers_of(gg), cb = buffers_of(cg);
  if (gb.size() != cb.size()) {
    r.status = make_error(ErrorCode::Internal, "graphs differ in their tensors");
    return r;
  }
  // Fresh random inputs (never all zeros); integer-valued for integral types.
  std::mt19937 gen(o.seed);
  std::uniform_real_distribution<float> dist(o.input_lo, o.input_hi);
  for (size_t i = 0; i < gb.size(); ++i) {
    Buffer& b = gb[i];
    b.host.assign(b.bytes, 0xff);  // poison (NaN) for outputs, overwritten for inputs
    if (b.is_output) continue;
    const int64_t es = data_type_size(b.t->data_type);
    for (size_t off = 0; off + static_cast<size_t>(es) <= b.bytes; off += static_cast<size_t>(es)) {
      double v = dist(gen);
      if (is_integral(b.t->data_type)) v = std::round(v * 4);
      store(b.host.data() + off, b.t->data_type, v);
    }
  }
  // GPU run.
  DeviceBuffers dev;
  VariantPack gpack, cpack;
  for (auto& b : gb) {
    void* p = nullptr;
    if (cudaMalloc(&p, b.bytes) != cudaSuccess) {
      r.status = make_error(ErrorCode::BackendError, "cudaMalloc failed");
      return r;
    }
    dev.ptrs.push_back(p);
    cudaMemcpy(p, b.host.data(), b.bytes, cudaMemcpyHostToDevice);
    gpack[b.t->uid] = p;
  }
  const int64_t ws = gg.get_workspace_size().value();
  if (ws > 0) cudaMalloc(&dev.ws, static_cast<size_t>(ws));
  if (Status s = gg.execute(*gpu.value(), gpack, dev.ws, ws); !s) {
    r.status = Status(s.code(), "cuDNN execute: " + s.message());
    return r;
  }
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
    r.status = make_error(ErrorCode::BackendError, "CUDA: ", cudaGetErrorString(e));
    return r;
  }
  for (size_t i = 0; i < gb.size(); ++i)
    if (gb[i].is_output) cudaMemcpy(gb[i].host.data(), dev.ptrs[i], gb[i].bytes, cudaMemcpyDeviceToHost);
  // Reference run on the same inputs.
  for (size_t i = 0; i < cb.size(); ++i) {
    cb[i].host = gb[i].is_output ? std::vector<unsigned char>(cb[i].bytes, 0xff) : gb[i].host;
    cpack[cb[i].t->uid] = cb[i].host.data();
  }
  std::vector<unsigned char> cws(static_cast<size_t>(std::max<int64_t>(cg.get_workspace_size().value(), 1)));
  if (Status s = cg.execute(*cpu.value(), cpack, cws.data(), static_cast<int64_t>(cws.size())); !s) {
    r.status = Status(s.code(), "reference execute: " + s.message());
    return r;
  }
  // Compare every element of every output (strided walk over the dims).
  for (size_t i = 0; i < gb.size(); ++i) {
    if (!gb[i].is_output) continue;
    const ir::TensorAttrs& t = *gb[i].t;
    Tolerance tol = default_tolerance(t.data_type);
    tol.rel *= o.tol_scale;
    tol.abs = tol.abs * o.tol_scale + o.min_abs;
    const int64_t es = data_type_size(t.data_type);
    std::vector<int64_t> idx(t.dim.size(), 0);
    for (int64_t n = 0; n < t.volume(); ++n) {
      int64_t off = 0;
      for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.stride[d];
      const double got = load(gb[i].host.data() + off * es, t.data_type);
      const double want = load(cb[i].host.data() + off * es, t.data_type);
      ++r.compared;
      const bool ok = std::isfinite(got) ? std::fabs(got - want) <= tol.abs + tol.rel * std::fabs(want)
                                         : (std::isnan(got) ? std::isnan(want) : got == want);
      if (!ok && r.mismatches++ == 0) {
        std::ostringstream os;
        os << "tensor '" << t.name << "' element " << n << " [";
        for (size_t d = 0; d < idx.size(); ++d) os << (d ? "," : "") << idx[d];
        os << "]: cuDNN " << got << " vs reference " << want;
        r.first_mismatch = os.str();
      }
      for (size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < t.dim[d]) break;
        idx[d] = 0;
      }
    }
  }
  return r;
}

void expect_matches_reference(const std::function<void(Graph&)>& make, const CompareOptions& o) {
  RunReport r = run_and_compare(make, o);
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  EXPECT_GT(r.compared, 0);
  EXPECT_EQ(r.mismatches, 0) << r.mismatches << " of " << r.compared
                             << " elements differ; first: " << r.first_mismatch << " (plan "
                             << r.plan_name << ")";
}

}  // namespace dnngraph::gpu_test
