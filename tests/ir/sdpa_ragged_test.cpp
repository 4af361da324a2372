// SDPA ragged (THD) offsets and paged K/V: how validate() binds and checks them, and what the
// JSON and the fingerprint keep.
#include <gtest/gtest.h>

#include <algorithm>

#include "dnngraph/ir/fingerprint.hpp"
#include "dnngraph/ir/json.hpp"
#include "dnngraph/ir/sdpa.hpp"
#include "ir/test_util.hpp"

namespace dnngraph::ir {
namespace {

using testing::expect_invalid;
using testing::make_input;

constexpr int64_t kB = 3, kH = 2, kS = 5, kD = 8;

// THD storage: [b, h, s, d] with strides [s*h*d, d, h*d, 1].
Tensor thd(Graph& g, const std::string& name) {
  return make_input(g, name, {kB, kH, kS, kD}, DataType::Float, {kS * kH * kD, kD, kH * kD, 1});
}

struct Ragged {
  Graph g;
  Tensor q, k, v, o, stats, off;
  SdpaAttrs a;
  SdpaInputs extra;
  explicit Ragged(bool padding = true) {
    q = thd(g, "q");
    k = thd(g, "k");
    v = thd(g, "v");
    if (padding) {
      extra.seq_len_q = make_input(g, "lq", {kB, 1, 1, 1}, DataType::Int32);
      extra.seq_len_kv = make_input(g, "lkv", {kB, 1, 1, 1}, DataType::Int32);
    }
    a.is_inference = false;
  }
  // The offsets tensor, made on first use (an unused graph input is an error).
  Tensor offsets() {
    if (!off) off = make_input(g, "off", {kB + 1, 1, 1, 1}, DataType::Int32);
    return off;
  }
  void add() {
    auto [out, st] = g.sdpa(q, k, v, a, extra, {"attn"});
    o = out;
    stats = st;
    o->set_output(true);
    stats->set_output(true);
  }
};

TEST(SdpaRagged, ValidateBindsTheTensorAttributeToPorts) {
  Ragged r;
  r.q->set_ragged_offset(r.offsets());
  r.k->set_ragged_offset(r.offsets()).set_ragged_offset_multiplier(4);
  r.add();
  r.o->set_dim({kB, kH, kS, kD}).set_stride({kS * kH * kD, kD, kH * kD, 1});
  r.o->set_ragged_offset(r.offsets());  // an output, set after the op was added
  ASSERT_TRUE(r.g.validate().is_ok()) << r.g.validate().to_string();
  const Node& n = r.g.nodes()[0];
  EXPECT_EQ(n.input(Role::Q_RAGGED_OFFSET), r.off);
  EXPECT_EQ(n.input(Role::K_RAGGED_OFFSET), r.off);
  EXPECT_EQ(n.input(Role::O_RAGGED_OFFSET), r.off);
  EXPECT_EQ(n.input(Role::V_RAGGED_OFFSET), nullptr);
  // The validated copy does not alias the user's tensors through the attribute: a ragged
  // copy points to the copy of its offsets.
  const auto& copies = r.g.validated()->tensors();
  int ragged_copies = 0;
  for (const Tensor& t : copies) {
    if (!t->ragged_offset) continue;
    ++ragged_copies;
    EXPECT_NE(t->ragged_offset, r.off);
    EXPECT_NE(std::find(copies.begin(), copies.end(), t->ragged_offset), copies.end());
    EXPECT_EQ(t->ragged_offset->name, "off");
  }
  EXPECT_EQ(ragged_copies, 3);  // q, k, o

  // JSON keeps the ports and the multiplier; the reloaded graph validates the same.
  const std::string text = to_json(r.g);
  EXPECT_NE(text.find("K_RAGGED_OFFSET"), std::string::npos);
  EXPECT_NE(text.find("\"ragged_offset_multiplier\": 4"), std::string::npos) << text;
  Graph back;
  ASSERT_TRUE(from_json(text, back).is_ok()) << from_json(text, back).to_string();
  ASSERT_TRUE(back.validate().is_ok()) << back.validate().to_string();
  EXPECT_EQ(fingerprint(back), fingerprint(r.g));

  // The multiplier is part of the key.
  const auto before = fingerprint(r.g);
  r.k->set_ragged_offset_multiplier(8);
  ASSERT_TRUE(r.g.validate().is_ok());
  EXPECT_NE(fingerprint(r.g), before);
}

TEST(SdpaRagged, RaggedTensorsNameTheirOffsetsAndLengths) {
  Ragged r;
  r.q->set_ragged_offset(r.offsets());
  r.v->set_ragged_offset(r.offsets());
  r.add();
  r.o->set_dim({kB, kH, kS, kD}).set_stride({kS * kH * kD, kD, kH * kD, 1});
  r.o->set_ragged_offset(r.offsets());
  ASSERT_TRUE(r.g.validate().is_ok()) << r.g.validate().to_string();
  const auto ragged = sdpa_ragged_tensors(r.g.validated()->nodes());
  ASSERT_EQ(ragged.size(), 3u);  // Q, V, O in kSdpaRaggedRoles order
  const std::pair<const char*, const char*> want[] = {{"q", "lq"}, {"v", "lkv"}, {"attn::O", "lq"}};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(ragged[i].tensor->name, want[i].first);
    EXPECT_EQ(ragged[i].offsets->name, "off");
    ASSERT_TRUE(ragged[i].rows);
    EXPECT_EQ(ragged[i].rows->name, want[i].second) << want[i].first;
  }
  // One sequence of 3 rows: heads at stride d, rows at stride h*d, elements at stride 1.
  EXPECT_EQ(ragged_sequence_span(*r.q, 3), 1 + (kH - 1) * kD + 2 * kH * kD + (kD - 1));
  EXPECT_EQ(ragged_sequence_span(*r.q, 1), kH * kD);
  EXPECT_EQ(ragged_sequence_span(*r.q, 0), std::nullopt);
  TensorAttrs huge = *r.q;
  huge.stride[2] = INT64_MAX / 2;
  EXPECT_EQ(ragged_sequence_span(huge, 4), std::nullopt);
}

TEST(SdpaRagged, OffsetShapeTypeAndPlace) {
  {
    Ragged r;
    r.q->set_ragged_offset(make_input(r.g, "bad", {kB, 1, 1, 1}, DataType::Int32));
    r.add();
    expect_invalid(r.g, {"Q_RAGGED_OFFSET 'bad'", "[3,1,1,1]", "[4,1,1,1]", "the ragged offset"});
  }
  {
    Ragged r;
    r.q->set_ragged_offset(make_input(r.g, "f", {kB + 1, 1, 1, 1}, DataType::Float));
    r.add();
    expect_invalid(r.g, {"Q_RAGGED_OFFSET 'f'", "INT32 or INT64", "FLOAT"});
  }
  {
    Ragged r;
    r.q->set_ragged_offset_multiplier(0);
    r.add();
    expect_invalid(r.g, {"Q 'q'", "ragged_offset_multiplier 0"});
  }
  {
    Ragged r;
    r.q->set_ragged_offset_multiplier(16);  // without an offset tensor
    r.add();
    expect_invalid(r.g, {"Q 'q'", "no ragged offset tensor"});
  }
}

TEST(SdpaRagged, NeedsThePaddingMask) {
  Ragged r(/*padding=*/false);
  r.v->set_ragged_offset(r.offsets());
  r.add();
  expect_invalid(r.g, {"sdpa 'attn'", "ragged offsets need the padding mask"},
                 ErrorCode::NotSupported);
}

TEST(SdpaRagged, MaxTotalSeqLen) {
  {
    Ragged r;
    r.a.max_total_seq_len_q = 12;
    r.add();
    expect_invalid(r.g, {"max_total_seq_len_q", "only supported with ragged"},
                   ErrorCode::NotSupported);
  }
  {
    Ragged r;
    r.q->set_ragged_offset(r.offsets());
    r.a.max_total_seq_len_kv = 0;
    r.add();
    expect_invalid(r.g, {"max_total_seq_len_kv 0", "at least 1"});
  }
  {
    Ragged r;
    r.q->set_ragged_offset(r.offsets());
    r.a.max_total_seq_len_q = 12;
    r.a.max_total_seq_len_kv = 15;
    r.add();
    ASSERT_TRUE(r.g.validate().is_ok()) << r.g.validate().to_string();
  }
}

TEST(SdpaRagged, OnlySdpaReadsRaggedTensors) {
  Graph g;
  Tensor a = make_input(g, "a", {1, 4, 4}, DataType::Float);
  a->set_ragged_offset(make_input(g, "off", {2, 1, 1, 1}, DataType::Int32));
  g.matmul(a, a, {}, {"mm"})->set_output(true);
  expect_invalid(g, {"matmul 'mm'", "A 'a'", "has a ragged offset", "dense"});
}

TEST(SdpaRagged, BackwardPortsAndRefusedPageTable) {
  Graph g;
  Tensor q = thd(g, "q"), k = thd(g, "k"), v = thd(g, "v"), o = thd(g, "o"), d_o = thd(g, "do");
  Tensor st = make_input(g, "st", {kB, kH, kS, 1}, DataType::Float);
  Tensor off = make_input(g, "off", {kB + 1, 1, 1, 1}, DataType::Int64);
  for (const Tensor& t : {q, k, v, o, d_o}) t->set_ragged_offset(off);
  SdpaInputs extra;
  extra.seq_len_q = make_input(g, "lq", {kB, 1, 1, 1}, DataType::Int32);
  extra.seq_len_kv = make_input(g, "lkv", {kB, 1, 1, 1}, DataType::Int32);
  SdpaBwdAttrs a;
  auto r = g.sdpa_backward(q, k, v, o, d_o, st, a, extra, {"bwd"});
  for (int i = 0; i < 3; ++i) r[i]->set_output(true).set_ragged_offset(off);
  ASSERT_TRUE(g.validate().is_ok()) << g.validate().to_string();
  const Node& n = g.nodes()[0];
  for (Role role : {Role::DO_RAGGED_OFFSET, Role::DQ_RAGGED_OFFSET, Role::DK_RAGGED_OFFSET,
                    Role::DV_RAGGED_OFFSET})
    EXPECT_EQ(n.input(role), off) << role;

  extra.page_table_k = make_input(g, "table", {kB, 1, 2, 1}, DataType::Int32);
  Graph& g2 = g;
  g2.sdpa_backward(q, k, v, o, d_o, st, a, extra, {"bwd2"});
  expect_invalid(g2, {"sdpa_backward 'bwd2'", "PAGE_TABLE_K"});
}

struct Paged {
  Graph g;
  Tensor q, kc, vc, tk, tv;
  SdpaAttrs a;
  SdpaInputs extra;
  explicit Paged(std::vector<int64_t> k_table_dims = {2, 1, 3, 1},
                 DataType v_table_type = DataType::Int32, bool padding = true) {
    q = make_input(g, "q", {2, 4, 3, 8}, DataType::Float);
    kc = make_input(g, "kc", {7, 2, 4, 8}, DataType::Float);  // 7 pages of 4 rows
    vc = make_input(g, "vc", {7, 2, 4, 8}, DataType::Float);
    extra.page_table_k = tk = make_input(g, "tk", std::move(k_table_dims), DataType::Int32);
    extra.page_table_v = tv = make_input(g, "tv", {2, 1, 3, 1}, v_table_type);
    if (padding) {
      extra.seq_len_q = make_input(g, "lq", {2, 1, 1, 1}, DataType::Int32);
      extra.seq_len_kv = make_input(g, "lkv", {2, 1, 1, 1}, DataType::Int32);
    }
  }
  Tensor add() {
    Tensor o = g.sdpa(q, kc, vc, a, extra, {"paged"})[0];
    o->set_output(true);
    return o;
  }
};

TEST(SdpaPaged, LogicalKvLengthFromTablesOrAttribute) {
  {
    Paged p;
    p.add();
    ASSERT_TRUE(p.g.validate().is_ok()) << p.g.validate().to_string();
    EXPECT_EQ(sdpa_kv_length(p.g.nodes()[0]), 12);  // 3 pages x 4 rows
  }
  {
    Paged p;
    p.a.paged_max_seq_len_kv = 10;
    p.extra.bias = make_input(p.g, "bias", {1, 4, 3, 10}, DataType::Float);  // s_kv = 10
    p.add();
    ASSERT_TRUE(p.g.validate().is_ok()) << p.g.validate().to_string();
    EXPECT_EQ(sdpa_kv_length(p.g.nodes()[0]), 10);
  }
  {
    Paged p;
    p.a.paged_max_seq_len_kv = 13;
    p.add();
    expect_invalid(p.g, {"paged_attention_max_seq_len_kv 13", "1..12"});
  }
}

TEST(SdpaPaged, Errors) {
  {
    Paged p({2, 3, 1, 1});
    p.add();
    expect_invalid(p.g, {"PAGE_TABLE_K 'tk'", "[2,3,1,1]", "[b, 1, pages, 1]"});
  }
  {
    Paged p({2, 1, 3, 1}, DataType::Float);
    p.add();
    expect_invalid(p.g, {"PAGE_TABLE_V 'tv'", "INT32", "FLOAT"});
  }
  {
    Paged p({2, 1, 3, 1}, DataType::Int32, /*padding=*/false);
    p.add();
    expect_invalid(p.g, {"page tables need the padding mask"}, ErrorCode::NotSupported);
  }
  {
    Graph g;
    Tensor q = make_input(g, "q", {2, 4, 3, 8}, DataType::Float);
    SdpaAttrs a;
    a.paged_max_seq_len_kv = 4;
    g.sdpa(q, q, q, a, {}, {"dense"})[0]->set_output(true);
    expect_invalid(g, {"paged_attention_max_seq_len_kv", "without a page table"},
                   ErrorCode::NotSupported);
  }
}

// The packed THD layout serving code declares: dims [b, h, s, d], strides [h*d, d, h*d, 1] (the
// batch stride is the token stride; the offsets place each sequence).
constexpr int64_t kTok = kH * kD;
const std::vector<int64_t> kThdStrides = {kTok, kD, kTok, 1};

TEST(SdpaRagged, PackedThdOutputIsNotOverlapping) {
  Ragged r;
  r.q->set_stride(kThdStrides).set_ragged_offset(r.offsets());
  r.add();
  r.o->set_dim({kB, kH, kS, kD}).set_stride(kThdStrides).set_ragged_offset(r.offsets());
  r.stats->set_dim({kB, kH, kS, 1}).set_stride({kH, 1, kH, 1}).set_ragged_offset(r.offsets());
  ASSERT_TRUE(r.g.validate().is_ok()) << r.g.validate().to_string();
  // Its extent is b sequences of s tokens (the strides alone span b - 1 + s tokens), in the
  // graph and in the validated copy the engines read.
  EXPECT_EQ(r.o->storage_elements(), kB * kS * kTok);
  for (const Tensor& t : r.g.validated()->tensors()) {
    if (t->name == r.o->name) {
      EXPECT_EQ(t->storage_elements(), kB * kS * kTok);
    }
  }
  // Without offsets the same layout writes one address twice.
  Ragged dense;
  dense.q->set_ragged_offset(dense.offsets());
  dense.add();
  dense.o->set_dim({kB, kH, kS, kD}).set_stride(kThdStrides);
  expect_invalid(dense.g, {"'attn::O'", "elements would share addresses", "[16,8,16,1]"});
}

TEST(SdpaRagged, PackedThdOutputOverlapWithinASequenceIsRefused) {
  Ragged r;
  r.q->set_ragged_offset(r.offsets());
  r.add();
  // The token stride d steps over one head: two heads of one sequence share addresses.
  r.o->set_dim({kB, kH, kS, kD}).set_stride({kTok, kD, kD, 1}).set_ragged_offset(r.offsets());
  expect_invalid(r.g, {"'attn::O'", "elements of one sequence would share addresses"});
}

}  // namespace
}  // namespace dnngraph::ir
