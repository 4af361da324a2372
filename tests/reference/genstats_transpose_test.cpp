// genstats and transpose on the reference engine, built through the public builder, against
// hand-worked values; their IR rules and messages.
#include <gtest/gtest.h>

#include <vector>

#include "common/ref_harness.hpp"
#include "dnngraph/dnngraph.hpp"

namespace {

using dnngraph::DataType;
using dnngraph::ir::TensorAttrs;
using dnngraph::ir::TransposeAttrs;

TEST(RefGenstats, HandWorked) {
  // X [2, 2, 2] = [[[1 2] [3 4]] [[5 6] [7 8]]]: channel 0 holds 1 2 5 6, channel 1 3 4 7 8.
  dnngraph::Graph g;
  g.set_io_data_type(DataType::Float);
  auto x = g.tensor(TensorAttrs().set_name("x").set_dim({2, 2, 2}).set_stride({4, 2, 1}));
  auto [sum, sq] = g.genstats(x);
  sum->set_output(true).set_name("sum");
  sq->set_output(true).set_name("sq");
  ASSERT_OK(g.validate());
  EXPECT_EQ(sum->dim, (std::vector<int64_t>{1, 2, 1}));
  EXPECT_EQ(sq->data_type, DataType::Float);
  ref_test::Buffers b;
  b.set(x, {1, 2, 3, 4, 5, 6, 7, 8});
  ASSERT_OK(b.run_graph(g));
  EXPECT_EQ(b.values(sum), (std::vector<double>{14, 22}));
  EXPECT_EQ(b.values(sq), (std::vector<double>{1 + 4 + 25 + 36, 9 + 16 + 49 + 64}));
}

TEST(RefTranspose, HandWorkedAndStrides) {
  // X [2, 3] = [[0 1 2] [3 4 5]]; permutation [1, 0] gives [[0 3] [1 4] [2 5]].
  dnngraph::Graph g;
  g.set_io_data_type(DataType::Float);
  auto x = g.tensor(TensorAttrs().set_name("x").set_dim({2, 3}).set_stride({3, 1}));
  auto y = g.transpose(x, TransposeAttrs{{1, 0}});
  y->set_output(true).set_name("y");
  ASSERT_OK(g.validate());
  EXPECT_EQ(y->dim, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(y->stride, (std::vector<int64_t>{1, 3}));  // X's memory order, as the frontend
  ref_test::Buffers b;
  b.set(x, {0, 1, 2, 3, 4, 5});
  ASSERT_OK(b.run_graph(g));
  EXPECT_EQ(b.values(y), (std::vector<double>{0, 3, 1, 4, 2, 5}));  // logical row-major order
}

TEST(RefTranspose, BadPermutationIsNamed) {
  for (std::vector<int64_t> p :
       {std::vector<int64_t>{0, 0, 1}, std::vector<int64_t>{0, 1}, std::vector<int64_t>{0, 1, 3}}) {
    dnngraph::Graph g;
    g.set_io_data_type(DataType::Float);
    auto x = g.tensor(TensorAttrs().set_name("x").set_dim({2, 3, 4}).set_stride({12, 4, 1}));
    g.transpose(x, TransposeAttrs{p}, {"tr"})->set_output(true);
    const dnngraph::Status s = g.validate();
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("transpose 'tr'"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("X 'x'"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("each of 0..2 once"), std::string::npos) << s.message();
  }
}

}  // namespace
