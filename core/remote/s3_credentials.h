// S3 credentials: a type that never prints a secret, and the static places
// they come from (environment, shared credentials file, none for anonymous
// access). Sources that hand out temporary keys (credential_process,
// container and instance metadata) and their refresh are in
// s3_credential_provider.h.
//
// Credentials never come from the command line (-o profile= names a profile,
// never a key) and never reach a message or a log line: Describe() names the
// access key id and where it came from, nothing else.
#pragma once

#include <chrono>
#include <functional>
#include <map>
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

  // Temporary keys: when they stop working (nullopt: never).
  using WallTime = std::chrono::system_clock::time_point;
  S3Credentials WithExpiration(std::optional<WallTime> expiration) const {
    S3Credentials c = *this;
    c.expiration_ = expiration;
    return c;
  }
  const std::optional<WallTime>& expiration() const { return expiration_; }
  const std::string& origin() const { return origin_; }

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
  std::optional<WallTime> expiration_;
};

struct S3CredentialOptions {
  std::string profile;   // -o profile=; "" = AWS_PROFILE, else "default"
  bool no_sign = false;  // -o no_sign
  // Deadlines of the sources that are asked over time (tests shorten them).
  // credential_process may talk to an SSO portal or a vault: generous, but
  // it is killed when over. The metadata services answer in milliseconds
  // where they exist; 1 s (as the AWS SDKs) makes a machine without them
  // fail fast.
  std::chrono::milliseconds process_timeout{60'000};
  std::chrono::milliseconds web_identity_timeout{5'000};
  std::chrono::milliseconds assume_role_timeout{5'000};  // each AssumeRole of a role_arn profile
  std::chrono::milliseconds container_timeout{2'000};
  std::chrono::milliseconds instance_metadata_timeout{1'000};
};

// Looks up an environment variable; the default reads the process's.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;
std::optional<std::string> ProcessEnv(const char* name);

// Returns AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials.
std::string S3CredentialsFilePath(const EnvLookup& env);
// Returns AWS_CONFIG_FILE, else ~/.aws/config.
std::string S3ConfigFilePath(const EnvLookup& env);
// Returns the profile to use: `profile_option` (-o profile=), else
// AWS_PROFILE, else "default".
std::string S3ProfileName(const std::string& profile_option, const EnvLookup& env);

// The first credentials of the whole chain (s3_credential_provider.h), for
// callers that sign a few requests and need no refresh. Errors name the
// files and profile, never a value read from them.
StatusOr<S3Credentials> LoadS3Credentials(const S3CredentialOptions& options,
                                          const EnvLookup& env = ProcessEnv);

// The top-level settings of `profile` in the shared config file `path`
// ("[profile NAME]", or "[default]" for "default"); empty when the file or
// the section is absent. Errors name the file and line, not its text.
StatusOr<std::map<std::string, std::string>> ReadS3ConfigProfile(const std::string& path,
                                                                  const std::string& profile);

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
