// S3 credentials: where they come from (environment, shared credentials
// file, or none for anonymous access) and a type that never prints a secret.
//
// Credentials never come from the command line (-o profile= names a profile,
// never a key) and never reach a message or a log line: Describe() names the
// access key id and where it came from, nothing else.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace stfs {

class S3Credentials {
 public:
  // No signature at all (-o no_sign): for public buckets.
  static S3Credentials Anonymous();
  // `origin` says where they came from ("environment", "FILE [PROFILE]").
  static S3Credentials Keys(std::string access_key_id, std::string secret_access_key,
                            std::string session_token, std::string origin);

  bool anonymous() const { return anonymous_; }
  const std::string& access_key_id() const { return access_key_id_; }
  const std::string& secret_access_key() const { return secret_access_key_; }
  const std::string& session_token() const { return session_token_; }

  // Returns e.g. "access key AKIA... from environment (secret hidden)" or
  // "anonymous (no_sign)"; never the secret or the session token.
  std::string Describe() const;

 private:
  bool anonymous_ = true;
  std::string access_key_id_;
  std::string secret_access_key_;
  std::string session_token_;
  std::string origin_;
};

struct S3CredentialOptions {
  std::string profile;   // -o profile=; "" = AWS_PROFILE, else "default"
  bool no_sign = false;  // -o no_sign
};

// Looks up an environment variable; the default reads the process's.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;
std::optional<std::string> ProcessEnv(const char* name);

// Finds the credentials to sign with, in this order: no_sign; a profile named
// by -o profile= (from the file); AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY
// (+ AWS_SESSION_TOKEN); the profile AWS_PROFILE (else "default") of
// AWS_SHARED_CREDENTIALS_FILE (else ~/.aws/credentials). Errors name the file
// and profile, never a value read from it.
StatusOr<S3Credentials> LoadS3Credentials(const S3CredentialOptions& options,
                                          const EnvLookup& env = ProcessEnv);

// Returns the `region` of a profile in the shared config file
// (AWS_CONFIG_FILE, else ~/.aws/config): the profile is `profile_option`
// (-o profile=), else AWS_PROFILE, else "default", in the section
// "[profile NAME]" ("[default]" also names the default one). Returns ""
// when the file, the section or the key is absent; an error (file and line,
// not its text) for a malformed line. Indented lines (nested settings such
// as "s3 =" blocks) are not read.
StatusOr<std::string> LoadS3ConfigRegion(const std::string& profile_option, const EnvLookup& env = ProcessEnv);

// Reads profile `profile` of a shared credentials file (INI: [name]
// sections, key = value, '#' and ';' comment lines).
StatusOr<S3Credentials> ReadS3CredentialsFile(const std::string& path, const std::string& profile);

}  // namespace stfs
