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

// Reads an AWS INI file (~/.aws/credentials, ~/.aws/config): calls
// entry(section, name, value) for each top-level "name = value" line.
// With `skip_indented`, indented lines belong to a nested setting (the
// config file's "s3 =" block) and are skipped. Errors name the file and
// line, never the line's text: it may hold a secret.
Status ForEachAwsIniEntry(std::ifstream& in, const std::string& path, bool skip_indented,
                          const std::function<void(std::string_view, std::string_view, std::string)>& entry) {
  std::string section, line;
  for (int number = 1; std::getline(in, line); ++number) {
    std::string_view text = Trim(line);
    if (text.empty() || text.front() == '#' || text.front() == ';') continue;
    if (text.front() == '[') {
      if (text.back() != ']') {
        return Status::InvalidArgument(path + ":" + std::to_string(number) + ": malformed section line");
      }
      section = std::string(Trim(text.substr(1, text.size() - 2)));
      continue;
    }
    size_t eq = text.find('=');
    if (eq == std::string_view::npos) {
      return Status::InvalidArgument(path + ":" + std::to_string(number) + ": expected 'name = value'");
    }
    if (skip_indented && (line.front() == ' ' || line.front() == '\t')) continue;
    entry(section, Trim(text.substr(0, eq)), std::string(Trim(text.substr(eq + 1))));
  }
  return Status::OK();
}

std::string HomeFile(const EnvLookup& env, const char* variable, const char* below_home) {
  std::string file = Nonempty(env(variable));
  if (!file.empty()) return file;
  std::string home = Nonempty(env("HOME"));
  return (home.empty() ? std::string(".") : home) + below_home;
}

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
  std::string key_id, secret, token;
  RETURN_IF_ERROR(ForEachAwsIniEntry(in, path, /*skip_indented=*/false,
                                     [&](std::string_view section, std::string_view name, std::string value) {
    if (section != profile) return;
    found = true;
    if (name == "aws_access_key_id") {
      key_id = std::move(value);
    } else if (name == "aws_secret_access_key") {
      secret = std::move(value);
    } else if (name == "aws_session_token") {
      token = std::move(value);
    }
  }));
  if (!found) return Status::NotFound("no profile [" + profile + "] in " + path);
  if (key_id.empty() || secret.empty()) {
    return Status::InvalidArgument(origin + ": needs both aws_access_key_id and aws_secret_access_key");
  }
  return S3Credentials::Keys(std::move(key_id), std::move(secret), std::move(token), std::move(origin));
}

std::string S3CredentialsFilePath(const EnvLookup& env) {
  return HomeFile(env, "AWS_SHARED_CREDENTIALS_FILE", "/.aws/credentials");
}

std::string S3ConfigFilePath(const EnvLookup& env) { return HomeFile(env, "AWS_CONFIG_FILE", "/.aws/config"); }

std::string S3ProfileName(const std::string& profile_option, const EnvLookup& env) {
  std::string profile = profile_option.empty() ? Nonempty(env("AWS_PROFILE")) : profile_option;
  return profile.empty() ? "default" : profile;
}

StatusOr<std::map<std::string, std::string>> ReadS3ConfigProfile(const std::string& path,
                                                                  const std::string& profile) {
  std::map<std::string, std::string> settings;
  std::ifstream in(path);
  if (!in) return settings;  // no config file: nothing set
  // The config file names profiles "[profile NAME]"; the default one "[default]".
  const std::string wanted = "profile " + profile;
  RETURN_IF_ERROR(ForEachAwsIniEntry(in, path, /*skip_indented=*/true,
                                     [&](std::string_view section, std::string_view name, std::string value) {
    bool ours = section == wanted || (profile == "default" && section == "default");
    if (ours) settings[std::string(name)] = std::move(value);
  }));
  return settings;
}

StatusOr<std::string> LoadS3ConfigRegion(const std::string& profile_option, const EnvLookup& env) {
  ASSIGN_OR_RETURN(auto settings, ReadS3ConfigProfile(S3ConfigFilePath(env), S3ProfileName(profile_option, env)));
  auto region = settings.find("region");
  return region == settings.end() ? std::string() : region->second;
}

}  // namespace stfs
