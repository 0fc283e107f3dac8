// The tensor-name -> directory-name rule, case by case.
#include "fs/name_encoding.h"

#include <gtest/gtest.h>

#include <string>

namespace stfs {
namespace {

TEST(NameEncoding, ValidComponentIsUsedAsItIs) {
  EXPECT_EQ(EncodeTensorName("model.embed_tokens.weight"), "model.embed_tokens.weight");
  EXPECT_EQ(EncodeTensorName("\xe6\x9d\x83\xe9\x87\x8d"), "\xe6\x9d\x83\xe9\x87\x8d");
  EXPECT_EQ(EncodeTensorName("50%"), "50%");
  EXPECT_EQ(EncodeTensorName("..."), "...");
  EXPECT_EQ(EncodeTensorName(std::string(255, 'a')), std::string(255, 'a'));
}

TEST(NameEncoding, InvalidNamesEscapePercentSlashAndControlBytes) {
  EXPECT_EQ(EncodeTensorName("a/b"), "a%2Fb");
  EXPECT_EQ(EncodeTensorName("50%/x"), "50%25%2Fx");
  EXPECT_EQ(EncodeTensorName(std::string("a\0b", 3)), "a%00b");
  EXPECT_EQ(EncodeTensorName("/\x1f\x7f/\n"), "%2F%1F%7F%2F%0A");
}

TEST(NameEncoding, DotsAndEmptyName) {
  EXPECT_EQ(EncodeTensorName("."), "%2E");
  EXPECT_EQ(EncodeTensorName(".."), "%2E%2E");
  EXPECT_EQ(EncodeTensorName(""), "%");
}

TEST(NameEncoding, Fnv1aMatchesKnownVectors) {
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ULL);
}

std::string HashSuffix(const std::string& name) {
  char buf[18];
  std::snprintf(buf, sizeof buf, "~%016llx", static_cast<unsigned long long>(Fnv1a64(name)));
  return buf;
}

TEST(NameEncoding, LongNameKeeps200BytesThenTildeAndHash) {
  std::string name(300, 'x');
  std::string dir = EncodeTensorName(name);
  EXPECT_EQ(dir, std::string(200, 'x') + HashSuffix(name));
  EXPECT_EQ(dir.size(), 217u);
  EXPECT_EQ(EncodeTensorName(std::string(256, 'a')), std::string(200, 'a') + HashSuffix(std::string(256, 'a')));
}

TEST(NameEncoding, TruncationNeverCutsAnEscape) {
  // Byte 199 starts "%2F": keep 199 bytes.
  std::string name = std::string(199, 'x') + "/" + std::string(100, 'y');
  EXPECT_EQ(EncodeTensorName(name), std::string(199, 'x') + HashSuffix(name));
  // Byte 198 starts "%2F": keep 198.
  name = std::string(198, 'x') + "/" + std::string(100, 'y');
  EXPECT_EQ(EncodeTensorName(name), std::string(198, 'x') + HashSuffix(name));
  // "%2F" ends exactly at byte 200: keep it.
  name = std::string(197, 'x') + "/" + std::string(100, 'y');
  EXPECT_EQ(EncodeTensorName(name), std::string(197, 'x') + "%2F" + HashSuffix(name));
}

TEST(NameEncoding, TruncationNeverCutsAUtf8Sequence) {
  std::string cjk = "\xe6\x9d\x83";  // 3 bytes
  std::string name = "a";
  while (name.size() < 300) name += cjk;  // a + 100 sequences; byte 200 falls inside one
  std::string dir = EncodeTensorName(name);
  // 1 + 3k <= 200 -> k = 66 whole sequences (199 bytes).
  std::string expected = "a";
  for (int i = 0; i < 66; ++i) expected += cjk;
  EXPECT_EQ(dir, expected + HashSuffix(name));
}

TEST(NameEncoding, LongNameWithSlashIsEscapedThenTruncated) {
  std::string name = "a/" + std::string(298, 'b');
  std::string dir = EncodeTensorName(name);
  EXPECT_EQ(dir, "a%2F" + std::string(196, 'b') + HashSuffix(name));
  EXPECT_LE(dir.size(), 255u);
}

}  // namespace
}  // namespace stfs
