// block_scale_quantize / block_scale_dequantize on the reference engine against hand-worked
// values; their IR rules and messages.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/ref_harness.hpp"
#include "dnngraph/dnngraph.hpp"

namespace {

using dnngraph::DataType;
using dnngraph::ir::BlockScaleDequantizeAttrs;
using dnngraph::ir::BlockScaleQuantizeAttrs;
using dnngraph::ir::TensorAttrs;

BlockScaleQuantizeAttrs quant(int64_t block, std::optional<int64_t> axis = std::nullopt,
                              bool transpose = false) {
  BlockScaleQuantizeAttrs a;
  a.block_size = block;
  a.axis = axis;
  a.transpose = transpose;
  return a;
}

TEST(RefBlockScale, QuantizeHandWorked) {
  // Blocks of 2 along the last dim, E4M3 (emax 8):
  //   {1, -3}: amax 3 = 1.5 * 2^1 -> scale 2^(1-8) = 2^-7, Y = {128, -384};
  //   {0.5, 2}: amax 2 = 2^1 -> scale 2^-7, Y = {64, 256};
  //   {0, 0}: scale 2^-127, Y = {0, 0};
  //   {496, 1}: amax 496 = 1.9375 * 2^8 -> scale 2^0, Y = {448 (saturated), 1}.
  dnngraph::Graph g;
  g.set_io_data_type(DataType::Float);
  auto x = g.tensor(TensorAttrs().set_name("x").set_dim({2, 4}).set_stride({4, 1}));
  auto [y, s] = g.block_scale_quantize(x, quant(2));
  y->set_output(true).set_name("y").set_data_type(DataType::FP8_E4M3);
  s->set_output(true).set_name("s");
  ASSERT_OK(g.validate());
  EXPECT_EQ(s->dim, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(s->data_type, DataType::FP8_E8M0);
  ref_test::Buffers b;
  b.set(x, {1, -3, 0.5, 2, 0, 0, 496, 1});
  ASSERT_OK(b.run_graph(g));
  EXPECT_EQ(b.values(y), (std::vector<double>{128, -384, 64, 256, 0, 0, 448, 1}));
  EXPECT_EQ(b.values(s), (std::vector<double>{std::ldexp(1.0, -7), std::ldexp(1.0, -7),
                                              std::ldexp(1.0, -127), 1.0}));
}

TEST(RefBlockScale, QuantizeAlongAnAxisWithTransposedLayout) {
  // X [4, 2] row-major, blocks of 2 along dim 0, E5M2 (emax 15): column 0 holds {8, 1 | 3, 4},
  // column 1 {-2, 0.25 | 0, 0}.
  dnngraph::Graph g;
  g.set_io_data_type(DataType::Float);
  auto x = g.tensor(TensorAttrs().set_name("x").set_dim({4, 2}).set_stride({2, 1}));
  auto [y, s] = g.block_scale_quantize(x, quant(2, 0, true));
  y->set_output(true).set_name("y").set_data_type(DataType::FP8_E5M2);
  s->set_output(true).set_name("s");
  ASSERT_OK(g.validate());
  EXPECT_EQ(y->stride, (std::vector<int64_t>{1, 4}));  // the axis (dim 0) innermost
  EXPECT_EQ(s->dim, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(s->stride, (std::vector<int64_t>{1, 2}));
  ref_test::Buffers b;
  b.set(x, {8, -2, 1, 0.25, 3, 0, 4, 0});
  ASSERT_OK(b.run_graph(g));
  // Scales: 8 -> 2^(3-15); 2 -> 2^(1-15); 4 -> 2^(2-15); 0 -> 2^-127.
  EXPECT_EQ(b.values(s), (std::vector<double>{std::ldexp(1.0, -12), std::ldexp(1.0, -14),
                                              std::ldexp(1.0, -13), std::ldexp(1.0, -127)}));
  EXPECT_EQ(b.values(y), (std::vector<double>{32768, -32768, 4096, 4096, 24576, 0, 32768, 0}));
}

TEST(RefBlockScale, DequantizeHandWorked) {
  // X [2, 4] E4M3, block_size [2] (trailing dim only): SCALE [2, 2].
  dnngraph::Graph g;
  g.set_io_data_type(DataType::Float);
  auto x = g.tensor(TensorAttrs().set_name("x").set_dim({2, 4}).set_stride({4, 1}).set_data_type(
      DataType::FP8_E4M3));
  auto s = g.tensor(TensorAttrs().set_name("s").set_dim({2, 2}).set_stride({2, 1}).set_data_type(
      DataType::FP8_E8M0));
  BlockScaleDequantizeAttrs a;
  a.block_size = {2};
  auto y = g.block_scale_dequantize(x, s, a);
  y->set_output(true).set_name("y").set_data_type(DataType::Float);
  ASSERT_OK(g.validate());
  ref_test::Buffers b;
  b.set(x, {1, -2, 3, 0.5, 6, 7, -8, 0.25});
  b.set(s, {0.5, 4, 1, 0.125});
  ASSERT_OK(b.run_graph(g));
  EXPECT_EQ(b.values(y), (std::vector<double>{0.5, -1, 12, 2, 6, 7, -1, 0.03125}));
}

TEST(RefBlockScale, RulesNameTheOpAndTheTensor) {
  struct Case {
    BlockScaleQuantizeAttrs a;
    DataType y_type;
    std::string part;
  };
  const std::vector<Case> cases = {
      {quant(3), DataType::FP8_E4M3, "block_size 3 must be 1 or more and divide dim 1 (4)"},
      {quant(2, 2), DataType::FP8_E4M3, "axis 2 is not a dim"},
      {quant(2), DataType::Half, "FP8_E4M3, FP8_E5M2 (MXFP8) or FP4_E2M1 (MXFP4, NVFP4)"},
  };
  for (const Case& c : cases) {
    dnngraph::Graph g;
    g.set_io_data_type(DataType::Float);
    auto x = g.tensor(TensorAttrs().set_name("x").set_dim({2, 4}).set_stride({4, 1}));
    auto [y, s] = g.block_scale_quantize(x, c.a, {"q"});
    y->set_output(true).set_data_type(c.y_type);
    s->set_output(true);
    const dnngraph::Status st = g.validate();
    ASSERT_FALSE(st.is_ok()) << c.part;
    EXPECT_NE(st.message().find("block_scale_quantize 'q'"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(c.part), std::string::npos) << st.message();
  }
  dnngraph::Graph g;
  g.set_io_data_type(DataType::Float);
  auto x = g.tensor(TensorAttrs().set_name("x").set_dim({2, 4}).set_stride({4, 1}));
  auto s = g.tensor(TensorAttrs().set_name("s").set_dim({2, 3}).set_stride({3, 1}).set_data_type(
      DataType::FP8_E8M0));
  BlockScaleDequantizeAttrs a;
  a.block_size = {1, 2};
  g.block_scale_dequantize(x, s, a, {"dq"})->set_output(true);
  const dnngraph::Status st = g.validate();
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("block_scale_dequantize 'dq'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("dim 1 of SCALE 's'"), std::string::npos) << st.message();
}

}  // namespace
