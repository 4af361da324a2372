// Status and Result: a Result holds a value or an error, never neither; the assign-or-return
// macro propagates errors and moves values.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "dnngraph/status.hpp"

namespace dnngraph {
namespace {

TEST(Result, HoldsTheError) {
  Result<int> r = make_error(ErrorCode::InvalidGraph, "matmul 'mm': A has rank 1");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), ErrorCode::InvalidGraph);
  EXPECT_EQ(r.status().message(), "matmul 'mm': A has rank 1");
}

TEST(Result, HoldsTheValue) {
  Result<std::string> r = std::string("plan");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(*r, "plan");
  EXPECT_TRUE(r.status().is_ok());
}

// An OK status is no error: a Result made from one would have neither a value nor an error.
TEST(Result, RefusesAnOkStatus) {
#ifdef NDEBUG
  Result<int> r{Status::ok()};
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), ErrorCode::Internal);
  EXPECT_NE(r.status().message().find("bug in dnngraph"), std::string::npos)
      << r.status().message();
#else
  EXPECT_DEATH(
      {
        Result<int> r{Status::ok()};
        (void)r;
      },
      "OK Status");
#endif
}

int g_calls = 0;

Result<std::unique_ptr<int>> make_box(int v) {
  ++g_calls;
  if (v < 0) return make_error(ErrorCode::InvalidArgument, "box: ", v, " is negative");
  return std::make_unique<int>(v);
}

// Declares with the macro, then assigns an existing variable with it.
Result<int> sum_of_boxes(int a, int b) {
  DNNGRAPH_ASSIGN_OR_RETURN(auto first, make_box(a));
  std::unique_ptr<int> second;
  DNNGRAPH_ASSIGN_OR_RETURN(second, make_box(b));
  return *first + *second;
}

TEST(AssignOrReturn, MovesTheValues) {
  g_calls = 0;
  auto r = sum_of_boxes(3, 4);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(*r, 7);
  EXPECT_EQ(g_calls, 2);  // each expression evaluated once
}

TEST(AssignOrReturn, ReturnsTheFirstError) {
  g_calls = 0;
  auto r = sum_of_boxes(-2, 4);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(r.status().message(), "box: -2 is negative");
  EXPECT_EQ(g_calls, 1);  // stopped at the first failure

  r = sum_of_boxes(1, -5);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), "box: -5 is negative");
}

// Into a function that returns a Status.
Status check_box(int v, int& out) {
  DNNGRAPH_ASSIGN_OR_RETURN(auto box, make_box(v));
  out = *box;
  return Status::ok();
}

TEST(AssignOrReturn, WorksInStatusFunctions) {
  int out = -1;
  EXPECT_TRUE(check_box(9, out).is_ok());
  EXPECT_EQ(out, 9);
  Status s = check_box(-1, out);
  EXPECT_EQ(s.code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(out, 9);
}

}  // namespace
}  // namespace dnngraph
