// Engines by index on cuDNN (Graph::get_engine_count / get_knobs_for_engine /
// create_execution_plan): plans made from an engine id and knob values, as the frontend's users
// write an exhaustive search, run and match the reference engine.
#include <cstdio>

#include "harness.hpp"

namespace dnngraph::gpu_test {
namespace {

void conv_bias_relu(Graph& g) {
  const DataType t = DataType::BFloat16;
  g.set_io_data_type(t);
  auto x = input(g, "X", {2, 16, 10, 12}, t, true);
  auto w = input(g, "W", {32, 16, 3, 3}, t, true);
  auto b = input(g, "B", {1, 32, 1, 1}, t, true);
  ir::ConvFpropAttrs a;
  a.set_padding({1, 1}).set_stride({1, 1}).set_dilation({1, 1});
  finish(g.relu(g.bias(g.conv_fprop(x, w, a), b)), "Y", {2, 32, 10, 12}, t, true);
}

TEST(GpuEngineKnobs, EveryKernelCfgPlanOfAConvRunsAndMatches) {
  DNNGRAPH_REQUIRE_GPU();
  int engines_with_knobs = 0, made = 0, refused = 0;
  CompareOptions o{.min_abs = 2e-2};
  o.build = [&](Graph& g, const HandlePtr& h) -> Status {
    DNNGRAPH_TRY(g.build_operation_graph(h));
    DNNGRAPH_ASSIGN_OR_RETURN(const int64_t count, g.get_engine_count());
    for (int64_t e = 0; e < count; ++e) {
      auto knobs = g.get_knobs_for_engine(e);
      if (!knobs) continue;  // this engine cannot run the graph
      for (const KnobInfo& k : *knobs) {
        if (k.name != "KERNEL_CFG") continue;
        ++engines_with_knobs;
        for (int64_t v = k.min_value; v <= k.max_value && v < k.min_value + 8 * k.stride;
             v += k.stride)
          (g.create_execution_plan(e, {{k.name, v}}).is_ok() ? made : refused)++;
      }
    }
    if (made == 0) return make_error(ErrorCode::NotSupported, "no KERNEL_CFG plan was made");
    DNNGRAPH_TRY(g.check_support());
    return g.build_plans();
  };
  RunReport r = run_and_compare(conv_bias_relu, o);
  std::printf(
      "KNOBS_RESULT conv bf16 NHWC: %d engines with KERNEL_CFG, %d plans made, %d "
      "refused; ran plan %s: %lld compared, %lld mismatches, max abs err %g\n",
      engines_with_knobs, made, refused, r.plan_name.c_str(), static_cast<long long>(r.compared),
      static_cast<long long>(r.mismatches), r.max_abs_err);
  ASSERT_TRUE(r.status.is_ok()) << r.status.message();
  EXPECT_GT(made, 0);
  EXPECT_EQ(r.mismatches, 0) << r.first_mismatch;
}

TEST(GpuEngineKnobs, AHeuristicsPlanIsMadeAgainFromItsEngineAndKnobs) {
  DNNGRAPH_REQUIRE_GPU();
  auto h = Handle::create(Device::cuda(0)).value();
  Graph g;
  conv_bias_relu(g);
  ASSERT_TRUE(g.build(h, {HeurMode::A}).is_ok());
  const CandidateInfo first = g.candidates().at(0).info;
  ASSERT_GE(first.engine_id, 0);
  Graph again;
  conv_bias_relu(again);
  ASSERT_TRUE(again.build_operation_graph(h).is_ok());
  Status s = again.create_execution_plan(first.engine_id, first.knobs);
  ASSERT_TRUE(s.is_ok()) << s.message();
  ASSERT_TRUE(again.check_support().is_ok());
  EXPECT_EQ(again.candidates().at(0).info.name, first.name);
  auto bad = again.create_execution_plan(first.engine_id, {{"NOT_A_KNOB", 1}});
  EXPECT_EQ(bad.code(), ErrorCode::InvalidArgument) << bad.message();
}

}  // namespace
}  // namespace dnngraph::gpu_test
