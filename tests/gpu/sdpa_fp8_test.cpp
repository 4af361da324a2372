// FP8 attention with per-tensor scaling (sdpa_fp8, sdpa_fp8_backward) on the cuDNN engine
// against the reference engine (which applies the same FP8 roundings of P and dS). Outputs are
// poisoned (NaN) before every run; inputs are uniform in [-1, 1] stored as FP8, the factors
// fixed (below) so that P * SCALE_S, dS * SCALE_DP and every output sit well inside E4M3's
// range, and the backward's STATS near log(s_kv) (the log-sum-exp of a real softmax row of
// these inputs), so that E = exp(S - STATS) has a real softmax row's magnitude.
// Shapes: d = 128 (the only head dim cuDNN's FP8 backward takes on some GPUs; docs).
// Tolerance: one FP8 step (E4M3 12.5 %, E5M2 25 % relative, plus a small floor) of the output or
// of its largest term, whichever is larger. cuDNN's exp and summation order can move an element
// of P8 / dS8 to the neighbouring FP8 value; where an output's terms cancel to near zero, that
// step in one term (e.g. P_ij V_jd of O) is large against the output itself. Measured on the
// H200 (2026-12-02): with the output alone as the scale, 15, 14 and 2 of 132,098 / 264,194 /
// 393,220 elements of the causal, GQA and E5M2 cases failed, all near zero (e.g. dQ 0.1875 vs
// 0.109, whose largest term is 0.28: tolerance 0.113). Over these inputs the largest term is
// below |output| for about half of the elements, so the bound stays one FP8 step there.
// Each case prints one SDPA_FP8_RESULT line with the plan and the largest error.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "harness.hpp"

namespace dnngraph::gpu_test {
namespace {

constexpr DataType kE4 = DataType::FP8_E4M3, kE5 = DataType::FP8_E5M2;

struct Case {
  const char* name;
  int64_t b = 2, hq = 4, hk = 4, sq = 128, skv = 128, d = 128;
  bool causal = false, backward = false;
  DataType grad = kE4;  // DO and DQ / DK / DV
};

const std::map<std::string, float>& factors() {
  static const std::map<std::string, float> f = {
      {"DESCALE_Q", 1.0f},      {"DESCALE_K", 1.0f},  {"DESCALE_V", 1.0f},
      {"DESCALE_S", 1 / 256.f}, {"SCALE_S", 256.f},   {"SCALE_O", 16.f},
      {"DESCALE_O", 1.0f},      {"DESCALE_DO", 1.0f}, {"DESCALE_DP", 1 / 4096.f},
      {"SCALE_DQ", 16.f},       {"SCALE_DK", 16.f},   {"SCALE_DV", 16.f},
      {"SCALE_DP", 4096.f}};
  return f;
}

std::function<void(Graph&)> make_graph(const Case& c) {
  return [c](Graph& g) {
    g.set_io_data_type(kE4);
    auto q = input(g, "Q", {c.b, c.hq, c.sq, c.d}, kE4);
    auto k = input(g, "K", {c.b, c.hk, c.skv, c.d}, kE4);
    auto v = input(g, "V", {c.b, c.hk, c.skv, c.d}, kE4);
    auto f = [&](const char* name) { return input(g, name, {1, 1, 1, 1}, DataType::Float); };
    ir::SdpaOptions a;
    a.causal = c.causal;
    a.attn_scale = 1.0 / std::sqrt(static_cast<double>(c.d));
    ir::SdpaFp8Scales sc;
    sc.descale_q = f("DESCALE_Q"), sc.descale_k = f("DESCALE_K"), sc.descale_v = f("DESCALE_V");
    sc.descale_s = f("DESCALE_S"), sc.scale_s = f("SCALE_S");
    if (!c.backward) {
      sc.scale_o = f("SCALE_O");
      ir::SdpaFp8Attrs fa;
      static_cast<ir::SdpaOptions&>(fa) = a;
      fa.is_inference = false;
      auto out = g.sdpa_fp8(q, k, v, sc, fa);
      finish(out[0], "O", {c.b, c.hq, c.sq, c.d}, kE4);
      finish(out[1], "STATS", {c.b, c.hq, c.sq, 1}, DataType::Float);
      finish(out[2], "AMAX_S", {1, 1, 1, 1}, DataType::Float);
      finish(out[3], "AMAX_O", {1, 1, 1, 1}, DataType::Float);
      return;
    }
    sc.descale_o = f("DESCALE_O"), sc.descale_do = f("DESCALE_DO");
    sc.descale_dp = f("DESCALE_DP"), sc.scale_dq = f("SCALE_DQ"), sc.scale_dk = f("SCALE_DK");
    sc.scale_dv = f("SCALE_DV"), sc.scale_dp = f("SCALE_DP");
    auto o = input(g, "O", {c.b, c.hq, c.sq, c.d}, kE4);
    auto d_o = input(g, "DO", {c.b, c.hq, c.sq, c.d}, c.grad);
    auto stats = input(g, "STATS", {c.b, c.hq, c.sq, 1}, DataType::Float);
    ir::SdpaFp8BwdAttrs ba;
    static_cast<ir::SdpaOptions&>(ba) = a;
    auto out = g.sdpa_fp8_backward(q, k, v, o, d_o, stats, sc, ba);
    finish(out[0], "DQ", {c.b, c.hq, c.sq, c.d}, c.grad);
    finish(out[1], "DK", {c.b, c.hk, c.skv, c.d}, c.grad);
    finish(out[2], "DV", {c.b, c.hk, c.skv, c.d}, c.grad);
    const char* amax[] = {"AMAX_DQ", "AMAX_DK", "AMAX_DV", "AMAX_DP"};
    for (int i = 0; i < 4; ++i) finish(out[3 + i], amax[i], {1, 1, 1, 1}, DataType::Float);
  };
}

// The largest term of each output element (the tolerance's scale; see the top), in float64
// from the test's inputs: O: SCALE_O max_j P_ij |V_jd|; dV: SCALE_DV max_i P_ij |dO_id|;
// dQ: SCALE_DQ a max_j |dS_ij| |K_jd|; dK: SCALE_DK a max_i |dS_ij| |Q_id|, where
// dS = P (dO V^T - rowsum(dO O)) and a is the attention scale (all descale factors are 1 here).
void largest_terms(const Case& c, const CompareOptions::HostTensors& in,
                   std::map<std::string, std::vector<double>>& mag) {
  auto add = [](double& acc, double term) { acc = std::max(acc, term); };
  const double a = 1.0 / std::sqrt(static_cast<double>(c.d));
  std::map<std::string, std::vector<double>> x;  // the inputs decoded
  for (const char* name : {"Q", "K", "V", "O", "DO", "STATS"}) {
    if (!in.count(name)) continue;
    const DataType t = name[0] == 'S' ? DataType::Float : name[0] == 'D' ? c.grad : kE4;
    const auto& bytes = *in.at(name);
    for (size_t off = 0; off < bytes.size(); off += data_type_size(t))
      x[name].push_back(detail_::load(bytes.data() + off, t));
  }
  const double *Q = x["Q"].data(), *K = x["K"].data(), *V = x["V"].data(), *O = x["O"].data(),
               *dO = x["DO"].data();
  auto at = [&](const double* t, int64_t b, int64_t h, int64_t s, int64_t d, int64_t heads,
                int64_t len) { return t[((b * heads + h) * len + s) * c.d + d]; };
  const double s_o = factors().at("SCALE_O"), s_dq = factors().at("SCALE_DQ"),
               s_dk = factors().at("SCALE_DK"), s_dv = factors().at("SCALE_DV");
  const int64_t group = c.hq / c.hk;
  auto& o = mag[c.backward ? "DQ" : "O"];
  o.assign(static_cast<size_t>(c.b * c.hq * c.sq * c.d), 0.0);
  std::vector<double>* dk = nullptr;
  std::vector<double>* dv = nullptr;
  if (c.backward) {
    (dk = &mag["DK"])->assign(static_cast<size_t>(c.b * c.hk * c.skv * c.d), 0.0);
    (dv = &mag["DV"])->assign(dk->size(), 0.0);
  }
  std::vector<double> p(static_cast<size_t>(c.skv)), ds(p.size());
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.hq; ++h)
      for (int64_t i = 0; i < c.sq; ++i) {
        const int64_t hk = h / group, last = c.causal ? std::min(i, c.skv - 1) : c.skv - 1;
        double rowmax = -INFINITY, sum = 0;
        for (int64_t j = 0; j <= last; ++j) {
          double qk = 0;
          for (int64_t d = 0; d < c.d; ++d)
            qk += at(Q, b, h, i, d, c.hq, c.sq) * at(K, b, hk, j, d, c.hk, c.skv);
          p[j] = a * qk;
          rowmax = std::max(rowmax, p[j]);
        }
        if (!c.backward) {  // softmax of the row
          for (int64_t j = 0; j <= last; ++j) sum += (p[j] = std::exp(p[j] - rowmax));
          for (int64_t d = 0; d < c.d; ++d) {
            double m = 0;
            for (int64_t j = 0; j <= last; ++j)
              add(m, p[j] / sum * std::fabs(at(V, b, hk, j, d, c.hk, c.skv)));
            o[((b * c.hq + h) * c.sq + i) * c.d + d] = s_o * m;
          }
          continue;
        }
        const double stats = x["STATS"][(b * c.hq + h) * c.sq + i];
        double rowsum = 0;  // D_i = sum_d dO_id O_id
        for (int64_t d = 0; d < c.d; ++d)
          rowsum += at(dO, b, h, i, d, c.hq, c.sq) * at(O, b, h, i, d, c.hq, c.sq);
        for (int64_t j = 0; j <= last; ++j) {
          p[j] = std::exp(p[j] - stats);
          double dp = 0;
          for (int64_t d = 0; d < c.d; ++d)
            dp += at(dO, b, h, i, d, c.hq, c.sq) * at(V, b, hk, j, d, c.hk, c.skv);
          ds[j] = std::fabs(p[j] * (dp - rowsum));
        }
        for (int64_t d = 0; d < c.d; ++d) {
          double m = 0;
          const double q = std::fabs(at(Q, b, h, i, d, c.hq, c.sq));
          const double g = std::fabs(at(dO, b, h, i, d, c.hq, c.sq));
          for (int64_t j = 0; j <= last; ++j) {
            const int64_t kv = ((b * c.hk + hk) * c.skv + j) * c.d + d;
            add(m, ds[j] * std::fabs(at(K, b, hk, j, d, c.hk, c.skv)));
            add((*dk)[kv], s_dk * a * ds[j] * q);
            add((*dv)[kv], s_dv * p[j] * g);
          }
          o[((b * c.hq + h) * c.sq + i) * c.d + d] = s_dq * a * m;
        }
      }
}

CompareOptions options(const Case& c) {
  CompareOptions o;
  o.min_abs = 0.02;
  o.report_mismatches = 8;
  o.largest_term = [c](const CompareOptions::HostTensors& in,
                       std::map<std::string, std::vector<double>>& mag) {
    largest_terms(c, in, mag);
  };
  o.adjust_input = [c](const ir::TensorAttrs& t, std::vector<unsigned char>& host) {
    auto it = factors().find(t.name);
    if (it != factors().end()) std::memcpy(host.data(), &it->second, sizeof(float));
    if (t.name == "STATS") {
      // log-sum-exp of a row of s_kv (or fewer, causal) scores of about 0.33 spread
      for (size_t off = 0; off + 4 <= host.size(); off += 4) {
        float u;
        std::memcpy(&u, host.data() + off, 4);
        const float lse = std::log(static_cast<float>(c.skv)) + 0.05f + 0.05f * u;
        std::memcpy(host.data() + off, &lse, 4);
      }
    }
  };
  return o;
}

void check(const Case& c) {
  const RunReport r = run_and_compare(make_graph(c), options(c));
  std::printf("SDPA_FP8_RESULT %s: %s plan %s, %lld compared, %lld mismatches, max abs err %.4g\n",
              c.name, r.status.is_ok() ? "ok" : r.status.to_string().c_str(), r.plan_name.c_str(),
              static_cast<long long>(r.compared), static_cast<long long>(r.mismatches),
              r.max_abs_err);
  for (const auto& m : r.mismatch_list)
    std::printf("SDPA_FP8_MISMATCH %s: %s\n", c.name, m.c_str());
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  EXPECT_GT(r.compared, 0);
  EXPECT_EQ(r.mismatches, 0) << r.mismatches << " of " << r.compared
                             << " elements differ; first: " << r.first_mismatch << " (plan "
                             << r.plan_name << ")";
}

TEST(GpuSdpaFp8, ForwardCausal) {
  DNNGRAPH_REQUIRE_GPU();
  Case c{"fwd causal b2 h4 s128 d128"};
  c.causal = true;
  check(c);
}
TEST(GpuSdpaFp8, ForwardNonCausalSqNeSkv) {
  DNNGRAPH_REQUIRE_GPU();
  Case c{"fwd non-causal b2 h4 sq64 skv256 d128"};
  c.sq = 64, c.skv = 256;
  check(c);
}
TEST(GpuSdpaFp8, ForwardGqa) {
  DNNGRAPH_REQUIRE_GPU();
  Case c{"fwd causal GQA hq8 hk2 s128 d128"};
  c.hq = 8, c.hk = 2, c.causal = true;
  check(c);
}
TEST(GpuSdpaFp8, BackwardCausalE4m3) {
  DNNGRAPH_REQUIRE_GPU();
  Case c{"bwd causal b2 h4 s128 d128 e4m3"};
  c.causal = c.backward = true;
  check(c);
}
TEST(GpuSdpaFp8, BackwardNonCausalE4m3) {
  DNNGRAPH_REQUIRE_GPU();
  Case c{"bwd non-causal b2 h4 s128 d128 e4m3"};
  c.backward = true;
  check(c);
}
TEST(GpuSdpaFp8, BackwardE5m2Gradients) {
  DNNGRAPH_REQUIRE_GPU();
  Case c{"bwd causal b2 h4 s128 d128 dO/dQKV e5m2"};
  c.causal = c.backward = true;
  c.grad = kE5;
  check(c);
}

}  // namespace
}  // namespace dnngraph::gpu_test
