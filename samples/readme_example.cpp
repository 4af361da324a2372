// The C++ example of README.md, kept identical to it (tests/readme_test.sh checks).
#include <cstdio>
#include <dnngraph/dnngraph.hpp>
using namespace dnngraph;

int main() {
  Graph g;
  g.set_name("conv_bias_relu").set_io_data_type(DataType::BFloat16);
  // NHWC is only strides: N32 C128 56x56, K256 3x3.
  auto X = g.tensor(ir::TensorAttrs()
                        .set_name("X")
                        .set_dim({32, 128, 56, 56})
                        .set_stride({128 * 56 * 56, 1, 56 * 128, 128}));
  auto W = g.tensor(ir::TensorAttrs()
                        .set_name("W")
                        .set_dim({256, 128, 3, 3})
                        .set_stride({128 * 9, 1, 3 * 128, 128}));
  auto B = g.tensor(
      ir::TensorAttrs().set_name("bias").set_dim({1, 256, 1, 1}).set_stride({256, 1, 256, 256}));
  auto conv = g.conv_fprop(X, W, ir::ConvFpropAttrs().set_padding({1, 1}));
  auto Y = g.relu(g.bias(conv, B));
  Y->set_output(true).set_name("Y");
  Status s = g.validate();  // infers Y: [32,256,56,56], NHWC strides, BFLOAT16
  std::puts(s.is_ok() ? g.to_table().c_str() : s.to_string().c_str());
  return s.is_ok() ? 0 : 1;
}
