// Status, StatusOr and the error macros.
#include "core/status.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace stfs {
namespace {

StatusOr<int> Half(int v) {
  if (v % 2) return Status::InvalidArgument("odd");
  return v / 2;
}

StatusOr<int> Quarter(int v) {
  ASSIGN_OR_RETURN(int h, Half(v));
  ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status CheckEven(int v) {
  RETURN_IF_ERROR(Half(v));
  return Status::OK();
}

TEST(Status, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(Status, NamedConstructorsCarryCodeAndMessage) {
  Status s = Status::Corruption("bad header");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_EQ(s.message(), "bad header");
  EXPECT_EQ(s.ToString(), "Corruption: bad header");
  EXPECT_EQ(Status::Stale("x").code(), StatusCode::kStale);
}

TEST(Status, WithContextPrefixesMessageAndKeepsCode) {
  Status s = Status::IOError("short read", EIO).WithContext("model.safetensors");
  EXPECT_EQ(s.message(), "model.safetensors: short read");
  EXPECT_EQ(s.code(), StatusCode::kIOError);
  EXPECT_EQ(s.sys_errno(), EIO);
  EXPECT_TRUE(Status::OK().WithContext("x").ok());
}

TEST(Status, FromErrnoPicksMostSpecificCode) {
  EXPECT_EQ(StatusFromErrno(ENOENT, "f").code(), StatusCode::kNotFound);
  EXPECT_EQ(StatusFromErrno(ESTALE, "f").code(), StatusCode::kStale);
  EXPECT_EQ(StatusFromErrno(EIO, "f").code(), StatusCode::kIOError);
  EXPECT_EQ(StatusFromErrno(ENOMEM, "f").code(), StatusCode::kResourceExhausted);
  Status s = StatusFromErrno(ENOENT, "/no/such");
  EXPECT_EQ(s.sys_errno(), ENOENT);
  EXPECT_NE(s.message().find("/no/such: "), std::string::npos);
}

TEST(Status, MacrosPropagateFirstError) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(3).message(), "odd");
}

}  // namespace
}  // namespace stfs
