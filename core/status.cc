// Status formatting and the single errno -> Status mapping used everywhere.
#include "core/status.h"

#include <cerrno>
#include <cstring>

namespace stfs {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "Invalid argument";
    case StatusCode::kNotFound: return "Not found";
    case StatusCode::kCorruption: return "Corruption";
    case StatusCode::kIOError: return "IO error";
    case StatusCode::kStale: return "Stale";
    case StatusCode::kUnavailable: return "Unavailable";
    case StatusCode::kOutOfRange: return "Out of range";
    case StatusCode::kNotSupported: return "Not supported";
    case StatusCode::kResourceExhausted: return "Resource exhausted";
    case StatusCode::kInternal: return "Internal";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(code_));
  out += ": ";
  out += message_;
  return out;
}

Status Status::WithContext(std::string_view prefix) const {
  if (ok()) return *this;
  std::string msg(prefix);
  msg += ": ";
  msg += message_;
  return Status(code_, std::move(msg), sys_errno_);
}

Status StatusFromErrno(int err, std::string_view context) {
  std::string msg(context);
  msg += ": ";
  msg += std::strerror(err);
  switch (err) {
    case ENOENT: return Status(StatusCode::kNotFound, std::move(msg), err);
    case EINVAL: return Status(StatusCode::kInvalidArgument, std::move(msg), err);
    case ENOMEM: return Status(StatusCode::kResourceExhausted, std::move(msg), err);
    case ESTALE: return Status(StatusCode::kStale, std::move(msg), err);
    case EAGAIN: return Status(StatusCode::kUnavailable, std::move(msg), err);
    default: return Status(StatusCode::kIOError, std::move(msg), err);
  }
}

}  // namespace stfs
