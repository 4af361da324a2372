// The smallest useful graph for runtime tests: Y = relu(A + B) on [2,3,4] fp32 with user
// uids 1, 2, 3, a CPU handle, and seeded random inputs.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "dnngraph/dnngraph.hpp"

namespace dnngraph::test {

struct AddRelu {
  Graph g;
  ir::Tensor a, b, y;
  AddRelu() {
    g.set_name("add_relu").set_io_data_type(DataType::Float);
    a = g.tensor(
        ir::TensorAttrs().set_name("A").set_dim({2, 3, 4}).set_stride({12, 4, 1}).set_uid(1));
    b = g.tensor(
        ir::TensorAttrs().set_name("B").set_dim({2, 3, 4}).set_stride({12, 4, 1}).set_uid(2));
    y = g.relu(g.add(a, b));
    y->set_output(true).set_name("Y").set_uid(3);
  }
};

inline HandlePtr cpu() { return Handle::create(Device::cpu()).value(); }

inline std::vector<float> random_vec(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-2.f, 2.f);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

}  // namespace dnngraph::test
