// Credential lookup for s3:// (see s3_credentials.h).
#include "core/remote/s3_credentials.h"

#include <cstdlib>
#include <fstream>

namespace stfs {
namespace {

std::string_view Trim(std::string_view s) {
  const char* kSpace = " \t\r\n\f\v";
  size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  size_t end = s.find_last_not_of(kSpace);
  return s.substr(begin, end - begin + 1);
}

std::string Nonempty(const std::optional<std::string>& value) { return value ? *value : std::string(); }

}  // namespace

S3Credentials S3Credentials::Anonymous() {
  S3Credentials c;
  c.origin_ = "no_sign";
  return c;
}

S3Credentials S3Credentials::Keys(std::string access_key_id, std::string secret_access_key,
                                  std::string session_token, std::string origin) {
  S3Credentials c;
  c.anonymous_ = false;
  c.access_key_id_ = std::move(access_key_id);
  c.secret_access_key_ = std::move(secret_access_key);
  c.session_token_ = std::move(session_token);
  c.origin_ = std::move(origin);
  return c;
}

std::string S3Credentials::Describe() const {
  if (anonymous_) return "anonymous (" + origin_ + ")";
  std::string text = "access key " + access_key_id_ + " from " + origin_ + " (secret";
  text += session_token_.empty() ? " hidden)" : " and session token hidden)";
  return text;
}

std::optional<std::string> ProcessEnv(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

StatusOr<S3Credentials> ReadS3CredentialsFile(const std::string& path, const std::string& profile) {
  std::ifstream in(path);
  if (!in) {
    return Status::NotFound("no S3 credentials: " + path +
                            " cannot be read, and AWS_ACCESS_KEY_ID is not set (use -o no_sign "
                            "for public buckets)");
  }
  std::string origin = path + " [" + profile + "]";
  bool found = false;
  bool in_profile = false;
  std::string key_id, secret, token;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    std::string_view text = Trim(line);
    if (text.empty() || text.front() == '#' || text.front() == ';') continue;
    if (text.front() == '[') {
      if (text.back() != ']') {
        return Status::InvalidArgument(path + ":" + std::to_string(number) + ": malformed section line");
      }
      in_profile = Trim(text.substr(1, text.size() - 2)) == profile;
      found = found || in_profile;
      continue;
    }
    size_t eq = text.find('=');
    if (eq == std::string_view::npos) {
      // The line is not echoed: it may hold a secret.
      return Status::InvalidArgument(path + ":" + std::to_string(number) + ": expected 'name = value'");
    }
    if (!in_profile) continue;
    std::string_view name = Trim(text.substr(0, eq));
    std::string value(Trim(text.substr(eq + 1)));
    if (name == "aws_access_key_id") {
      key_id = value;
    } else if (name == "aws_secret_access_key") {
      secret = value;
    } else if (name == "aws_session_token") {
      token = value;
    }
  }
  if (!found) return Status::NotFound("no profile [" + profile + "] in " + path);
  if (key_id.empty() || secret.empty()) {
    return Status::InvalidArgument(origin + ": needs both aws_access_key_id and aws_secret_access_key");
  }
  return S3Credentials::Keys(std::move(key_id), std::move(secret), std::move(token), std::move(origin));
}

StatusOr<S3Credentials> LoadS3Credentials(const S3CredentialOptions& options, const EnvLookup& env) {
  if (options.no_sign) return S3Credentials::Anonymous();
  std::string file = Nonempty(env("AWS_SHARED_CREDENTIALS_FILE"));
  if (file.empty()) {
    std::string home = Nonempty(env("HOME"));
    if (home.empty()) home = ".";
    file = home + "/.aws/credentials";
  }
  if (!options.profile.empty()) return ReadS3CredentialsFile(file, options.profile);
  std::string key_id = Nonempty(env("AWS_ACCESS_KEY_ID"));
  std::string secret = Nonempty(env("AWS_SECRET_ACCESS_KEY"));
  if (!key_id.empty() || !secret.empty()) {
    if (key_id.empty() || secret.empty()) {
      return Status::InvalidArgument("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together");
    }
    return S3Credentials::Keys(std::move(key_id), std::move(secret), Nonempty(env("AWS_SESSION_TOKEN")),
                               "environment");
  }
  std::string profile = Nonempty(env("AWS_PROFILE"));
  return ReadS3CredentialsFile(file, profile.empty() ? "default" : profile);
}

}  // namespace stfs
