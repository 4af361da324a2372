// The graph's SM count target (Graph::set_sm_count) in the IR: what validate() accepts and
// refuses, the snapshot engines see, the fingerprint (and so the plan cache key, which ends with
// it) and the JSON form, including files written before the field existed.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "dnngraph/ir/fingerprint.hpp"
#include "dnngraph/ir/json.hpp"
#include "ir/test_util.hpp"

namespace dnngraph::ir {
namespace {

using testing::expect_invalid;
using testing::expect_json_round_trip;
using testing::make_input;

// y = relu(a @ b), fp32.
Graph small_matmul(int32_t sm_count = Graph::kAllSms) {
  Graph g;
  g.set_name("mm_relu").set_io_data_type(DataType::Float).set_sm_count(sm_count);
  auto a = make_input(g, "A", {2, 8, 16}, DataType::Float);
  auto b = make_input(g, "B", {2, 16, 4}, DataType::Float);
  auto y = g.relu(g.matmul(a, b, MatmulAttrs()));
  y->set_output(true).set_name("Y");
  return g;
}

TEST(SmCount, UnsetByDefault) {
  Graph g;
  EXPECT_EQ(g.sm_count(), Graph::kAllSms);
  EXPECT_EQ(Graph::kAllSms, -1);
}

TEST(SmCount, ValidPositiveCountsReachTheSnapshot) {
  for (int32_t n : {1, 8, 132, 100000}) {
    SCOPED_TRACE(n);
    Graph g = small_matmul(n);
    ASSERT_TRUE(g.validate().is_ok());
    ASSERT_NE(g.validated(), nullptr);
    EXPECT_EQ(g.validated()->sm_count(), n);
  }
  Graph unset = small_matmul();
  ASSERT_TRUE(unset.validate().is_ok());
  EXPECT_EQ(unset.validated()->sm_count(), Graph::kAllSms);
}

TEST(SmCount, ZeroAndNegativeValuesAreRefusedNamingTheGraph) {
  for (int32_t n : {0, -2, -132, std::numeric_limits<int32_t>::min()}) {
    SCOPED_TRACE(n);
    Graph g = small_matmul(n);
    expect_invalid(g, {"graph 'mm_relu'", "sm_count " + std::to_string(n), "expected at least 1",
                       "-1 (unset: every SM)", "set_sm_count(n)"});
  }
}

TEST(SmCount, SettingItAgainAfterARefusalValidates) {
  Graph g = small_matmul(0);
  ASSERT_FALSE(g.validate().is_ok());
  g.set_sm_count(16);
  ASSERT_TRUE(g.validate().is_ok());
  EXPECT_EQ(g.validated()->sm_count(), 16);
  // An edit after validate() reaches the next snapshot, not the one taken.
  auto before = g.validated();
  g.set_sm_count(Graph::kAllSms);
  ASSERT_TRUE(g.validate().is_ok());
  EXPECT_EQ(before->sm_count(), 16);
  EXPECT_EQ(g.validated()->sm_count(), Graph::kAllSms);
}

TEST(SmCount, FingerprintDiffersWithAndWithoutAndBetweenValues) {
  const Fingerprint unset = fingerprint(small_matmul());
  const Fingerprint eight = fingerprint(small_matmul(8));
  const Fingerprint thirty_two = fingerprint(small_matmul(32));
  EXPECT_NE(unset, eight);
  EXPECT_NE(unset, thirty_two);
  EXPECT_NE(eight, thirty_two);
  // Equal targets hash equally, with or without shapes and names.
  EXPECT_EQ(eight, fingerprint(small_matmul(8)));
  EXPECT_EQ(fingerprint(small_matmul(8), {false, false}),
            fingerprint(small_matmul(8), {false, false}));
  EXPECT_NE(fingerprint(small_matmul(8), {false, false}),
            fingerprint(small_matmul(), {false, false}));
  // Setting the default explicitly is the same as never setting it.
  Graph g = small_matmul(8);
  g.set_sm_count(Graph::kAllSms);
  EXPECT_EQ(fingerprint(g), unset);
}

TEST(SmCount, JsonWritesItOnlyWhenSetAndRoundTrips) {
  const std::string plain = to_json(small_matmul());
  EXPECT_EQ(plain.find("sm_count"), std::string::npos) << plain;
  for (int32_t n : {1, 8, 132}) {
    SCOPED_TRACE(n);
    Graph g = small_matmul(n);
    ASSERT_TRUE(g.validate().is_ok());
    const std::string text = to_json(g);
    EXPECT_NE(text.find("\"sm_count\": " + std::to_string(n)), std::string::npos) << text;
    Graph loaded;
    expect_json_round_trip(g, loaded);
    EXPECT_EQ(loaded.sm_count(), n);
  }
}

// A description written before the field existed (no "sm_count") loads unset; -1, the value the
// cuDNN frontend writes for "unset", loads unset too.
TEST(SmCount, OldJsonWithoutTheFieldLoadsUnset) {
  Graph g = small_matmul();
  ASSERT_TRUE(g.validate().is_ok());
  const std::string old_text = to_json(g);
  ASSERT_EQ(old_text.find("sm_count"), std::string::npos);
  Graph loaded;
  ASSERT_TRUE(from_json(old_text, loaded).is_ok());
  EXPECT_EQ(loaded.sm_count(), Graph::kAllSms);
  EXPECT_TRUE(loaded.validate().is_ok());
  EXPECT_EQ(fingerprint(loaded), fingerprint(g));

  std::string minus_one = old_text;
  const std::string key = "\"dynamic_shape\": false,";
  const size_t at = minus_one.find(key);
  ASSERT_NE(at, std::string::npos) << old_text;
  minus_one.insert(at + key.size(), " \"sm_count\": -1,");
  Graph loaded2;
  Status s = from_json(minus_one, loaded2);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(loaded2.sm_count(), Graph::kAllSms);
  EXPECT_EQ(to_json(loaded2), old_text);  // written back without the field
}

TEST(SmCount, JsonRefusesValuesThatAreNotAnInt32) {
  Graph g = small_matmul();
  ASSERT_TRUE(g.validate().is_ok());
  const std::string text = to_json(g);
  const std::string key = "\"dynamic_shape\": false,";
  const size_t at = text.find(key);
  ASSERT_NE(at, std::string::npos) << text;
  struct Case {
    std::string value, expect;
  };
  for (const Case& c : {Case{"\"eight\"", "field 'sm_count': expected a 64-bit integer"},
                        Case{"8.5", "field 'sm_count': expected a 64-bit integer"},
                        Case{"4294967296", "field 'sm_count': expected a 32-bit integer"},
                        Case{"-2147483649", "field 'sm_count': expected a 32-bit integer"}}) {
    SCOPED_TRACE(c.value);
    std::string bad = text;
    bad.insert(at + key.size(), " \"sm_count\": " + c.value + ",");
    Graph loaded;
    Status s = from_json(bad, loaded);
    ASSERT_FALSE(s.is_ok());
    EXPECT_EQ(s.code(), ErrorCode::InvalidGraph) << s.to_string();
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << s.message();
  }
  // An int32 that is not a count loads as written (the file is exact) and validate() refuses it.
  std::string zero = text;
  zero.insert(at + key.size(), " \"sm_count\": 0,");
  Graph loaded;
  ASSERT_TRUE(from_json(zero, loaded).is_ok());
  EXPECT_EQ(loaded.sm_count(), 0);
  expect_invalid(loaded, {"sm_count 0"});
}

}  // namespace
}  // namespace dnngraph::ir
