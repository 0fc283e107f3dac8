// The two S3 XML documents stfs reads: a ListObjectsV2 result and an error.
//
// No XML library is among stfs's dependencies, and these documents are flat
// and small, so a strict scanner reads them in one linear pass: elements,
// attributes (skipped), comments and the XML declaration; a DOCTYPE or CDATA
// section is refused rather than half-understood, and so is nesting deeper
// than 16. Text is entity-decoded (&amp; &lt; &gt; &quot; &apos; &#N; &#xH;).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace stfs {

struct S3Object {
  std::string key;
  uint64_t size = 0;
  std::string etag;  // as listed, quotes included
};

struct S3ListPage {
  std::vector<S3Object> objects;              // Contents
  std::vector<std::string> common_prefixes;   // CommonPrefixes/Prefix
  bool truncated = false;                     // IsTruncated
  std::string next_continuation_token;        // NextContinuationToken
};

// Parses a ListObjectsV2 response body (root ListBucketResult). Corruption
// for anything malformed; an <Error> document gives its S3 error.
StatusOr<S3ListPage> ParseS3ListPage(std::string_view xml);

struct S3Error {
  std::string code;     // e.g. "AccessDenied", "NoSuchKey"
  std::string message;
  std::string region;   // the bucket's, in AuthorizationHeaderMalformed / PermanentRedirect
};

// Parses an S3 <Error> document; Corruption when `xml` is not one.
StatusOr<S3Error> ParseS3Error(std::string_view xml);

// Keys in an STS AssumeRoleWithWebIdentity or AssumeRole answer.
struct StsCredentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
  std::string expiration;  // ISO 8601
};

// Parses the <Credentials> of an <ACTION>Response (ACTION: the STS action
// asked, AssumeRoleWithWebIdentity or AssumeRole). Corruption when one of
// the four is missing; for an <ErrorResponse>, an IOError naming its error
// code (never another value from the document).
StatusOr<StsCredentials> ParseStsCredentials(std::string_view xml,
                                             std::string_view action = "AssumeRoleWithWebIdentity");

// Decodes the five predefined XML entities and numeric character references.
StatusOr<std::string> DecodeXmlText(std::string_view text);

}  // namespace stfs
