// SDPA dropout ports in the IR: the mask form (DROPOUT_MASK + DROPOUT_SCALE) on forward and
// backward, the RNG_DUMP output of the forward, their checks, and JSON / fingerprint round trips.
#include <gtest/gtest.h>

#include "dnngraph/ir/fingerprint.hpp"
#include "dnngraph/ir/json.hpp"
#include "ir/test_util.hpp"

namespace dnngraph::ir {
namespace {

using testing::expect_invalid;
using testing::make_input;

struct Qkv {
  Tensor q, k, v;
};
// Q [2,4,5,8], K/V [2,2,6,8] (GQA): the score matrix is [2,4,5,6].
Qkv qkv(Graph& g) {
  return {make_input(g, "q", {2, 4, 5, 8}), make_input(g, "k", {2, 2, 6, 8}),
          make_input(g, "v", {2, 2, 6, 8})};
}

// DROPOUT_MASK 'dmask' and DROPOUT_SCALE 'dscale' (pass-by-value 1.25), each only if asked.
SdpaInputs mask_form(Graph& g, std::vector<int64_t> mask_dims = {1, 4, 5, 6},
                     DataType mask_type = DataType::Half, bool with_mask = true,
                     bool with_scale = true) {
  SdpaInputs e;
  if (with_mask) e.dropout_mask = make_input(g, "dmask", std::move(mask_dims), mask_type);
  if (with_scale) e.dropout_scale = g.scalar(Scalar::of_float(1.25), "dscale");
  return e;
}

SdpaInputs probability_form(Graph& g) {
  SdpaInputs e;
  e.seed = g.scalar(Scalar::of_int(7), "seed");
  e.offset = g.scalar(Scalar::of_int(1), "offset");
  return e;
}

TEST(SdpaDropoutInfer, MaskFormForwardAndBackward) {
  Graph g;
  g.set_io_data_type(DataType::Half);
  auto [q, k, v] = qkv(g);
  SdpaAttrs a;
  a.is_inference = false;
  SdpaInputs e = mask_form(g);
  auto [o, stats] = g.sdpa(q, k, v, a, e, {"attn"});
  o->set_output(true);
  stats->set_output(true);
  ASSERT_TRUE(g.validate().is_ok()) << g.validate().to_string();

  Graph b;
  b.set_io_data_type(DataType::Half);
  auto [bq, bk, bv] = qkv(b);
  SdpaInputs be;
  be.dropout_mask = make_input(b, "dmask", {2, 1, 5, 6}, DataType::Float);
  be.dropout_scale = make_input(b, "dscale", {1, 1, 1, 1}, DataType::Float);  // a device scalar
  auto grads = b.sdpa_backward(
      bq, bk, bv, make_input(b, "o", {2, 4, 5, 8}), make_input(b, "do", {2, 4, 5, 8}),
      make_input(b, "stats", {2, 4, 5, 1}, DataType::Float), {}, be, {"attn_bwd"});
  for (int i = 0; i < 3; ++i) grads[i]->set_output(true);
  ASSERT_TRUE(b.validate().is_ok()) << b.validate().to_string();
}

TEST(SdpaDropoutInfer, RngDumpIsInferred) {
  Graph g;
  g.set_io_data_type(DataType::BFloat16);
  auto [q, k, v] = qkv(g);
  SdpaAttrs a;
  a.dropout_probability = 0.1;
  SdpaInputs e = probability_form(g);
  TensorAttrs dump;
  dump.set_name("dump");
  e.rng_dump = g.tensor(dump);
  e.rng_dump->set_output(true);
  g.sdpa(q, k, v, a, e, {"attn"})[0]->set_output(true);
  ASSERT_TRUE(g.validate().is_ok()) << g.validate().to_string();
  EXPECT_EQ(e.rng_dump->dim, (std::vector<int64_t>{2, 4, 5, 6}));
  EXPECT_EQ(e.rng_dump->stride, (std::vector<int64_t>{120, 30, 6, 1}));
  EXPECT_EQ(e.rng_dump->data_type, DataType::BFloat16);  // the io type

  Graph f;  // no io type: FLOAT
  auto [fq, fk, fv] = qkv(f);
  SdpaInputs fe = probability_form(f);
  fe.rng_dump = f.tensor(dump);
  fe.rng_dump->set_output(true);
  f.sdpa(fq, fk, fv, a, fe, {"attn"})[0]->set_output(true);
  ASSERT_TRUE(f.validate().is_ok()) << f.validate().to_string();
  EXPECT_EQ(fe.rng_dump->data_type, DataType::Float);
}

// Builds sdpa 'attn' on Q [2,4,5,8], K/V [2,2,6,8] with `e` and expects `parts` in the error.
void expect_forward_invalid(SdpaAttrs a, SdpaInputs (*extra)(Graph&),
                            const std::vector<std::string>& parts) {
  Graph g;
  auto [q, k, v] = qkv(g);
  g.sdpa(q, k, v, a, extra(g), {"attn"})[0]->set_output(true);
  expect_invalid(g, parts);
}

TEST(SdpaDropoutInfer, MaskFormChecks) {
  expect_forward_invalid(
      {},
      [](Graph& g) {
        return mask_form(g, {1, 4, 5, 6}, DataType::Half, true, false);
      },
      {"sdpa 'attn'", "needs both DROPOUT_MASK and DROPOUT_SCALE", "DROPOUT_MASK 'dmask'"});
  expect_forward_invalid({},
                         [](Graph& g) {
                           return mask_form(g, {1, 4, 5, 6}, DataType::Half, false, true);
                         },
                         {"sdpa 'attn'", "only DROPOUT_SCALE 'dscale'"});
  SdpaAttrs p;
  p.dropout_probability = 0.2;
  expect_forward_invalid(
      p,
      [](Graph& g) {
        SdpaInputs e = probability_form(g);
        SdpaInputs m = mask_form(g);
        e.dropout_mask = m.dropout_mask, e.dropout_scale = m.dropout_scale;
        return e;
      },
      {"sdpa 'attn'", "DROPOUT_MASK 'dmask'", "dropout_probability 0.2", "one form only"});
  expect_forward_invalid(
      {},
      [](Graph& g) {
        SdpaInputs e = mask_form(g);
        e.seed = g.scalar(Scalar::of_int(3), "stray_seed");
        return e;
      },
      {"sdpa 'attn'", "DROPOUT_MASK 'dmask'", "SEED 'stray_seed'", "one form only"});
  expect_forward_invalid({},
                         [](Graph& g) {
                           return mask_form(g, {2, 3, 5, 6});
                         },
                         {"sdpa 'attn'", "DROPOUT_MASK 'dmask'", "[2,3,5,6]", "[2,4,5,6]"});
  expect_forward_invalid({},
                         [](Graph& g) {
                           return mask_form(g, {4, 5, 6});
                         },
                         {"sdpa 'attn'", "DROPOUT_MASK 'dmask'", "rank 4", "rank 3"});
  expect_forward_invalid({},
                         [](Graph& g) {
                           return mask_form(g, {1, 4, 5, 6}, DataType::Int32);
                         },
                         {"sdpa 'attn'", "DROPOUT_MASK 'dmask'", "floating", "INT32"});
  expect_forward_invalid(
      {},
      [](Graph& g) {
        SdpaInputs e = mask_form(g, {1, 4, 5, 6}, DataType::Half, true, false);
        e.dropout_scale = make_input(g, "wide_scale", {1, 1, 1, 2}, DataType::Float);
        return e;
      },
      {"sdpa 'attn'", "DROPOUT_SCALE 'wide_scale'", "one element", "[1,1,1,2]"});
  expect_forward_invalid({},
                         [](Graph& g) {
                           SdpaInputs e = mask_form(g, {1, 4, 5, 6}, DataType::Half, true, false);
                           e.dropout_scale = g.scalar(Scalar::of_int(2), "int_scale");
                           return e;
                         },
                         {"sdpa 'attn'", "DROPOUT_SCALE 'int_scale'", "floating", "INT64"});
}

TEST(SdpaDropoutInfer, RngDumpChecks) {
  auto with_dump = [](std::vector<int64_t> dims, DataType t) {
    return [dims, t](Graph& g) {
      SdpaInputs e = probability_form(g);
      TensorAttrs d;
      d.set_name("dump").set_dim(dims).set_data_type(t);
      e.rng_dump = g.tensor(d);
      e.rng_dump->set_output(true);
      return e;
    };
  };
  SdpaAttrs p;
  p.dropout_probability = 0.2;
  {
    Graph g;
    auto [q, k, v] = qkv(g);
    g.sdpa(q, k, v, p, with_dump({2, 4, 5, 1}, DataType::Float)(g), {"attn"})[0]->set_output(true);
    expect_invalid(g, {"sdpa 'attn'", "RNG_DUMP 'dump'", "[2,4,5,1]", "[2,4,5,6]"});
  }
  {
    Graph g;
    auto [q, k, v] = qkv(g);
    g.sdpa(q, k, v, p, with_dump({2, 4, 5, 6}, DataType::Int8)(g), {"attn"})[0]->set_output(true);
    expect_invalid(g, {"sdpa 'attn'", "RNG_DUMP 'dump'", "floating", "INT8"});
  }
  {  // no dropout by probability: neither unset nor 0 nor the mask form
    Graph g;
    auto [q, k, v] = qkv(g);
    SdpaInputs e = mask_form(g);
    e.rng_dump = g.tensor(TensorAttrs().set_name("dump"));
    g.sdpa(q, k, v, {}, e, {"attn"})[0]->set_output(true);
    expect_invalid(g, {"sdpa 'attn'", "RNG_DUMP 'dump'", "dropout_probability is unset"});
  }
  {  // backward: forward only
    Graph b;
    auto [q, k, v] = qkv(b);
    SdpaBwdAttrs a;
    a.dropout_probability = 0.2;
    SdpaInputs e = probability_form(b);
    auto grads = b.sdpa_backward(
        q, k, v, make_input(b, "o", {2, 4, 5, 8}), make_input(b, "do", {2, 4, 5, 8}),
        make_input(b, "stats", {2, 4, 5, 1}, DataType::Float), a, e, {"attn_bwd"});
    for (int i = 0; i < 3; ++i) grads[i]->set_output(true);
    // The builder binds RNG_DUMP on the forward only; a hand-wired one (e.g. from JSON) must
    // be refused: the op table has no RNG_DUMP output for the backward.
    Node& n = b.mutable_nodes()[0];
    n.outputs.push_back({Role::RNG_DUMP, b.tensor(TensorAttrs().set_name("bwd_dump"))});
    expect_invalid(b, {"sdpa_backward 'attn_bwd'", "unknown output port 'RNG_DUMP'", "'bwd_dump'"});
  }
}

// The new ports travel through JSON by role, and the fingerprint sees them.
TEST(SdpaDropoutInfer, JsonAndFingerprintRoundTrip) {
  auto build = [](Graph& g, bool mask) {
    g.set_name("dropout").set_io_data_type(DataType::Half);
    auto [q, k, v] = qkv(g);
    SdpaAttrs a;
    a.is_inference = false;
    SdpaInputs e;
    if (mask) {
      e = mask_form(g, {2, 1, 5, 6});
    } else {
      a.dropout_probability = 0.3;
      e = probability_form(g);
      e.rng_dump = g.tensor(TensorAttrs().set_name("dump").set_data_type(DataType::Float));
      e.rng_dump->set_output(true);
    }
    auto [o, stats] = g.sdpa(q, k, v, a, e, {"attn"});
    o->set_output(true);
    stats->set_output(true);
  };
  for (bool mask : {true, false}) {
    SCOPED_TRACE(mask ? "mask form" : "probability form + RNG_DUMP");
    Graph g;
    build(g, mask);
    ASSERT_TRUE(g.validate().is_ok()) << g.validate().to_string();
    const std::string text = to_json(g);
    for (const char* role : {"DROPOUT_MASK", "DROPOUT_SCALE", "RNG_DUMP"})
      EXPECT_EQ(text.find(role) != std::string::npos, mask != (role[0] == 'R')) << role;
    Graph loaded;
    testing::expect_json_round_trip(g, loaded);
    ASSERT_TRUE(loaded.validate().is_ok()) << loaded.validate().to_string();
    const Node& n = loaded.nodes()[0];
    if (mask) {
      ASSERT_TRUE(n.input(Role::DROPOUT_MASK));
      EXPECT_EQ(n.input(Role::DROPOUT_MASK)->name, "dmask");
      EXPECT_EQ(n.input(Role::DROPOUT_SCALE)->value->f, 1.25);
    } else {
      ASSERT_TRUE(n.output(Role::RNG_DUMP));
      EXPECT_EQ(n.output(Role::RNG_DUMP)->dim, (std::vector<int64_t>{2, 4, 5, 6}));
    }
  }
  Graph m, p;
  build(m, true);
  build(p, false);
  EXPECT_NE(fingerprint(m), fingerprint(p));
}

}  // namespace
}  // namespace dnngraph::ir
