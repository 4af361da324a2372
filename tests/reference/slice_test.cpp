// Slice on the reference engine, built through the public builder, against hand-worked values
// and against numpy-style indexing written out loop by loop.
#include <gtest/gtest.h>

#include <vector>

#include "common/ref_harness.hpp"
#include "dnngraph/dnngraph.hpp"

namespace {

using dnngraph::DataType;
using dnngraph::ir::SliceAttrs;
using dnngraph::ir::TensorAttrs;

TEST(RefSlice, HandWorked) {
  // X = [[0 1 2 3] [4 5 6 7] [8 9 10 11]]; X[0:3:2, 1:4:2] = [[1 3] [9 11]].
  dnngraph::Graph g;
  g.set_io_data_type(DataType::Float);
  auto x = g.tensor(TensorAttrs().set_name("x").set_dim({3, 4}).set_stride({4, 1}));
  auto y = g.slice(x, SliceAttrs{{0, 1}, {3, 4}, {2, 2}});
  y->set_output(true).set_name("y");
  ASSERT_OK(g.validate());
  EXPECT_EQ(y->dim, (std::vector<int64_t>{2, 2}));
  ref_test::Buffers b;
  b.set(x, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  ASSERT_OK(b.run_graph(g));
  EXPECT_EQ(b.values(y), (std::vector<double>{1, 3, 9, 11}));
}

// X [n, c, h] stored channels-last in half; Y = X[1:n, 0:c:3, 2:h-1:2], then Y + 1 through a
// virtual tensor: a slice inside a graph.
TEST(RefSlice, StridedChannelsLastInputIntoPointwise) {
  const int64_t n = 3, c = 7, h = 9;
  dnngraph::Graph g;
  g.set_io_data_type(DataType::Half).set_intermediate_data_type(DataType::Float);
  auto x = g.tensor(
      TensorAttrs().set_name("x").set_dim({n, c, h}).set_stride({c * h, 1, c}));  // [n, h, c]
  auto one = g.scalar(dnngraph::ir::Scalar::of_float(1.0), "one");
  auto y = g.add(g.slice(x, SliceAttrs{{1, 0, 2}, {n, c, h - 1}, {1, 3, 2}}), one);
  y->set_output(true).set_name("y");
  ASSERT_OK(g.validate());
  const std::vector<int64_t> yd = {n - 1, 3, 3};  // ceil(2/1), ceil(7/3), ceil(6/2)
  EXPECT_EQ(y->dim, yd);
  ref_test::Rng rng(11);
  ref_test::Buffers b;
  const std::vector<double> xv = b.random(x, rng, -4, 4);  // row-major over [n, c, h]
  ASSERT_OK(b.run_graph(g));
  std::vector<double> want;
  for (int64_t i = 1; i < n; ++i)
    for (int64_t j = 0; j < c; j += 3)
      for (int64_t k = 2; k < h - 1; k += 2)
        want.push_back(
            dnngraph::reference::round_to(DataType::Half, xv[(i * c + j) * h + k] + 1.0));
  EXPECT_TRUE(ref_test::all_close(b.values(y), want, ref_test::tol(DataType::Half)));
}

}  // namespace
