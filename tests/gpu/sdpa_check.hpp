// Shared by the SDPA GPU tests that compare a whole graph with the reference engine: plausible
// STATS inputs for backward graphs, the usual tolerances, and one SDPA_RESULT line per case.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "harness.hpp"

namespace dnngraph::gpu_test {

// STATS as a log-sum-exp of the random scores would be: around 1 (+-0.5), in place.
inline void plausible_stats(std::vector<unsigned char>& host) {
  for (size_t off = 0; off + 4 <= host.size(); off += 4) {
    float f;
    std::memcpy(&f, host.data() + off, 4);
    f = 1.0f + 0.5f * f;
    std::memcpy(host.data() + off, &f, 4);
  }
}

// Twice the dtype tolerance, gradients compared above 0.15 and forward outputs above 2e-2 in
// magnitude; a FLOAT input named "STATS" made plausible.
inline CompareOptions sdpa_options(bool backward) {
  CompareOptions o;
  o.tol_scale = 2;
  o.min_abs = backward ? 0.15 : 2e-2;
  o.adjust_input = [](const ir::TensorAttrs& t, std::vector<unsigned char>& host) {
    if (t.name == "STATS") plausible_stats(host);
  };
  return o;
}

// One SDPA problem: Q [b, hq, sq, d], K and V [b, hk, skv, d] in type t.
struct SdpaCase {
  const char* name;
  DataType t = DataType::BFloat16;
  int64_t b = 2, hq = 4, hk = 4, sq = 128, skv = 128, d = 64;
  bool causal = false;
  bool backward = false;
};

// The options of c: attn_scale 1/sqrt(d), the causal mask when c.causal.
inline ir::SdpaOptions sdpa_options_of(const SdpaCase& c) {
  ir::SdpaOptions a;
  a.causal = c.causal;
  if (c.causal) a.right_bound = 0;
  a.attn_scale = 1.0 / std::sqrt(static_cast<double>(c.d));
  return a;
}

// Adds inputs Q, K, V (and O, DO, STATS for the backward), the sdpa (training) or
// sdpa_backward node with `a` and `extra`, and its outputs O, STATS (or DQ, DK, DV).
inline void add_sdpa(Graph& g, const SdpaCase& c, const ir::SdpaOptions& a,
                     const ir::SdpaInputs& extra) {
  const DataType t = c.t;
  g.set_io_data_type(t);
  auto q = input(g, "Q", {c.b, c.hq, c.sq, c.d}, t);
  auto k = input(g, "K", {c.b, c.hk, c.skv, c.d}, t);
  auto v = input(g, "V", {c.b, c.hk, c.skv, c.d}, t);
  if (!c.backward) {
    auto out = g.sdpa(q, k, v, ir::SdpaAttrs{a, false, {}}, extra);
    finish(out[0], "O", {c.b, c.hq, c.sq, c.d}, t);
    finish(out[1], "STATS", {c.b, c.hq, c.sq, 1}, DataType::Float);
    return;
  }
  auto o = input(g, "O", {c.b, c.hq, c.sq, c.d}, t);
  auto d_o = input(g, "DO", {c.b, c.hq, c.sq, c.d}, t);
  auto stats = input(g, "STATS", {c.b, c.hq, c.sq, 1}, DataType::Float);
  auto out = g.sdpa_backward(q, k, v, o, d_o, stats, ir::SdpaBwdAttrs{a}, extra);
  finish(out[0], "DQ", {c.b, c.hq, c.sq, c.d}, t);
  finish(out[1], "DK", {c.b, c.hk, c.skv, c.d}, t);
  finish(out[2], "DV", {c.b, c.hk, c.skv, c.d}, t);
}

// Runs `make` on both engines, prints "SDPA_RESULT <name> <type>: ..." and EXPECTs a match
// (with sdpa_options(c.backward)).
inline void check_sdpa(const SdpaCase& c, const std::function<void(Graph&)>& make) {
  const char* name = c.name;
  const DataType t = c.t;
  const RunReport r = run_and_compare(make, sdpa_options(c.backward));
  std::printf(
      "SDPA_RESULT %s %s: %s plan %s, %lld compared, %lld mismatches, max abs err %.4g%s%s\n", name,
      data_type_name(t).data(), r.status.is_ok() ? "ok" : r.status.to_string().c_str(),
      r.plan_name.c_str(), static_cast<long long>(r.compared), static_cast<long long>(r.mismatches),
      r.max_abs_err, r.mismatches ? ", first: " : "", r.first_mismatch.c_str());
  expect_report_ok(r);
}

}  // namespace dnngraph::gpu_test
