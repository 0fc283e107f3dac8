// The JSON that temporary AWS keys arrive in: credential_process output
// ({"Version": 1, "AccessKeyId", "SecretAccessKey", "SessionToken",
// "Expiration"}) and the container / instance metadata answers ({"AccessKeyId",
// "SecretAccessKey", "Token", "Expiration"}, and "Code" on EC2).
//
// Errors say which field is missing or malformed, never a value: the text
// holds a secret.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "core/remote/s3_credentials.h"
#include "core/status.h"

namespace stfs {

enum class S3CredentialJsonFormat {
  kProcess,   // credential_process: Version 1, SessionToken
  kMetadata,  // container and EC2 instance metadata: Token, optional Code
};

// Parses `text` into keys that came from `origin`. InvalidArgument (naming
// the field, not its value) for anything else.
StatusOr<S3Credentials> ParseS3CredentialJson(std::string_view text, S3CredentialJsonFormat format,
                                              const std::string& origin);

// Parses an RFC 3339 / ISO 8601 UTC time ("2026-12-01T14:00:00Z", with
// optional fraction and a "+HH:MM" / "-HH:MM" offset instead of Z).
std::optional<std::chrono::system_clock::time_point> ParseIso8601(std::string_view text);

// Formats `time` as "2026-12-01T14:00:00Z" (for messages).
std::string FormatIso8601(std::chrono::system_clock::time_point time);

}  // namespace stfs
