#include "harness.hpp"

#include <cstdio>

namespace dnngraph::gpu_test {
namespace {

void expect_clean(const RunReport& r) {
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  EXPECT_GT(r.compared, 0);
  EXPECT_EQ(r.mismatches, 0) << r.mismatches << " of " << r.compared
                             << " elements differ; first: " << r.first_mismatch << " (plan "
                             << r.plan_name << ")";
}

}  // namespace

void expect_matches_reference(const std::function<void(Graph&)>& make, const CompareOptions& o) {
  expect_clean(run_and_compare(make, o));
}

void report_and_expect_match(const char* tag, const std::string& what,
                             const std::function<void(Graph&)>& make, const CompareOptions& o) {
  const RunReport r = run_and_compare(make, o);
  std::printf("%s %s: %s plan %s, %lld compared, %lld mismatches, max abs err %.4g%s%s\n", tag,
              what.c_str(), r.status.is_ok() ? "ok" : r.status.to_string().c_str(),
              r.plan_name.c_str(), static_cast<long long>(r.compared),
              static_cast<long long>(r.mismatches), r.max_abs_err, r.mismatches ? ", first: " : "",
              r.first_mismatch.c_str());
  expect_clean(r);
}

}  // namespace dnngraph::gpu_test
