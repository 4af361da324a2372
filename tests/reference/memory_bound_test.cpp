// The reference engine bounds its fp64 working memory at build: a small request whose working
// copies would be huge (broadcasting) is refused with the size, never allocated; conv padding
// costs nothing where the filter never reads it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "dnngraph/dnngraph.hpp"

namespace dnngraph {
namespace {

HandlePtr cpu() { return Handle::create(Device::cpu()).value(); }

struct EnvGuard {
  explicit EnvGuard(const char* value) {
    if (value)
      setenv("DNNGRAPH_REFERENCE_MAX_BYTES", value, 1);
    else
      unsetenv("DNNGRAPH_REFERENCE_MAX_BYTES");
  }
  ~EnvGuard() { unsetenv("DNNGRAPH_REFERENCE_MAX_BYTES"); }
};

TEST(ReferenceMemory, HugePaddingOnATinyConvIsCheap) {
  EnvGuard env("1048576");  // 1 MiB
  Graph g;
  g.set_name("padded").set_io_data_type(DataType::Float).set_compute_data_type(DataType::Float);
  auto x =
      g.tensor(ir::TensorAttrs().set_name("X").set_dim({1, 1, 4, 4}).set_stride({16, 16, 4, 1}));
  auto w = g.tensor(ir::TensorAttrs().set_name("W").set_dim({1, 1, 1, 1}).set_stride({1, 1, 1, 1}));
  // A 64-byte input and a 2x2 output: the padded copy holds the 4 positions the filter reads,
  // not a 60004x60004 zero-padded image (~27 GiB), so it builds under a 1 MiB limit.
  auto y = g.conv_fprop(
      x, w, ir::ConvFpropAttrs().set_padding({30000, 30000}).set_stride({40000, 40000}));
  y->set_output(true).set_name("Y");
  Status s = g.build(cpu());
  EXPECT_TRUE(s.is_ok()) << s.to_string();
}

Graph broadcast_add() {
  Graph g;
  g.set_name("outer").set_io_data_type(DataType::Float);
  auto a =
      g.tensor(ir::TensorAttrs().set_name("A").set_dim({1, 1, 1000}).set_stride({1000, 1000, 1}));
  auto b = g.tensor(ir::TensorAttrs().set_name("B").set_dim({1, 1000, 1}).set_stride({1000, 1, 1}));
  g.add(a, b)->set_output(true).set_name("Y");
  return g;
}

TEST(ReferenceMemory, TheLimitIsConfigurable) {
  {
    EnvGuard env("1048576");  // 1 MiB: the [1,1000,1000] fp64 copies need ~31 MiB
    Graph g = broadcast_add();
    Status s = g.build(cpu());
    ASSERT_EQ(s.code(), ErrorCode::NotSupported) << s.to_string();
    EXPECT_NE(s.message().find("above the limit of 1 MiB"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("'outer'"), std::string::npos) << s.message();
  }
  {
    EnvGuard env("1073741824");
    Graph g = broadcast_add();
    EXPECT_TRUE(g.build(cpu()).is_ok());
  }
}

}  // namespace
}  // namespace dnngraph
