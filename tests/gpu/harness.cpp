#include "harness.hpp"

namespace dnngraph::gpu_test {

void expect_matches_reference(const std::function<void(Graph&)>& make, const CompareOptions& o) {
  expect_report_ok(run_and_compare(make, o));
}

void expect_report_ok(const RunReport& r) {
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  EXPECT_GT(r.compared, 0);
  EXPECT_EQ(r.mismatches, 0) << r.mismatches << " of " << r.compared
                             << " elements differ; first: " << r.first_mismatch << " (plan "
                             << r.plan_name << ")";
}

}  // namespace dnngraph::gpu_test
