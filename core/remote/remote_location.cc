// hf:// mapping, origins and redaction (see remote_location.h).
#include "core/remote/remote_location.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace stfs {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && Lower(s.substr(0, prefix.size())) == prefix;
}

}  // namespace

std::string PercentEncode(std::string_view text, bool keep_slash) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    bool plain =
        std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/');
    if (plain) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

StatusOr<HubLocation> ParseHubLocation(std::string_view location) {
  const std::string_view kScheme = "hf://";
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(std::string(location) + ": " + why +
                                   " (expected hf://ORG/REPO/FILE[@REV])");
  };
  if (!StartsWithNoCase(location, kScheme)) return bad("not an hf:// location");
  std::string_view rest = location.substr(kScheme.size());
  HubLocation hub;
  for (std::string_view type : {"datasets/", "spaces/"}) {
    if (rest.substr(0, type.size()) == type) {
      hub.repo_type = std::string(type.substr(0, type.size() - 1));
      rest.remove_prefix(type.size());
      break;
    }
  }
  size_t org_end = rest.find('/');
  if (org_end == std::string_view::npos || org_end == 0) return bad("missing ORG/REPO");
  size_t repo_end = rest.find('/', org_end + 1);
  if (repo_end == std::string_view::npos || repo_end == org_end + 1) {
    return bad("missing REPO or FILE");
  }
  hub.repo = std::string(rest.substr(0, repo_end));
  std::string_view file = rest.substr(repo_end + 1);
  size_t at = file.rfind('@');
  if (at != std::string_view::npos) {
    hub.revision = std::string(file.substr(at + 1));
    file = file.substr(0, at);
    if (hub.revision.empty()) return bad("empty revision after '@'");
  } else {
    hub.revision = "main";
  }
  if (file.empty() || file.back() == '/') return bad("missing FILE");
  for (char c : location) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return bad("control character");
  }
  hub.file = std::string(file);
  return hub;
}

std::string HubResolveUrl(const HubLocation& hub, std::string_view endpoint) {
  std::string url(endpoint);
  while (!url.empty() && url.back() == '/') url.pop_back();
  url += '/';
  if (!hub.repo_type.empty()) url += hub.repo_type + '/';
  url += PercentEncode(hub.repo, /*keep_slash=*/true);
  url += "/resolve/";
  url += PercentEncode(hub.revision, /*keep_slash=*/false);
  url += '/';
  url += PercentEncode(hub.file, /*keep_slash=*/true);
  return url;
}

std::string RedactUrl(std::string_view url) {
  std::string_view rest = url;
  std::string out;
  size_t scheme_end = rest.find("://");
  if (scheme_end != std::string_view::npos) {
    out = std::string(rest.substr(0, scheme_end + 3));
    rest.remove_prefix(scheme_end + 3);
    size_t authority_end = rest.find_first_of("/?#");
    std::string_view authority = rest.substr(0, authority_end);
    size_t at = authority.rfind('@');
    if (at != std::string_view::npos) rest.remove_prefix(at + 1);
  }
  size_t cut = rest.find_first_of("?#");
  out += std::string(rest.substr(0, cut));
  return out;
}

std::string UrlOrigin(std::string_view url) {
  std::string scheme;
  if (StartsWithNoCase(url, "http://")) {
    scheme = "http";
  } else if (StartsWithNoCase(url, "https://")) {
    scheme = "https";
  } else {
    return "";
  }
  std::string_view rest = url.substr(scheme.size() + 3);
  std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
  size_t at = authority.rfind('@');
  if (at != std::string_view::npos) authority.remove_prefix(at + 1);
  std::string host(authority);
  std::string port;
  size_t colon = host.rfind(':');
  size_t bracket = host.rfind(']');
  if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) {
    port = host.substr(colon + 1);
    host.resize(colon);
  }
  if (port.empty()) port = scheme == "https" ? "443" : "80";
  if (host.empty()) return "";
  return scheme + "://" + Lower(host) + ":" + port;
}

}  // namespace stfs
