// moe_grouped_matmul (mode NONE) on cuDNN against the reference engine: the shape measured on
// an H200 with cuDNN 9.19 (E=4, S=512, K=N=256, bf16), empty experts (a repeated start, a last
// expert starting at S) with half precision and INT64 offsets, and B*E groups.
#include <cstring>

#include "harness.hpp"

namespace dnngraph::gpu_test {
namespace {

void moe_graph(Graph& g, int64_t E, int64_t S, int64_t K, int64_t N, DataType t,
               DataType offset_type, int64_t groups = 0) {
  g.set_io_data_type(t).set_compute_data_type(DataType::Float);
  auto token = input(g, "TOKEN", {1, S, K}, t);
  // The frontend's weight layout: each expert's [K, N] column-major.
  auto weight = g.tensor(ir::TensorAttrs()
                             .set_name("WEIGHT")
                             .set_dim({E, K, N})
                             .set_stride({K * N, 1, K})
                             .set_data_type(t));
  auto offset = input(g, "OFFSET", {groups ? groups : E, 1, 1}, offset_type);
  finish(g.moe_grouped_matmul(token, weight, offset), "OUT", {1, S, N}, t);
}

template <class I>
CompareOptions with_offsets(std::vector<I> starts, double min_abs) {
  CompareOptions o;
  o.min_abs = min_abs;
  o.adjust_input = [starts](const ir::TensorAttrs& t, std::vector<unsigned char>& host) {
    if (t.name == "OFFSET") std::memcpy(host.data(), starts.data(), starts.size() * sizeof(I));
  };
  return o;
}

TEST(GpuMoe, GroupedMatmulBf16AsMeasured) {
  DNNGRAPH_REQUIRE_GPU();
  expect_matches_reference(
      [](Graph& g) { moe_graph(g, 4, 512, 256, 256, DataType::BFloat16, DataType::Int32); },
      with_offsets<int32_t>({0, 128, 130, 384}, 2e-2));
}

TEST(GpuMoe, EmptyExpertsHalfInt64Offsets) {
  DNNGRAPH_REQUIRE_GPU();
  expect_matches_reference(
      [](Graph& g) { moe_graph(g, 5, 200, 64, 128, DataType::Half, DataType::Int64); },
      with_offsets<int64_t>({0, 0, 77, 77, 200}, 1e-2));
}

// B=2 batches of E=3 experts: 6 groups, group g on expert g % 3, one of them empty.
TEST(GpuMoe, GroupsAreBatchesOfExpertsBf16) {
  DNNGRAPH_REQUIRE_GPU();
  expect_matches_reference(
      [](Graph& g) {
        moe_graph(g, 3, 384, 128, 64, DataType::BFloat16, DataType::Int32, /*groups=*/6);
      },
      with_offsets<int32_t>({0, 64, 64, 200, 256, 300}, 2e-2));
}

}  // namespace
}  // namespace dnngraph::gpu_test
