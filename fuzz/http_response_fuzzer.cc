// Fuzz target: the pure checks of a range response's headers
// (core/remote/http_client.h): ParseContentRange, EqualsNoCase and
// CheckRangeBody. An accepted Content-Range is self-consistent (first <=
// last < total), keeps the text it came from, and reads back the same when
// written canonically; CheckRangeBody accepts a 206 only with a usable
// Content-Range and no encoding other than identity, and its refusals are
// one line naming the location.
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/remote/http_client.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view value(reinterpret_cast<const char*>(data), size);
  std::optional<stfs::ContentRange> range = stfs::ParseContentRange(value);
  if (range) {
    FUZZ_CHECK(range->text == value);
    std::string canonical = "bytes ";
    if (range->unsatisfied) {
      FUZZ_CHECK(range->total.has_value());
      canonical += "*/" + std::to_string(*range->total);
    } else {
      FUZZ_CHECK(range->first <= range->last);
      if (range->total) FUZZ_CHECK(range->last < *range->total);
      canonical += std::to_string(range->first) + "-" + std::to_string(range->last) + "/" +
                   (range->total ? std::to_string(*range->total) : std::string("*"));
    }
    std::optional<stfs::ContentRange> again = stfs::ParseContentRange(canonical);
    FUZZ_CHECK(again && again->unsatisfied == range->unsatisfied && again->first == range->first &&
               again->last == range->last && again->total == range->total);
  }
  // CheckRangeBody on a response built from the input: first byte picks the
  // status and whether the second half is a Content-Encoding.
  {
    stfs::HttpResponse r;
    r.status = size > 0 && (data[0] & 1) ? 206 : 200;
    r.content_range = range;
    r.content_range_text = std::string(value);
    if (size > 0 && (data[0] & 2)) r.content_encoding = std::string(value.substr(size / 2));
    stfs::Status s = stfs::CheckRangeBody(r, "http://fuzz/x", "bytes 0-0");
    bool identity = r.content_encoding.empty() || stfs::EqualsNoCase(r.content_encoding, "identity");
    bool usable = r.status != 206 || (range && !range->unsatisfied && range->total.has_value());
    FUZZ_CHECK(s.ok() == (identity && usable));
    if (!s.ok()) FUZZ_CHECK(s.message().rfind("http://fuzz/x: ", 0) == 0);
  }
  // EqualsNoCase: the two halves compared must agree with a lowercase compare.
  std::string_view a = value.substr(0, size / 2), b = value.substr(size / 2);
  auto lower = [](std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  FUZZ_CHECK(stfs::EqualsNoCase(a, b) == (lower(a) == lower(b)));
  FUZZ_CHECK(stfs::EqualsNoCase(a, b) == stfs::EqualsNoCase(b, a));
  return 0;
}
