// The strict one-pass scanner for S3's XML answers (see s3_xml.h).
#include "core/remote/s3_xml.h"

#include <charconv>
#include <functional>

namespace stfs {
namespace {

constexpr size_t kMaxDepth = 16;

// Called at the end of each element with the names from the root down to it;
// `leaf_text` is its raw text when it had no child element, else null.
using ElementEnd = std::function<Status(const std::vector<std::string_view>& path,
                                        const std::string_view* leaf_text)>;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.' || c == ':';
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

Status Malformed(size_t at, std::string_view why) {
  return Status::Corruption("S3 XML answer, byte " + std::to_string(at) + ": " + std::string(why));
}

// Walks `xml` once, calling `on_end` per element; returns the root's name.
StatusOr<std::string> ScanXml(std::string_view xml, const ElementEnd& on_end) {
  std::vector<std::string_view> path;
  std::string root;
  bool had_child = false;  // the innermost open element has a child
  bool root_closed = false;
  size_t text_start = 0;
  size_t i = 0;
  while (i < xml.size()) {
    if (xml[i] != '<') {
      if (path.empty() && !IsSpace(xml[i])) return Malformed(i, "text outside the root element");
      ++i;
      continue;
    }
    std::string_view rest = xml.substr(i);
    if (rest.substr(0, 2) == "<?") {
      size_t end = xml.find("?>", i + 2);
      if (end == std::string_view::npos) return Malformed(i, "unterminated <?");
      i = end + 2;
      continue;
    }
    if (rest.substr(0, 4) == "<!--") {
      size_t end = xml.find("-->", i + 4);
      if (end == std::string_view::npos) return Malformed(i, "unterminated comment");
      i = end + 3;
      continue;
    }
    if (rest.substr(0, 2) == "<!") return Malformed(i, "DOCTYPE and CDATA are not accepted");
    if (rest.substr(0, 2) == "</") {
      size_t name_begin = i + 2;
      size_t j = name_begin;
      while (j < xml.size() && IsNameChar(xml[j])) ++j;
      std::string_view name = xml.substr(name_begin, j - name_begin);
      while (j < xml.size() && IsSpace(xml[j])) ++j;
      if (j >= xml.size() || xml[j] != '>') return Malformed(i, "malformed end tag");
      if (path.empty() || path.back() != name) return Malformed(i, "end tag does not match");
      std::string_view text = xml.substr(text_start, i - text_start);
      RETURN_IF_ERROR(on_end(path, had_child ? nullptr : &text));
      path.pop_back();
      had_child = true;  // the parent now has a child
      root_closed = path.empty();
      i = j + 1;
      continue;
    }
    size_t name_begin = i + 1;
    size_t j = name_begin;
    while (j < xml.size() && IsNameChar(xml[j])) ++j;
    if (j == name_begin) return Malformed(i, "malformed tag");
    std::string_view name = xml.substr(name_begin, j - name_begin);
    char quote = 0;
    while (j < xml.size() && (quote != 0 || xml[j] != '>')) {
      if (quote != 0) {
        if (xml[j] == quote) quote = 0;
      } else if (xml[j] == '"' || xml[j] == '\'') {
        quote = xml[j];
      }
      ++j;
    }
    if (j >= xml.size()) return Malformed(i, "unterminated tag");
    if (root_closed) return Malformed(i, "a second root element");
    if (path.size() >= kMaxDepth) return Malformed(i, "nested too deeply");
    if (path.empty()) root = std::string(name);
    bool self_closing = xml[j - 1] == '/';
    path.push_back(name);
    if (self_closing) {
      std::string_view empty;
      RETURN_IF_ERROR(on_end(path, &empty));
      path.pop_back();
      had_child = true;
      root_closed = path.empty();
    } else {
      had_child = false;
      text_start = j + 1;
    }
    i = j + 1;
  }
  if (!path.empty()) return Malformed(xml.size(), "document ends inside <" + std::string(path.back()) + ">");
  if (root.empty()) return Malformed(0, "no element");
  return root;
}

bool PathIs(const std::vector<std::string_view>& path, std::initializer_list<std::string_view> names) {
  if (path.size() != names.size()) return false;
  size_t k = 0;
  for (std::string_view n : names) {
    if (path[k++] != n) return false;
  }
  return true;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

StatusOr<std::string> Decoded(const std::string_view* text, std::string_view element) {
  if (text == nullptr) return Status::Corruption("S3 XML answer: <" + std::string(element) + "> has child elements");
  return DecodeXmlText(*text);
}

}  // namespace

StatusOr<std::string> DecodeXmlText(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c == '<') return Status::Corruption("S3 XML answer: '<' in text");
    if (c != '&') {
      out.push_back(c);
      ++i;
      continue;
    }
    size_t semi = text.find(';', i);
    if (semi == std::string_view::npos || semi - i > 12) {
      return Status::Corruption("S3 XML answer: unterminated entity");
    }
    std::string_view entity = text.substr(i + 1, semi - i - 1);
    if (entity == "amp") {
      out.push_back('&');
    } else if (entity == "lt") {
      out.push_back('<');
    } else if (entity == "gt") {
      out.push_back('>');
    } else if (entity == "quot") {
      out.push_back('"');
    } else if (entity == "apos") {
      out.push_back('\'');
    } else if (entity.size() >= 2 && entity[0] == '#') {
      bool hex = entity[1] == 'x';
      std::string_view digits = entity.substr(hex ? 2 : 1);
      uint32_t cp = 0;
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), cp, hex ? 16 : 10);
      if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || cp == 0 ||
          cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
        return Status::Corruption("S3 XML answer: bad character reference &" + std::string(entity) + ";");
      }
      AppendUtf8(cp, &out);
    } else {
      return Status::Corruption("S3 XML answer: unknown entity &" + std::string(entity) + ";");
    }
    i = semi + 1;
  }
  return out;
}

StatusOr<S3Error> ParseS3Error(std::string_view xml) {
  S3Error error;
  ASSIGN_OR_RETURN(std::string root, ScanXml(xml, [&](const std::vector<std::string_view>& path,
                                                       const std::string_view* text) -> Status {
    if (PathIs(path, {"Error", "Code"})) {
      ASSIGN_OR_RETURN(error.code, Decoded(text, "Code"));
    } else if (PathIs(path, {"Error", "Message"})) {
      ASSIGN_OR_RETURN(error.message, Decoded(text, "Message"));
    } else if (PathIs(path, {"Error", "Region"})) {
      ASSIGN_OR_RETURN(error.region, Decoded(text, "Region"));
    }
    return Status::OK();
  }));
  if (root != "Error" || error.code.empty()) return Status::Corruption("S3 XML answer: not an <Error> document");
  return error;
}

StatusOr<StsCredentials> ParseStsCredentials(std::string_view xml, std::string_view action) {
  StsCredentials keys;
  std::string error_code;
  const std::string response_name = std::string(action) + "Response";
  const std::string result_name = std::string(action) + "Result";
  const std::string_view kResponse = response_name;
  const std::string_view kResult = result_name;
  ASSIGN_OR_RETURN(std::string root, ScanXml(xml, [&](const std::vector<std::string_view>& path,
                                                       const std::string_view* text) -> Status {
    if (PathIs(path, {kResponse, kResult, "Credentials", "AccessKeyId"})) {
      ASSIGN_OR_RETURN(keys.access_key_id, Decoded(text, "AccessKeyId"));
    } else if (PathIs(path, {kResponse, kResult, "Credentials", "SecretAccessKey"})) {
      ASSIGN_OR_RETURN(keys.secret_access_key, Decoded(text, "SecretAccessKey"));
    } else if (PathIs(path, {kResponse, kResult, "Credentials", "SessionToken"})) {
      ASSIGN_OR_RETURN(keys.session_token, Decoded(text, "SessionToken"));
    } else if (PathIs(path, {kResponse, kResult, "Credentials", "Expiration"})) {
      ASSIGN_OR_RETURN(keys.expiration, Decoded(text, "Expiration"));
    } else if (PathIs(path, {"ErrorResponse", "Error", "Code"})) {
      ASSIGN_OR_RETURN(error_code, Decoded(text, "Code"));
    }
    return Status::OK();
  }));
  if (root == "ErrorResponse") return Status::IOError("STS error " + (error_code.empty() ? "(no code)" : error_code));
  if (root != kResponse || keys.access_key_id.empty() || keys.secret_access_key.empty() ||
      keys.session_token.empty() || keys.expiration.empty()) {
    return Status::Corruption("STS answer: no complete <Credentials>");
  }
  return keys;
}

StatusOr<S3ListPage> ParseS3ListPage(std::string_view xml) {
  S3ListPage page;
  S3Object object;
  bool has_key = false, has_size = false, has_truncated = false;
  auto on_end = [&](const std::vector<std::string_view>& path, const std::string_view* text) -> Status {
    if (path.size() < 2 || path[0] != "ListBucketResult") return Status::OK();
    if (PathIs(path, {"ListBucketResult", "Contents", "Key"})) {
      ASSIGN_OR_RETURN(object.key, Decoded(text, "Key"));
      has_key = true;
    } else if (PathIs(path, {"ListBucketResult", "Contents", "Size"})) {
      ASSIGN_OR_RETURN(std::string digits, Decoded(text, "Size"));
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), object.size);
      if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) {
        return Status::Corruption("S3 list answer: bad <Size> '" + digits + "'");
      }
      has_size = true;
    } else if (PathIs(path, {"ListBucketResult", "Contents", "ETag"})) {
      ASSIGN_OR_RETURN(object.etag, Decoded(text, "ETag"));
    } else if (PathIs(path, {"ListBucketResult", "Contents"})) {
      if (!has_key || !has_size) return Status::Corruption("S3 list answer: <Contents> without <Key> or <Size>");
      page.objects.push_back(std::move(object));
      object = S3Object();
      has_key = has_size = false;
    } else if (PathIs(path, {"ListBucketResult", "CommonPrefixes", "Prefix"})) {
      ASSIGN_OR_RETURN(std::string prefix, Decoded(text, "Prefix"));
      page.common_prefixes.push_back(std::move(prefix));
    } else if (PathIs(path, {"ListBucketResult", "IsTruncated"})) {
      ASSIGN_OR_RETURN(std::string flag, Decoded(text, "IsTruncated"));
      if (flag != "true" && flag != "false") return Status::Corruption("S3 list answer: bad <IsTruncated>");
      page.truncated = flag == "true";
      has_truncated = true;
    } else if (PathIs(path, {"ListBucketResult", "NextContinuationToken"})) {
      ASSIGN_OR_RETURN(page.next_continuation_token, Decoded(text, "NextContinuationToken"));
    }
    return Status::OK();
  };
  StatusOr<std::string> root = ScanXml(xml, on_end);
  if (root.ok() && *root == "Error") {
    StatusOr<S3Error> error = ParseS3Error(xml);
    if (error.ok()) return Status::IOError("S3 error " + error->code + ": " + error->message);
  }
  if (!root.ok()) return root.status();
  if (*root != "ListBucketResult") return Status::Corruption("S3 list answer: root is <" + *root + ">, not <ListBucketResult>");
  if (!has_truncated) return Status::Corruption("S3 list answer: no <IsTruncated>");
  if (page.truncated && page.next_continuation_token.empty()) {
    return Status::Corruption("S3 list answer: truncated without <NextContinuationToken>");
  }
  return page;
}

}  // namespace stfs
