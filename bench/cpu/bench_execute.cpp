// C++ side of the Python-overhead comparison (bench/python/execute_overhead.py): the cost of
// Graph::execute on a tiny reference-engine graph, Y = relu(A + B) on [1, 16] fp32, the same
// graph the Python script times through the binding.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <vector>

#include "dnngraph/graph.hpp"

namespace {

struct Tiny {
  dnngraph::HandlePtr handle;
  dnngraph::Graph graph;
  dnngraph::ir::Tensor a, b, y;
  std::vector<float> va, vb, vy;
  std::vector<unsigned char> ws;

  dnngraph::VariantPack pack() {
    return {{a->uid, va.data()}, {b->uid, vb.data()}, {y->uid, vy.data()}};
  }
  // One execute; false, the benchmark stopped with the error, when it fails.
  bool execute(benchmark::State& state, const dnngraph::VariantPack& p) {
    dnngraph::Status s = graph.execute(*handle, p, ws.data(), static_cast<int64_t>(ws.size()));
    if (!s.is_ok()) state.SkipWithError(s.to_string().c_str());
    return s.is_ok();
  }
};

// Builds the graph once per benchmark; aborts the benchmark (not the process) on failure.
bool make_tiny(Tiny& t, benchmark::State& state) {
  auto h = dnngraph::Handle::create(dnngraph::Device::cpu());
  if (!h.is_ok()) {
    state.SkipWithError(h.status().to_string().c_str());
    return false;
  }
  t.handle = h.value();
  t.graph.set_name("tiny").set_io_data_type(dnngraph::DataType::Float);
  dnngraph::ir::TensorAttrs attrs;
  attrs.set_dim({1, 16}).set_stride({16, 1}).set_data_type(dnngraph::DataType::Float);
  t.a = t.graph.tensor(dnngraph::ir::TensorAttrs(attrs).set_name("A"));
  t.b = t.graph.tensor(dnngraph::ir::TensorAttrs(attrs).set_name("B"));
  t.y = t.graph.relu(t.graph.add(t.a, t.b));
  t.y->set_output(true);
  dnngraph::Status s = t.graph.build(t.handle);
  if (!s.is_ok()) {
    state.SkipWithError(s.to_string().c_str());
    return false;
  }
  t.va.assign(16, 1.0f);
  t.vb.assign(16, -0.5f);
  t.vy.assign(16, 0.0f);
  auto ws = t.graph.get_workspace_size();
  t.ws.resize(static_cast<size_t>(ws.is_ok() ? ws.value() : 0) + 1);
  return true;
}

// The pack built once: the engine call alone.
void BM_ExecutePrebuiltPack(benchmark::State& state) {
  Tiny t;
  if (!make_tiny(t, state)) return;
  const dnngraph::VariantPack pack = t.pack();
  for (auto _ : state) {
    if (!t.execute(state, pack)) break;
    benchmark::DoNotOptimize(t.vy.data());
  }
}
BENCHMARK(BM_ExecutePrebuiltPack);

// The pack rebuilt every call, as a C++ caller holding raw pointers would.
void BM_ExecuteFreshPack(benchmark::State& state) {
  Tiny t;
  if (!make_tiny(t, state)) return;
  for (auto _ : state) {
    if (!t.execute(state, t.pack())) break;
    benchmark::DoNotOptimize(t.vy.data());
  }
}
BENCHMARK(BM_ExecuteFreshPack);

}  // namespace

BENCHMARK_MAIN();
