// Status and StatusOr: how every fallible operation in stfs reports failure.
//
// Modelled on leveldb's Status (named constructors, a code plus a message) and
// abseil's macros (RETURN_IF_ERROR / ASSIGN_OR_RETURN), so a later move to
// absl::Status or std::expected is mechanical. Nothing in core throws across
// its API: errors travel as values and carry context (file, tensor, offset,
// HTTP status) to the one line the user finally sees.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace stfs {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // the caller asked for something malformed (bad slice, bad option)
  kNotFound,           // no such tensor / file / object
  kCorruption,         // the source violates the safetensors format
  kIOError,            // reading the source failed (errno, HTTP failure after retries)
  kStale,              // the source changed under us (ETag mismatch, 412)
  kUnavailable,        // a transient condition that may succeed later
  kOutOfRange,         // an offset or index beyond the end
  kNotSupported,       // valid request the implementation cannot serve
  kResourceExhausted,  // out of memory (host or device), budget exceeded
  kInternal,           // a bug in stfs
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string msg) { return Status(StatusCode::kInvalidArgument, std::move(msg)); }
  static Status NotFound(std::string msg) { return Status(StatusCode::kNotFound, std::move(msg)); }
  static Status Corruption(std::string msg) { return Status(StatusCode::kCorruption, std::move(msg)); }
  static Status IOError(std::string msg, int sys_errno = 0) { return Status(StatusCode::kIOError, std::move(msg), sys_errno); }
  static Status Stale(std::string msg) { return Status(StatusCode::kStale, std::move(msg)); }
  static Status Unavailable(std::string msg) { return Status(StatusCode::kUnavailable, std::move(msg)); }
  static Status OutOfRange(std::string msg) { return Status(StatusCode::kOutOfRange, std::move(msg)); }
  static Status NotSupported(std::string msg) { return Status(StatusCode::kNotSupported, std::move(msg)); }
  static Status ResourceExhausted(std::string msg) { return Status(StatusCode::kResourceExhausted, std::move(msg)); }
  static Status Internal(std::string msg) { return Status(StatusCode::kInternal, std::move(msg)); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // The errno this status was built from (FromErrno), or 0.
  int sys_errno() const { return sys_errno_; }

  // Returns "Code: message" (or "OK").
  std::string ToString() const;
  // Returns a copy whose message reads "prefix: message"; OK stays OK.
  Status WithContext(std::string_view prefix) const;

 private:
  friend Status StatusFromErrno(int err, std::string_view context);
  Status(StatusCode code, std::string msg, int sys_errno = 0)
      : code_(code), message_(std::move(msg)), sys_errno_(sys_errno) {}

  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  int sys_errno_ = 0;
};

// Turns an errno from a failed system call into the most specific Status.
Status StatusFromErrno(int err, std::string_view context);

// Holds either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!status_.ok() && "StatusOr built from an OK status without a value");
    if (status_.ok()) status_ = Status::Internal("StatusOr built from OK status without a value");
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  T& value() & { assert(ok()); return *value_; }
  const T& value() const& { assert(ok()); return *value_; }
  T&& value() && { assert(ok()); return std::move(*value_); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

namespace internal_status {
inline const Status& GetStatus(const Status& s) { return s; }
template <typename T>
const Status& GetStatus(const StatusOr<T>& s) { return s.status(); }
}  // namespace internal_status

}  // namespace stfs

#define STFS_STATUS_CONCAT_INNER(a, b) a##b
#define STFS_STATUS_CONCAT(a, b) STFS_STATUS_CONCAT_INNER(a, b)

// Returns from the current function with the status of `expr` when it is not OK.
#define RETURN_IF_ERROR(expr)                                                   \
  do {                                                                          \
    auto&& stfs_status_tmp_ = (expr);                                           \
    if (!stfs_status_tmp_.ok())                                                 \
      return ::stfs::internal_status::GetStatus(stfs_status_tmp_);             \
  } while (0)

// Evaluates `rexpr` (a StatusOr); on error returns its status, else moves the
// value into `lhs` (which may be a declaration such as `auto x`).
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  ASSIGN_OR_RETURN_IMPL(STFS_STATUS_CONCAT(stfs_statusor_, __LINE__), lhs, rexpr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                          \
  if (!tmp.ok()) return tmp.status();          \
  lhs = std::move(tmp).value()
