// Test helpers for absl::Status / absl::StatusOr.
#ifndef DDPIO_TESTS_SUPPORT_STATUS_MATCHERS_H_
#define DDPIO_TESTS_SUPPORT_STATUS_MATCHERS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace ddpio::testing {
inline const absl::Status& ToStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& ToStatus(const absl::StatusOr<T>& s) {
  return s.status();
}
}  // namespace ddpio::testing

#define EXPECT_OK(expr) EXPECT_EQ(::ddpio::testing::ToStatus(expr), ::absl::OkStatus())
#define ASSERT_OK(expr) ASSERT_EQ(::ddpio::testing::ToStatus(expr), ::absl::OkStatus())
#define EXPECT_CODE(expr, code_name)                                                \
  EXPECT_EQ(::ddpio::testing::ToStatus(expr).code(), ::absl::StatusCode::code_name) \
      << ::ddpio::testing::ToStatus(expr)

// ASSERT_OK_AND_ASSIGN(auto x, MakeX());
#define ASSERT_OK_AND_ASSIGN(lhs, rexpr) \
  ASSERT_OK_AND_ASSIGN_IMPL(DDPIO_TEST_CONCAT(statusor_, __LINE__), lhs, rexpr)
#define DDPIO_TEST_CONCAT_(a, b) a##b
#define DDPIO_TEST_CONCAT(a, b) DDPIO_TEST_CONCAT_(a, b)
#define ASSERT_OK_AND_ASSIGN_IMPL(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                              \
  ASSERT_OK(tmp);                                  \
  lhs = std::move(tmp).value()

#endif  // DDPIO_TESTS_SUPPORT_STATUS_MATCHERS_H_
