// Parsing temporary AWS keys (see s3_credential_json.h), with nlohmann::json.
#include "core/remote/s3_credential_json.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <ctime>

namespace stfs {
namespace {

// Returns the string field `name`, or "" when absent or not a string.
std::string StringField(const nlohmann::json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

bool ReadDigits(std::string_view text, size_t at, size_t count, int* value) {
  if (at + count > text.size()) return false;
  int v = 0;
  for (size_t i = at; i < at + count; ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
    v = v * 10 + (text[i] - '0');
  }
  *value = v;
  return true;
}

}  // namespace

std::optional<std::chrono::system_clock::time_point> ParseIso8601(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS
  int year, month, day, hour, minute, second;
  if (text.size() < 20 || !ReadDigits(text, 0, 4, &year) || text[4] != '-' || !ReadDigits(text, 5, 2, &month) ||
      text[7] != '-' || !ReadDigits(text, 8, 2, &day) || (text[10] != 'T' && text[10] != 't' && text[10] != ' ') ||
      !ReadDigits(text, 11, 2, &hour) || text[13] != ':' || !ReadDigits(text, 14, 2, &minute) ||
      text[16] != ':' || !ReadDigits(text, 17, 2, &second)) {
    return std::nullopt;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return std::nullopt;
  }
  size_t at = 19;
  if (at < text.size() && text[at] == '.') {
    ++at;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') ++at;  // sub-second: dropped
  }
  int offset_seconds = 0;
  if (at < text.size() && (text[at] == 'Z' || text[at] == 'z')) {
    ++at;
  } else if (at < text.size() && (text[at] == '+' || text[at] == '-')) {
    int oh, om;
    if (!ReadDigits(text, at + 1, 2, &oh) || at + 3 >= text.size() || text[at + 3] != ':' ||
        !ReadDigits(text, at + 4, 2, &om)) {
      return std::nullopt;
    }
    offset_seconds = (text[at] == '+' ? 1 : -1) * (oh * 3600 + om * 60);
    at += 6;
  } else {
    return std::nullopt;  // no zone: ambiguous
  }
  if (at != text.size()) return std::nullopt;
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  time_t t = timegm(&tm);
  return std::chrono::system_clock::from_time_t(t - offset_seconds);
}

std::string FormatIso8601(std::chrono::system_clock::time_point time) {
  time_t t = std::chrono::system_clock::to_time_t(time);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[64];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  return text;
}

StatusOr<S3Credentials> ParseS3CredentialJson(std::string_view text, S3CredentialJsonFormat format,
                                              const std::string& origin) {
  // No exceptions, and no part of the text in any message.
  nlohmann::json object = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (object.is_discarded() || !object.is_object()) {
    return Status::InvalidArgument(origin + ": the answer is not a JSON object");
  }
  const bool process = format == S3CredentialJsonFormat::kProcess;
  if (process) {
    auto version = object.find("Version");
    if (version == object.end() || !version->is_number_integer() || version->get<int64_t>() != 1) {
      return Status::InvalidArgument(origin + ": \"Version\" must be 1");
    }
  } else {
    std::string code = StringField(object, "Code");
    if (object.contains("Code") && code != "Success") {
      return Status::InvalidArgument(origin + ": \"Code\" is not \"Success\"");
    }
  }
  std::string key_id = StringField(object, "AccessKeyId");
  std::string secret = StringField(object, "SecretAccessKey");
  std::string token = StringField(object, process ? "SessionToken" : "Token");
  if (key_id.empty()) return Status::InvalidArgument(origin + ": no \"AccessKeyId\" string");
  if (secret.empty()) return Status::InvalidArgument(origin + ": no \"SecretAccessKey\" string");
  std::optional<std::chrono::system_clock::time_point> expiration;
  if (object.contains("Expiration")) {
    expiration = ParseIso8601(StringField(object, "Expiration"));
    if (!expiration) return Status::InvalidArgument(origin + ": \"Expiration\" is not an ISO 8601 UTC time");
  } else if (!process) {
    // The metadata services always send one: keys without are a broken answer.
    return Status::InvalidArgument(origin + ": no \"Expiration\"");
  }
  return S3Credentials::Keys(std::move(key_id), std::move(secret), std::move(token), origin)
      .WithExpiration(expiration);
}

}  // namespace stfs
