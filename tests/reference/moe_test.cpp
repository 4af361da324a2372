// moe_grouped_matmul on the reference engine, through the public builder: hand-worked values,
// random shapes and offsets (empty experts included) against a loop written out here, and the
// execute-time checks of the offsets (nothing written when they are bad).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/ref_harness.hpp"
#include "dnngraph/dnngraph.hpp"

namespace {

using dnngraph::DataType;
using dnngraph::ErrorCode;
using dnngraph::ir::TensorAttrs;

struct Moe {
  dnngraph::Graph g;
  dnngraph::ir::Tensor token, weight, offset, out;
  // token [1,S,K], weight [E,K,N] with the frontend's layout (stride [K*N, 1, K]), offsets
  // [E,1,1] of `offset_type`.
  Moe(int64_t E, int64_t S, int64_t K, int64_t N, DataType io, DataType offset_type) {
    g.set_io_data_type(io).set_compute_data_type(DataType::Float);
    token = g.tensor(TensorAttrs()
                         .set_name("token")
                         .set_dim({1, S, K})
                         .set_stride({S * K, K, 1})
                         .set_data_type(io));
    weight = g.tensor(TensorAttrs()
                          .set_name("weight")
                          .set_dim({E, K, N})
                          .set_stride({K * N, 1, K})
                          .set_data_type(io));
    offset = g.tensor(
        TensorAttrs().set_name("offset").set_dim({E, 1, 1}).set_stride({1, 1, 1}).set_data_type(
            offset_type));
    out = g.moe_grouped_matmul(token, weight, offset, {}, {"moe", DataType::NotSet});
    out->set_output(true).set_name("out");
  }
};

// out[r, n] = sum_k token[r, k] * weight[e, k, n] for the rows r of expert e (weight values in
// logical row-major [E,K,N] order).
std::vector<double> naive(const std::vector<double>& token, const std::vector<double>& weight,
                          const std::vector<int64_t>& starts, int64_t S, int64_t K, int64_t N) {
  std::vector<double> out(static_cast<size_t>(S * N), 0.0);
  const int64_t E = static_cast<int64_t>(starts.size());
  for (int64_t e = 0; e < E; ++e) {
    const int64_t end = e + 1 < E ? starts[static_cast<size_t>(e + 1)] : S;
    for (int64_t r = starts[static_cast<size_t>(e)]; r < end; ++r)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k)
          s += token[static_cast<size_t>(r * K + k)] *
               weight[static_cast<size_t>((e * K + k) * N + n)];
        out[static_cast<size_t>(r * N + n)] = s;
      }
  }
  return out;
}

TEST(RefMoe, HandWorked) {
  // E=2, S=3, K=2, N=2; expert 0 owns row 0, expert 1 rows 1..2.
  // W0 = [[1 2] [3 4]], W1 = [[0 1] [1 0]] (a swap).
  Moe m(2, 3, 2, 2, DataType::Float, DataType::Int32);
  ref_test::Buffers b;
  b.set(m.token, {1, 1, 2, 5, -3, 7});
  b.set(m.weight, {1, 2, 3, 4, 0, 1, 1, 0});
  b.set(m.offset, {0, 1});
  ASSERT_OK(b.run_graph(m.g));
  // row 0: [1 1] W0 = [4 6]; rows 1, 2 swapped: [5 2], [7 -3].
  EXPECT_EQ(b.values(m.out), (std::vector<double>{4, 6, 5, 2, 7, -3}));
}

TEST(RefMoe, RandomOffsetsWithEmptyExpertsAgainstALoop) {
  ref_test::Rng rng(23);
  for (int trial = 0; trial < 6; ++trial) {
    const int64_t E = rng.integer(1, 6), S = rng.integer(1, 40), K = rng.integer(1, 9),
                  N = rng.integer(1, 7);
    std::vector<int64_t> starts(static_cast<size_t>(E), 0);
    for (int64_t e = 1; e < E; ++e) starts[static_cast<size_t>(e)] = rng.integer(0, S);
    std::sort(starts.begin(), starts.end());
    if (E > 2) starts[2] = starts[1];  // an empty expert in the middle
    const DataType off_type = trial % 2 ? DataType::Int64 : DataType::Int32;
    Moe m(E, S, K, N, DataType::BFloat16, off_type);
    ref_test::Buffers b;
    const auto tv = b.random(m.token, rng);
    const auto wv = b.random(m.weight, rng);
    b.set(m.offset, std::vector<double>(starts.begin(), starts.end()));
    ASSERT_OK(b.run_graph(m.g));
    const auto want = ref_test::rounded(DataType::BFloat16, naive(tv, wv, starts, S, K, N));
    EXPECT_TRUE(ref_test::all_close(b.values(m.out), want, ref_test::tol(DataType::BFloat16)))
        << "E=" << E << " S=" << S << " K=" << K << " N=" << N;
  }
}

TEST(RefMoe, LastExpertEmptyWhenItsStartIsS) {
  Moe m(3, 4, 1, 1, DataType::Float, DataType::Int32);
  ref_test::Buffers b;
  b.set(m.token, {1, 2, 3, 4});
  b.set(m.weight, {10, 100, 1000});
  b.set(m.offset, {0, 2, 4});
  ASSERT_OK(b.run_graph(m.g));
  EXPECT_EQ(b.values(m.out), (std::vector<double>{10, 20, 300, 400}));
}

TEST(RefMoe, GroupGUsesExpertGModE) {
  // E=2 experts, G=4 groups (B=2): groups 0..3 own rows [0,1), [1,3), [3,3), [3,5) and use
  // experts 0, 1, 0, 1.
  dnngraph::Graph g;
  g.set_io_data_type(DataType::Float);
  auto token = g.tensor(TensorAttrs().set_name("token").set_dim({1, 5, 1}).set_stride({5, 1, 1}));
  auto weight = g.tensor(TensorAttrs().set_name("weight").set_dim({2, 1, 1}).set_stride({1, 1, 1}));
  auto offset = g.tensor(
      TensorAttrs().set_name("offset").set_dim({4, 1, 1}).set_stride({1, 1, 1}).set_data_type(
          DataType::Int32));
  auto out = g.moe_grouped_matmul(token, weight, offset);
  out->set_output(true);
  ASSERT_OK(g.validate());
  ref_test::Buffers b;
  b.set(token, {1, 2, 3, 4, 5});
  b.set(weight, {10, 100});
  b.set(offset, {0, 1, 3, 3});
  ASSERT_OK(b.run_graph(g));
  EXPECT_EQ(b.values(out), (std::vector<double>{10, 200, 300, 400, 500}));
}

TEST(RefMoe, BadOffsetsFailAndWriteNothing) {
  struct Case {
    std::vector<double> offsets;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {{0, 3, 2}, {"element 2", "is 2", "must not decrease"}},
      {{0, 2, 5}, {"element 2", "is 5", "at most S", "S=4"}},
      {{1, 2, 3}, {"element 0", "must be 0"}},
      {{0, -1, 2}, {"element 1", "is -1", "must not decrease"}},
  };
  for (const Case& c : cases) {
    Moe m(3, 4, 2, 2, DataType::Float, DataType::Int64);
    ref_test::Rng rng(5);
    ref_test::Buffers b;
    b.random(m.token, rng);
    b.random(m.weight, rng);
    b.set(m.offset, c.offsets);
    const dnngraph::Status s = b.run_graph(m.g);
    ASSERT_FALSE(s.is_ok());
    EXPECT_EQ(s.code(), ErrorCode::InvalidArgument) << s.to_string();
    for (const std::string& p : c.parts)
      EXPECT_NE(s.message().find(p), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("moe_grouped_matmul 'moe'"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("'offset'"), std::string::npos) << s.message();
    for (double v : b.values(m.out)) EXPECT_TRUE(std::isnan(v));
  }
}

}  // namespace
