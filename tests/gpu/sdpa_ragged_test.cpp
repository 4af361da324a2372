// SDPA on ragged (THD) tensors and with paged K/V on the cuDNN engine against the reference
// engine (not yet checked on a GPU when written: the lead runs it on the H200). Outputs are
// poisoned (NaN) before every run; the bytes past the packed tokens stay NaN on both engines.
//
// Ragged: [b, h, s, d] tensors with strides [s*h*d, d, h*d, 1] (BSHD storage) whose sequences
// are packed token after token; the offsets ([b+1,1,1,1] INT32) count elements. Paged: K and V
// are pools [num_pages, h, page, d] and each sequence's page table row lists its pages.
#include <numeric>

#include "harness.hpp"
#include "sdpa_cases.hpp"

namespace dnngraph::gpu_test {
namespace {

constexpr int64_t kB = 3, kH = 4, kS = 128, kD = 64;
const std::vector<int32_t> kLenQ = {100, 128, 37}, kLenKv = {128, 64, 90};

std::vector<int64_t> thd_strides() { return {kS * kH * kD, kD, kH * kD, 1}; }

std::vector<int32_t> offsets(const std::vector<int32_t>& len, int64_t per_token) {
  std::vector<int32_t> r{0};
  for (int32_t l : len) r.push_back(r.back() + static_cast<int32_t>(l * per_token));
  return r;
}

ir::Tensor thd_input(Graph& g, const char* name, DataType t, const ir::Tensor& off) {
  auto x = input(g, name, {kB, kH, kS, kD}, t);
  x->set_stride(thd_strides()).set_ragged_offset(off);
  return x;
}

void thd_output(const ir::Tensor& y, const char* name, DataType t, const ir::Tensor& off) {
  finish(y, name, {kB, kH, kS, kD}, t);
  y->set_stride(thd_strides()).set_ragged_offset(off);
}

CompareOptions ragged_options(bool backward) {
  CompareOptions o = sdpa_options(backward, kLenQ, kLenKv);
  auto base = o.adjust_input;
  o.adjust_input = [base](const ir::TensorAttrs& t, std::vector<unsigned char>& host) {
    base(t, host);
    if (t.name == "OFF_Q") put_int32(host, offsets(kLenQ, kH * kD));
    if (t.name == "OFF_KV") put_int32(host, offsets(kLenKv, kH * kD));
  };
  return o;
}

void check(const char* name, const std::function<void(Graph&)>& make, const CompareOptions& o) {
  const RunReport r = run_and_compare(make, o);
  print_result("SDPA_RAGGED_RESULT", name, r);
  expect_report_ok(r);
}

ir::SdpaInputs lengths(Graph& g) {
  ir::SdpaInputs extra;
  extra.seq_len_q = input(g, "SEQ_LEN_Q", {kB, 1, 1, 1}, DataType::Int32);
  extra.seq_len_kv = input(g, "SEQ_LEN_KV", {kB, 1, 1, 1}, DataType::Int32);
  return extra;
}

// The ragged graph's inputs: offsets OFF_Q (Q, O, DO) and OFF_KV (K, V), Q, K and V, in bf16.
struct RaggedQkv {
  ir::Tensor off_q, off_kv, q, k, v;
};

RaggedQkv ragged_qkv(Graph& g) {
  const DataType t = DataType::BFloat16;
  g.set_io_data_type(t);
  RaggedQkv r;
  r.off_q = input(g, "OFF_Q", {kB + 1, 1, 1, 1}, DataType::Int32);
  r.off_kv = input(g, "OFF_KV", {kB + 1, 1, 1, 1}, DataType::Int32);
  r.q = thd_input(g, "Q", t, r.off_q);
  r.k = thd_input(g, "K", t, r.off_kv);
  r.v = thd_input(g, "V", t, r.off_kv);
  return r;
}

TEST(GpuSdpaRagged, ForwardCausalBf16) {
  DNNGRAPH_REQUIRE_GPU();
  check(
      "forward_causal_bf16",
      [](Graph& g) {
        const RaggedQkv r = ragged_qkv(g);
        ir::SdpaAttrs a;
        a.is_inference = false;
        a.causal = true;
        a.padding_mask = true;
        a.attn_scale = 0.125;
        auto out = g.sdpa(r.q, r.k, r.v, a, lengths(g));
        thd_output(out[0], "O", DataType::BFloat16, r.off_q);
        finish(out[1], "STATS", {kB, kH, kS, 1}, DataType::Float);
      },
      ragged_options(false));
}

TEST(GpuSdpaRagged, BackwardBf16) {
  DNNGRAPH_REQUIRE_GPU();
  check(
      "backward_bf16",
      [](Graph& g) {
        const DataType t = DataType::BFloat16;
        const RaggedQkv r = ragged_qkv(g);
        auto o = thd_input(g, "O", t, r.off_q), d_o = thd_input(g, "DO", t, r.off_q);
        auto stats = input(g, "STATS", {kB, kH, kS, 1}, DataType::Float);
        ir::SdpaBwdAttrs a;
        a.padding_mask = true;
        a.attn_scale = 0.125;
        a.max_total_seq_len_q = std::accumulate(kLenQ.begin(), kLenQ.end(), int64_t{0});
        a.max_total_seq_len_kv = std::accumulate(kLenKv.begin(), kLenKv.end(), int64_t{0});
        auto out = g.sdpa_backward(r.q, r.k, r.v, o, d_o, stats, a, lengths(g));
        thd_output(out[0], "DQ", t, r.off_q);
        thd_output(out[1], "DK", t, r.off_kv);
        thd_output(out[2], "DV", t, r.off_kv);
      },
      ragged_options(true));
}

TEST(GpuSdpaRagged, MultiplierIsNotSupportedOnCudnn919) {
  DNNGRAPH_REQUIRE_GPU();
  const RunReport r = run_and_compare(
      [](Graph& g) {
        const DataType t = DataType::BFloat16;
        g.set_io_data_type(t);
        auto oq = input(g, "OFF_Q", {kB + 1, 1, 1, 1}, DataType::Int32);
        auto q = thd_input(g, "Q", t, oq);
        q->set_ragged_offset_multiplier(kH * kD);
        auto k = input(g, "K", {kB, kH, kS, kD}, t), v = input(g, "V", {kB, kH, kS, kD}, t);
        ir::SdpaAttrs a;
        a.padding_mask = true;
        auto out = g.sdpa(q, k, v, a, lengths(g));
        finish(out[0], "O", {kB, kH, kS, kD}, t);
      },
      ragged_options(false));
  ASSERT_FALSE(r.status.is_ok());
  EXPECT_NE(r.status.message().find("9.24"), std::string::npos) << r.status.to_string();
}

constexpr int64_t kPage = 64, kPerSeq = 2, kPages = kB * kPerSeq + 2;

TEST(GpuSdpaPaged, ForwardBf16) {
  DNNGRAPH_REQUIRE_GPU();
  CompareOptions o = ragged_options(false);
  auto base = o.adjust_input;
  o.adjust_input = [base](const ir::TensorAttrs& t, std::vector<unsigned char>& host) {
    base(t, host);
    if (t.name == "TABLE") {  // pages in reverse order, skipping the first two
      std::vector<int32_t> table;
      for (int64_t i = 0; i < kB * kPerSeq; ++i)
        table.push_back(static_cast<int32_t>(kPages - 1 - i));
      std::memcpy(host.data(), table.data(), table.size() * sizeof(int32_t));
    }
  };
  o.skip = [](const ir::TensorAttrs& t, const std::vector<int64_t>& idx) {
    return t.name == "O" && idx[2] >= kLenQ[static_cast<size_t>(idx[0])];
  };
  check(
      "paged_forward_bf16",
      [](Graph& g) {
        const DataType t = DataType::BFloat16;
        g.set_io_data_type(t);
        auto q = input(g, "Q", {kB, kH, kS, kD}, t);
        auto kc = input(g, "K_POOL", {kPages, kH, kPage, kD}, t);
        auto vc = input(g, "V_POOL", {kPages, kH, kPage, kD}, t);
        ir::SdpaInputs extra = lengths(g);
        extra.page_table_k = extra.page_table_v =
            input(g, "TABLE", {kB, 1, kPerSeq, 1}, DataType::Int32);
        ir::SdpaAttrs a;
        a.padding_mask = true;
        a.attn_scale = 0.125;
        a.paged_max_seq_len_kv = kS;
        auto out = g.sdpa(q, kc, vc, a, extra);
        finish(out[0], "O", {kB, kH, kS, kD}, t);
      },
      o);
}

}  // namespace
}  // namespace dnngraph::gpu_test
