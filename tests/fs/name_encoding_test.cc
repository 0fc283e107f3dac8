// The tensor-name -> directory-name rule, case by case.
#include "fs/name_encoding.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace stfs {
namespace {

TEST(NameEncoding, PlainNamesStayAsTheyAre) {
  EXPECT_EQ(EncodeTensorName("model.embed_tokens.weight"), "model.embed_tokens.weight");
  EXPECT_EQ(EncodeTensorName("\xe6\x9d\x83\xe9\x87\x8d"), "\xe6\x9d\x83\xe9\x87\x8d");
  EXPECT_EQ(EncodeTensorName("..."), "...");
  EXPECT_EQ(EncodeTensorName(" sp ace ~ \"q\" \\"), " sp ace ~ \"q\" \\");
  EXPECT_EQ(EncodeTensorName(std::string(255, 'a')), std::string(255, 'a'));
}

TEST(NameEncoding, PercentSlashAndControlBytesAreAlwaysEscaped) {
  EXPECT_EQ(EncodeTensorName("a/b"), "a%2Fb");
  EXPECT_EQ(EncodeTensorName("50%/x"), "50%25%2Fx");
  EXPECT_EQ(EncodeTensorName(std::string("a\0b", 3)), "a%00b");
  EXPECT_EQ(EncodeTensorName("/\x1f\x7f/\n"), "%2F%1F%7F%2F%0A");
  // Also inside names that would be valid path components as they are.
  EXPECT_EQ(EncodeTensorName("50%"), "50%25");
  EXPECT_EQ(EncodeTensorName("a%2Fb"), "a%252Fb");
  EXPECT_EQ(EncodeTensorName("line\nbreak"), "line%0Abreak");
  EXPECT_EQ(EncodeTensorName("tab\there"), "tab%09here");
  EXPECT_EQ(EncodeTensorName("del\x7f"), "del%7F");
  EXPECT_EQ(EncodeTensorName("\x01"), "%01");
  // 0x80 and above are left alone (UTF-8 and other high bytes).
  EXPECT_EQ(EncodeTensorName("\x80\xff"), "\x80\xff");
}

TEST(NameEncoding, EscapedNamesHoldNoControlBytes) {
  std::string every_byte;
  for (int c = 1; c < 256; ++c) every_byte += static_cast<char>(c);
  for (unsigned char c : EncodeTensorName(every_byte)) {
    EXPECT_FALSE(c < 0x20 || c == 0x7F || c == '/') << static_cast<int>(c);
  }
}

TEST(NameEncoding, NamesThatUsedToCollideGetDistinctDirectories) {
  EXPECT_NE(EncodeTensorName("a/b"), EncodeTensorName("a%2Fb"));
  EXPECT_NE(EncodeTensorName(""), EncodeTensorName("%"));
  EXPECT_NE(EncodeTensorName("."), EncodeTensorName("%2E"));
  EXPECT_NE(EncodeTensorName(std::string("x\0", 2)), EncodeTensorName("x%00"));
}

TEST(NameEncoding, DecodeInvertsEscape) {
  std::string every_byte;
  for (int c = 0; c < 256; ++c) every_byte += static_cast<char>(c);
  for (const std::string& name : {std::string(), std::string("."), std::string(".."), std::string("..."),
                                  std::string("a/b"), std::string("a%2Fb"), std::string("%"), std::string("%2E"),
                                  std::string("50%"), std::string("x\0", 2), every_byte, std::string(400, '/')}) {
    std::optional<std::string> back = DecodeDirectoryName(EscapeTensorName(name));
    ASSERT_TRUE(back.has_value()) << EscapeTensorName(name);
    EXPECT_EQ(*back, name);
  }
  EXPECT_EQ(EscapeTensorName(std::string(400, '/')).size(), 1200u);  // Escape never truncates
}

TEST(NameEncoding, DecodeRefusesWhatEscapeNeverWrites) {
  for (const char* bad : {"", ".", "..", "a%", "a%2", "a%2f", "%zz", "%41", "a\nb", "a/b", "%2E.", "a%2Eb", "\x7f"}) {
    EXPECT_FALSE(DecodeDirectoryName(bad).has_value()) << bad;
  }
  EXPECT_EQ(DecodeDirectoryName("%25%2F%00%1F%7F"), std::string("%/\0\x1f\x7f", 5));
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
