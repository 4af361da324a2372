// reshape and concatenate on the reference engine, built through the public builder, against
// hand-worked values and an independent index computation.
#include <gtest/gtest.h>

#include <vector>

#include "common/ref_harness.hpp"
#include "dnngraph/dnngraph.hpp"

namespace {

using dnngraph::DataType;
using dnngraph::ir::ConcatAttrs;
using dnngraph::ir::ReshapeAttrs;
using dnngraph::ir::TensorAttrs;

TEST(RefReshape, ViewOnlyReadsXsMemoryThroughYsStrides) {
  // X [2, 2, 3] row-major holds its memory offset: x[n, h, w] = 6n + 3h + w. Y [2, 3, 2] with
  // the default channels-last strides [6, 1, 3] reads offset 6n + c + 3h at y[n, c, h].
  dnngraph::Graph g;
  g.set_io_data_type(DataType::Float);
  auto x = g.tensor(TensorAttrs().set_name("x").set_dim({2, 2, 3}).set_stride({6, 3, 1}));
  auto y = g.reshape(x);
  y->set_output(true).set_name("y").set_dim({2, 3, 2});
  ASSERT_OK(g.validate());
  EXPECT_EQ(y->stride, (std::vector<int64_t>{6, 1, 3}));
  ref_test::Buffers b;
  std::vector<double> xv(12);
  for (int i = 0; i < 12; ++i) xv[static_cast<size_t>(i)] = i + 0.5;
  b.set(x, xv);
  ASSERT_OK(b.run_graph(g));
  std::vector<double> want;
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int h = 0; h < 2; ++h) want.push_back(6 * n + c + 3 * h + 0.5);
  EXPECT_EQ(b.values(y), want);
}

TEST(RefReshape, LogicalKeepsRowMajorOrderWhateverTheLayouts) {
  // X [2, 3] column-major, Y [3, 2] channels-last (= row-major at rank 2): Y's row-major
  // elements are X's row-major elements.
  dnngraph::Graph g;
  g.set_io_data_type(DataType::Float);
  auto x = g.tensor(TensorAttrs().set_name("x").set_dim({2, 3}).set_stride({1, 2}));
  auto y = g.reshape(x, ReshapeAttrs{true});
  y->set_output(true).set_name("y").set_dim({3, 2}).set_stride({1, 3});
  ASSERT_OK(g.validate());
  ref_test::Buffers b;
  ref_test::Rng rng(7);
  const std::vector<double> xv = b.random(x, rng);
  ASSERT_OK(b.run_graph(g));
  EXPECT_EQ(b.values(y), xv);
}

TEST(RefConcat, HandWorkedAlongTheMiddleDim) {
  // a [2,1,2] = [[[0 1]] [[2 3]]], c [2,2,2] = [[[10 11] [12 13]] [[14 15] [16 17]]].
  dnngraph::Graph g;
  g.set_io_data_type(DataType::Float);
  auto a = g.tensor(TensorAttrs().set_name("a").set_dim({2, 1, 2}).set_stride({2, 2, 1}));
  auto c = g.tensor(TensorAttrs().set_name("c").set_dim({2, 2, 2}).set_stride({4, 2, 1}));
  ConcatAttrs at;
  at.axis = 1;
  auto y = g.concatenate({a, c}, at);
  y->set_output(true).set_name("y");
  ASSERT_OK(g.validate());
  ref_test::Buffers b;
  b.set(a, {0, 1, 2, 3});
  b.set(c, {10, 11, 12, 13, 14, 15, 16, 17});
  ASSERT_OK(b.run_graph(g));
  EXPECT_EQ(b.values(y), (std::vector<double>{0, 1, 10, 11, 12, 13, 2, 3, 14, 15, 16, 17}));
}

TEST(RefConcat, EveryAxisAgainstIndexArithmetic) {
  ref_test::Rng rng(11);
  const std::vector<int64_t> base{2, 3, 4};
  const std::vector<int64_t> extents{1, 3, 2};
  for (int64_t axis = 0; axis < 3; ++axis) {
    SCOPED_TRACE(axis);
    dnngraph::Graph g;
    g.set_io_data_type(DataType::Float);
    std::vector<dnngraph::ir::Tensor> in;
    for (size_t i = 0; i < extents.size(); ++i) {
      std::vector<int64_t> d = base;
      d[static_cast<size_t>(axis)] = extents[i];
      // Every second input channels-last, to mix layouts.
      auto t = g.tensor(TensorAttrs().set_name("in" + std::to_string(i)).set_dim(d));
      if (i % 2) t->set_stride(dnngraph::ir::packed_strides(d, {0, 2, 1}));
      in.push_back(t);
    }
    ConcatAttrs at;
    at.axis = axis;
    auto y = g.concatenate(in, at);
    y->set_output(true).set_name("y");
    ASSERT_OK(g.validate());
    ref_test::Buffers b;
    std::vector<std::vector<double>> vals;
    for (auto& t : in) vals.push_back(b.random(t, rng));
    ASSERT_OK(b.run_graph(g));
    const std::vector<double> got = b.values(y);
    std::vector<int64_t> yd = base;
    yd[static_cast<size_t>(axis)] = 6;
    ASSERT_EQ(y->dim, yd);
    for (int64_t i = 0; i < 2 * 3 * 4 * 6 / base[static_cast<size_t>(axis)]; ++i) {
      auto idx = ref_test::unravel(i, yd);
      int64_t k = idx[static_cast<size_t>(axis)], which = 0;
      while (k >= extents[static_cast<size_t>(which)]) k -= extents[static_cast<size_t>(which++)];
      std::vector<int64_t> src = idx, sd = base;
      src[static_cast<size_t>(axis)] = k;
      sd[static_cast<size_t>(axis)] = extents[static_cast<size_t>(which)];
      EXPECT_EQ(got[static_cast<size_t>(i)],
                vals[static_cast<size_t>(which)][static_cast<size_t>(ref_test::ravel(src, sd))]);
    }
  }
}

}  // namespace
