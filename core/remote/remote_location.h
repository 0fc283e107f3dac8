// Remote locations: hf:// shorthand to hub URLs, URL origins, and the
// credential-free form of a URL used in every message.
//
// Pure string functions, no network. Anything that names a location to the
// user goes through RedactUrl: user:password@ and query strings (signed URL
// parameters) must never reach a message or a log line.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace stfs {

// hf://[datasets/|spaces/]ORG/REPO/FILE[@REV], split into its parts.
struct HubLocation {
  std::string repo_type;  // "", "datasets" or "spaces"
  std::string repo;       // "ORG/REPO"
  std::string file;       // path inside the repo (may contain '/')
  std::string revision;   // "main" when omitted
};

// Parses an hf:// location. The revision is what follows the last '@' of the
// file part, so a file name holding '@' needs an explicit "@REV" suffix.
StatusOr<HubLocation> ParseHubLocation(std::string_view location);

// Returns {endpoint}/[TYPE/]ORG/REPO/resolve/REV/FILE with the revision
// percent-encoded as one segment (refs/pr/1 -> refs%2Fpr%2F1) and each file
// path segment percent-encoded.
std::string HubResolveUrl(const HubLocation& hub, std::string_view endpoint);

// Percent-encodes every byte outside RFC 3986 unreserved characters
// (A-Z a-z 0-9 - . _ ~), and '/' too unless `keep_slash`; hex in upper case.
std::string PercentEncode(std::string_view text, bool keep_slash);

// Returns `url` without user:password@, query string and fragment.
std::string RedactUrl(std::string_view url);

// Returns "scheme://host:port" (lower-case scheme and host, default port
// filled in), or "" when `url` is not an absolute http(s) URL.
std::string UrlOrigin(std::string_view url);

}  // namespace stfs
