// Header validation: one test (or more) per rule of docs/format.md. Every
// refusal must be a Corruption whose message names the file, the tensor
// when there is one, and what is wrong.
#include "core/header.h"

#include <gtest/gtest.h>

#include <istream>
#include <iterator>

#include "core/header_bytes.h"

#include <random>
#include <string>

#include "tests/test_files.h"

namespace stfs {
namespace {

using testing::BuildSafetensors;
using testing::RawFile;
using testing::TempDir;
using testing::TestTensor;

class HeaderTest : public ::testing::Test {
 protected:
  // Writes `bytes` to a file and reads its header through a real source.
  StatusOr<Header> Parse(const std::string& bytes) {
    path_ = dir_.Write("model.safetensors", bytes);
    auto source = OpenLocalFile(path_);
    if (!source.ok()) return source.status();
    return ReadHeader(**source);
  }

  // Asserts refusal with a Corruption naming the file and every `needle`.
  void ExpectRefused(const std::string& bytes, std::initializer_list<std::string> needles) {
    StatusOr<Header> h = Parse(bytes);
    ASSERT_FALSE(h.ok()) << "accepted a file that breaks a rule";
    EXPECT_EQ(h.status().code(), StatusCode::kCorruption) << h.status().ToString();
    const std::string& msg = h.status().message();
    EXPECT_EQ(msg.rfind(path_ + ": ", 0), 0u) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "message must be one line: " << msg;
    for (const std::string& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "missing '" << n << "' in: " << msg;
  }

  static std::string Entry(const std::string& name, const std::string& dtype, const std::string& shape,
                           const std::string& offsets) {
    return testing::JsonString(name) + ":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
           ",\"data_offsets\":" + offsets + "}";
  }

  TempDir dir_;
  std::string path_;
};

TEST_F(HeaderTest, AcceptsValidFileAndKeepsOrderAndOffsets) {
  std::vector<TestTensor> t = {{"b", DType::F16, {2, 3}, ""}, {"a", DType::U8, {5}, ""}, {"s", DType::F64, {}, ""}};
  auto h = Parse(BuildSafetensors(t, R"({"format":"pt","x":"y"})"));
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_EQ(h->tensors.size(), 3u);
  EXPECT_EQ(h->tensors[0].name, "b");
  EXPECT_EQ(h->tensors[0].begin, 0u);
  EXPECT_EQ(h->tensors[0].end, 12u);
  EXPECT_EQ(h->tensors[1].begin, 12u);
  EXPECT_EQ(h->tensors[2].shape.size(), 0u);
  EXPECT_EQ(h->tensors[2].element_count, 1u);
  EXPECT_EQ(h->tensors[2].byte_size(), 8u);
  EXPECT_EQ(h->data_start() % 8, 0u);
  EXPECT_EQ(h->MetadataJson(), R"({"format":"pt","x":"y"})");
  EXPECT_EQ(h->Find("a")->dtype, DType::U8);
  EXPECT_EQ(h->Find("zz"), nullptr);
}

// Rule 1.
TEST_F(HeaderTest, RefusesFileShorterThan8Bytes) {
  ExpectRefused("", {"too short"});
  ExpectRefused(std::string(7, '\0'), {"7 bytes"});
}

// Rule 2.
TEST_F(HeaderTest, RefusesHeaderLengthOverLimitBeforeReadingIt) {
  std::string file(8, '\0');
  uint64_t n = 100'000'001;
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  ExpectRefused(file, {"100000001", "limit"});
  ExpectRefused(std::string(8, '\xff'), {"limit"});
}

// Rule 3.
TEST_F(HeaderTest, RefusesHeaderRunningPastEndOfFile) {
  std::string file = RawFile("{}");
  file.resize(9);
  ExpectRefused(file, {"past the end"});
}

// Rule 4.
TEST_F(HeaderTest, RefusesHeaderThatIsNotUtf8) {
  ExpectRefused(RawFile("{\"__metadata__\":{\"k\":\"\xff\"}}"), {"UTF-8"});
  ExpectRefused(RawFile("{\"__metadata__\":{\"k\":\"\xc0\xaf\"}}"), {"UTF-8"});  // overlong '/'
  ExpectRefused(RawFile("{\"__metadata__\":{\"k\":\"\xed\xa0\x80\"}}"), {"UTF-8"});  // surrogate
}

// Rule 5.
TEST_F(HeaderTest, RefusesHeaderThatIsNotExactlyOneObject) {
  ExpectRefused(RawFile(""), {"header length is 0"});
  ExpectRefused(RawFile("        "), {"JSON"});
  ExpectRefused(RawFile(std::string("{}\0\0\0\0\0\0", 8)), {"JSON"});
  ExpectRefused(RawFile("{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]},}"), {"JSON"});
  ExpectRefused(RawFile("{}{}"), {"JSON"});
  ExpectRefused(RawFile("[]"), {"expected a JSON object"});
  ExpectRefused(RawFile("\"str\""), {"expected a JSON object"});
  ExpectRefused(RawFile("{\"a\":1"), {"JSON"});
}

TEST_F(HeaderTest, AcceptsWhitespaceAroundTheObject) {
  auto h = Parse(RawFile(" \n\t{}\r\n     "));
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_TRUE(h->tensors.empty());
}

// Rule 6.
TEST_F(HeaderTest, RefusesEntryMissingAField) {
  ExpectRefused(RawFile(R"({"w":{"shape":[1],"data_offsets":[0,1]}})", "x"), {"\"w\"", "dtype"});
  ExpectRefused(RawFile(R"({"w":{"dtype":"U8","data_offsets":[0,1]}})", "x"), {"\"w\"", "shape"});
  ExpectRefused(RawFile(R"({"w":{"dtype":"U8","shape":[1]}})", "x"), {"\"w\"", "data_offsets"});
  ExpectRefused(RawFile(R"({"w":[1,2]})", "x"), {"\"w\"", "object"});
}

TEST_F(HeaderTest, IgnoresUnknownExtraFields) {
  auto h = Parse(RawFile(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":{"a":[1,2]}}})", "x"));
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->tensors.size(), 1u);
}

TEST_F(HeaderTest, RefusesFieldRepeatedInsideOneEntry) {
  ExpectRefused(RawFile(R"({"w":{"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}})", "x"),
                {"\"dtype\"", "twice", "\"w\""});
}

// Rule 7.
TEST_F(HeaderTest, RefusesUnknownOrWrongCaseDtype) {
  ExpectRefused(RawFile("{" + Entry("w", "f16", "[1]", "[0,2]") + "}", "xx"), {"\"w\"", "\"f16\""});
  ExpectRefused(RawFile("{" + Entry("w", "F128", "[1]", "[0,16]") + "}", std::string(16, 'x')), {"F128"});
  ExpectRefused(RawFile(R"({"w":{"dtype":16,"shape":[1],"data_offsets":[0,2]}})", "xx"), {"dtype", "string"});
}

TEST_F(HeaderTest, AcceptsEveryDtype) {
  for (DType d : AllDTypes()) {
    std::vector<TestTensor> t = {{"t", d, {2, 4}, ""}};
    auto h = Parse(BuildSafetensors(t));
    ASSERT_TRUE(h.ok()) << DTypeName(d) << ": " << h.status().ToString();
    EXPECT_EQ(h->tensors[0].dtype, d);
    EXPECT_EQ(h->tensors[0].byte_size(), 8u * DTypeBits(d) / 8);
  }
}

// Rule 8.
TEST_F(HeaderTest, RefusesShapeThatIsNotUnsignedIntegers) {
  ExpectRefused(RawFile("{" + Entry("w", "U8", "[-1]", "[0,0]") + "}"), {"\"w\"", "shape[0]", "negative"});
  ExpectRefused(RawFile("{" + Entry("w", "U8", "[1.0]", "[0,1]") + "}", "x"), {"shape[0]", "non-integer"});
  ExpectRefused(RawFile("{" + Entry("w", "U8", "[4e0]", "[0,4]") + "}", "xxxx"), {"shape[0]"});
  ExpectRefused(RawFile("{" + Entry("w", "U8", "[\"2\"]", "[0,2]") + "}", "xx"), {"shape[0]"});
  ExpectRefused(RawFile("{" + Entry("w", "U8", "[18446744073709551616]", "[0,1]") + "}", "x"), {"shape[0]"});
  ExpectRefused(RawFile("{" + Entry("w", "U8", "3", "[0,3]") + "}", "xxx"), {"shape", "array"});
}

TEST_F(HeaderTest, AcceptsLargestIntegerAndZeroSizedDims) {
  auto h = Parse(RawFile("{" + Entry("z", "F32", "[18446744073709551615,0]", "[0,0]") + "," +
                         Entry("e", "F32", "[0]", "[0,0]") + "," + Entry("s", "F32", "[]", "[0,4]") + "}", "abcd"));
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->tensors[0].shape[0], 18446744073709551615ull);
  EXPECT_EQ(h->tensors[0].element_count, 0u);
  EXPECT_EQ(h->tensors[2].element_count, 1u);
}

TEST_F(HeaderTest, RefusesDataOffsetsThatAreNotTwoUnsignedIntegers) {
  ExpectRefused(RawFile("{" + Entry("w", "U8", "[1]", "[1]") + "}", "x"), {"data_offsets", "two"});
  ExpectRefused(RawFile("{" + Entry("w", "U8", "[1]", "[0,1,2]") + "}", "x"), {"data_offsets", "3 elements"});
  ExpectRefused(RawFile("{" + Entry("w", "U8", "[1]", "[0,-1]") + "}", "x"), {"data_offsets[1]"});
  ExpectRefused(RawFile("{" + Entry("w", "U8", "[1]", "[0.0,1]") + "}", "x"), {"data_offsets[0]"});
  ExpectRefused(RawFile("{" + Entry("w", "U8", "[1]", "{}") + "}", "x"), {"data_offsets"});
}

// Rule 9.
TEST_F(HeaderTest, AcceptsAbsentOrNullMetadata) {
  auto h = Parse(RawFile(R"({"__metadata__":null})"));
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_FALSE(h->has_metadata);
  EXPECT_EQ(h->MetadataJson(), "{}");
}

TEST_F(HeaderTest, RefusesMetadataThatIsNotAnObjectOfStrings) {
  ExpectRefused(RawFile(R"({"__metadata__":{"a":1}})"), {"__metadata__", "\"a\"", "string"});
  ExpectRefused(RawFile(R"({"__metadata__":{"a":{"b":"c"}}})"), {"__metadata__"});
  ExpectRefused(RawFile(R"({"__metadata__":["a"]})"), {"__metadata__", "array"});
  ExpectRefused(RawFile(R"({"__metadata__":"a"})"), {"__metadata__"});
  ExpectRefused(RawFile(R"({"__metadata__":{},"__metadata__":{}})"), {"__metadata__", "twice"});
}

// Rule 10.
TEST_F(HeaderTest, AcceptsAnyJsonStringAsTensorName) {
  std::string nul_name("a\0b", 3);
  std::vector<TestTensor> t = {{"", DType::U8, {1}, ""}, {"a/b", DType::U8, {1}, ""}, {nul_name, DType::U8, {1}, ""},
                               {"\xe6\x9d\x83\xe9\x87\x8d", DType::U8, {1}, ""}, {"\n", DType::U8, {1}, ""}};
  auto h = Parse(BuildSafetensors(t));
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_EQ(h->tensors.size(), 5u);
  EXPECT_EQ(h->tensors[0].name, "");
  EXPECT_EQ(h->tensors[1].name, "a/b");
  EXPECT_EQ(h->tensors[2].name, nul_name);
  EXPECT_EQ(h->tensors[4].name, "\n");
}

// Rule 11.
TEST_F(HeaderTest, RefusesElementCountOverflow) {
  ExpectRefused(RawFile("{" + Entry("w", "U8", "[4294967296,4294967296]", "[0,0]") + "}"), {"\"w\"", "64 bits"});
  ExpectRefused(RawFile("{" + Entry("w", "F64", "[2305843009213693952]", "[0,0]") + "}"), {"\"w\"", "overflow"});
  // Folded left to right like the reference: the overflow happens before the zero.
  ExpectRefused(RawFile("{" + Entry("w", "U8", "[4294967296,4294967296,0]", "[0,0]") + "}"), {"64 bits"});
}

TEST_F(HeaderTest, RefusesBitCountThatIsNotWholeBytes) {
  ExpectRefused(RawFile("{" + Entry("w", "F4", "[3]", "[0,1]") + "}", "x"), {"\"w\"", "12 bits"});
  ExpectRefused(RawFile("{" + Entry("w", "F6_E2M3", "[3]", "[0,2]") + "}", "xx"), {"18 bits"});
  auto h = Parse(RawFile("{" + Entry("w", "F6_E3M2", "[4]", "[0,3]") + "," + Entry("f", "F4", "[2,1]", "[3,4]") + "}", "xxxx"));
  ASSERT_TRUE(h.ok()) << h.status().ToString();
}

TEST_F(HeaderTest, RefusesOffsetsThatDisagreeWithShape) {
  ExpectRefused(RawFile("{" + Entry("w", "F16", "[2]", "[0,3]") + "}", "xxx"), {"\"w\"", "span 3 bytes", "needs 4"});
}

// Rule 12.
TEST_F(HeaderTest, RefusesGapBetweenTensors) {
  ExpectRefused(RawFile("{" + Entry("a", "U8", "[2]", "[0,2]") + "," + Entry("b", "U8", "[2]", "[3,5]") + "}", "xxxxx"),
                {"\"b\"", "gap"});
}

TEST_F(HeaderTest, RefusesOverlappingTensors) {
  ExpectRefused(RawFile("{" + Entry("a", "U8", "[2]", "[0,2]") + "," + Entry("b", "U8", "[2]", "[1,3]") + "}", "xxx"),
                {"\"b\"", "overlap"});
  ExpectRefused(RawFile("{" + Entry("a", "U8", "[2]", "[0,2]") + "," + Entry("b", "U8", "[2]", "[0,2]") + "}", "xx"),
                {"overlap"});
}

TEST_F(HeaderTest, RefusesFirstTensorNotAtZero) {
  ExpectRefused(RawFile("{" + Entry("a", "U8", "[2]", "[1,3]") + "}", "xxx"), {"\"a\"", "starts at data offset 1"});
}

TEST_F(HeaderTest, RefusesEndBeforeBegin) {
  ExpectRefused(RawFile("{" + Entry("a", "U8", "[0]", "[2,1]") + "}", "xx"), {"\"a\"", "end before"});
}

TEST_F(HeaderTest, AcceptsZeroSizeTensorsSharingAnOffset) {
  auto h = Parse(RawFile("{" + Entry("a", "U8", "[2]", "[0,2]") + "," + Entry("z1", "U8", "[0]", "[2,2]") + "," +
                         Entry("z2", "F32", "[3,0]", "[2,2]") + "," + Entry("z0", "U8", "[0]", "[0,0]") + "," +
                         Entry("b", "U8", "[1]", "[2,3]") + "}", "xyz"));
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->tensors.size(), 5u);
}

TEST_F(HeaderTest, RefusesZeroSizeTensorInsideAnother) {
  ExpectRefused(RawFile("{" + Entry("a", "U8", "[4]", "[0,4]") + "," + Entry("z", "U8", "[0]", "[2,2]") + "}", "xxxx"),
                {"\"z\""});
}

// Rule 13.
TEST_F(HeaderTest, RefusesTruncatedFile) {
  std::vector<TestTensor> t = {{"w", DType::F32, {100}, ""}};
  std::string file = BuildSafetensors(t);
  file.pop_back();
  ExpectRefused(file, {"truncated", "399"});
}

TEST_F(HeaderTest, RefusesTrailingBytes) {
  std::vector<TestTensor> t = {{"w", DType::F32, {100}, ""}};
  ExpectRefused(BuildSafetensors(t) + "x", {"trailing bytes"});
  ExpectRefused(RawFile("{}", "z"), {"trailing bytes"});
}

// Rule 14.
TEST_F(HeaderTest, RefusesDuplicateTensorName) {
  ExpectRefused(RawFile("{" + Entry("w", "U8", "[1]", "[0,1]") + "," + Entry("w", "U8", "[1]", "[1,2]") + "}", "xy"),
                {"\"w\"", "twice"});
}

TEST_F(HeaderTest, MessagesKeepControlBytesOfNamesOnOneLine) {
  ExpectRefused(RawFile("{" + Entry("bad\nname", "Q8", "[1]", "[0,1]") + "}", "x"), {"bad\\nname"});
}

// Nesting: the format needs three levels; unknown fields may nest up to the
// reference's limit of 128, and anything deeper stops the parse at once.
TEST_F(HeaderTest, AcceptsUnknownFieldNestedUpTo128Levels) {
  const std::string entry = R"("w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":)";
  auto h = Parse(RawFile("{" + entry + std::string(126, '[') + std::string(126, ']') + "}}", "x"));
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ExpectRefused(RawFile("{" + entry + std::string(127, '[') + std::string(127, ']') + "}}", "x"),
                {"deeper than 128"});
}

TEST_F(HeaderTest, RefusesTenMegabytesOfNestedBracketsWithoutCrashing) {
  const size_t depth = 5'000'000;  // 10 MB of brackets, the shape of a stack-overflow attack
  std::string nested = std::string(depth, '[') + std::string(depth, ']');
  ExpectRefused(RawFile(R"({"__metadata__":{"k":)" + nested + "}}"), {"__metadata__", "\"k\"", "array"});
  ExpectRefused(RawFile(R"({"w":{"x":)" + nested + "}}"), {"deeper than 128"});
  ExpectRefused(RawFile(nested), {"expected a JSON object"});
  std::string objects;
  for (int i = 0; i < 1'000'000; ++i) objects += "{\"a\":";
  ExpectRefused(RawFile(R"({"w":)" + objects), {"deeper than 128"});
}

TEST_F(HeaderTest, RefusesKeyRepeatedInsideAnUnknownField) {
  ExpectRefused(RawFile(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":{"a":1,"a":2}}})", "x"),
                {"\"a\"", "twice", "\"extra\""});
  ExpectRefused(RawFile(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"e":[{"b":{},"b":[]}]}})", "x"),
                {"\"b\"", "twice", "\"e\""});
  ExpectRefused(RawFile(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"e":0,"e":1}})", "x"),
                {"\"e\"", "twice", "\"w\""});
  ExpectRefused(RawFile(R"({"__metadata__":{"a":"1","b":"2","a":"3"}})"), {"\"a\"", "twice", "__metadata__"});
}

TEST_F(HeaderTest, ReportsSyntaxErrorEvenAfterABrokenRule) {
  // A header that is not JSON says so, wherever the first broken rule is.
  ExpectRefused(RawFile(R"({"w":{"dtype":"Q8"}, nonsense)"), {"JSON"});
  ExpectRefused(RawFile(R"({"__metadata__":{"k":1},)"), {"JSON"});
}

TEST_F(HeaderTest, KeepsManyTensorsAndMetadataKeysInOrder) {
  std::string json = "{\"__metadata__\":{";
  for (int i = 0; i < 20000; ++i) json += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":\"v\"";
  json += "}";
  for (int i = 0; i < 20000; ++i) {
    json += "," + Entry("t" + std::to_string(i), "U8", "[1]", "[" + std::to_string(i) + "," + std::to_string(i + 1) + "]");
  }
  json += "}";
  auto h = Parse(RawFile(json, std::string(20000, 'x')));
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_EQ(h->tensors.size(), 20000u);
  ASSERT_EQ(h->metadata.size(), 20000u);
  EXPECT_EQ(h->tensors[12345].name, "t12345");
  EXPECT_EQ(h->tensors[12345].begin, 12345u);
  EXPECT_EQ(h->metadata[777].first, "k777");
  ExpectRefused(RawFile(json.substr(0, json.size() - 1) + "," + Entry("t19999", "U8", "[0]", "[0,0]") + "}",
                        std::string(20000, 'x')),
                {"\"t19999\"", "twice"});
}

// The header streams through a chunk buffer: every chunk size gives the same
// bytes, and a bad byte is found wherever a chunk boundary falls.
StatusOr<std::string> Stream(const std::string& header, size_t chunk) {
  HeaderByteStream bytes(
      header.size(),
      [&header](uint64_t offset, size_t length, char* dst) {
        header.copy(dst, length, offset);
        return Status::OK();
      },
      "m.safetensors", chunk);
  std::istream in(&bytes);
  std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.problem()) return *bytes.problem();
  return out;
}

TEST(HeaderByteStream, EveryChunkSizeGivesTheSameBytes) {
  const std::string text = "{\"\xe6\x9d\x83\xf0\x9f\x98\x80\xc3\xa9x\":1} ";
  for (size_t chunk = 1; chunk <= text.size() + 1; ++chunk) {
    StatusOr<std::string> out = Stream(text, chunk);
    ASSERT_TRUE(out.ok()) << chunk << ": " << out.status().ToString();
    EXPECT_EQ(*out, text) << chunk;
  }
}

TEST(HeaderByteStream, FindsBadBytesAcrossChunkBoundaries) {
  const std::string cut = "{\"ab\xe6\x9d\"}";    // a 3-byte sequence missing its last byte
  const std::string last = "{\"ab\"}\xe6\x9d";    // split sequence at the very end
  const std::string nul = std::string("{\"ab\"}  \0", 9);
  for (size_t chunk = 1; chunk <= 9; ++chunk) {
    StatusOr<std::string> a = Stream(cut, chunk);
    ASSERT_FALSE(a.ok()) << chunk;
    EXPECT_NE(a.status().message().find("UTF-8 (bad byte at header offset 4)"), std::string::npos)
        << a.status().message();
    StatusOr<std::string> b = Stream(last, chunk);
    ASSERT_FALSE(b.ok()) << chunk;
    EXPECT_NE(b.status().message().find("offset 6"), std::string::npos) << b.status().message();
    StatusOr<std::string> c = Stream(nul, chunk);
    ASSERT_FALSE(c.ok()) << chunk;
    EXPECT_NE(c.status().message().find("NUL byte at header offset 8"), std::string::npos) << c.status().message();
  }
}

TEST(HeaderByteStream, PassesOnReadErrors) {
  HeaderByteStream bytes(
      10, [](uint64_t, size_t, char*) { return Status::IOError("m.safetensors: read failed"); }, "m.safetensors");
  std::istream in(&bytes);
  EXPECT_EQ(in.get(), std::char_traits<char>::eof());
  ASSERT_TRUE(bytes.problem().has_value());
  EXPECT_EQ(bytes.problem()->code(), StatusCode::kIOError);
}

TEST(TensorByteSize, ComputesBytesThroughBits) {
  EXPECT_EQ(*TensorByteSize(DType::F4, {2, 3}), 3u);
  EXPECT_EQ(*TensorByteSize(DType::F6_E2M3, {4}), 3u);
  EXPECT_EQ(*TensorByteSize(DType::BF16, {32000, 4096}), 262144000u);
  EXPECT_EQ(*TensorByteSize(DType::C64, {}), 8u);
  EXPECT_EQ(*TensorByteSize(DType::F4, {7, 0}), 0u);
  EXPECT_FALSE(TensorByteSize(DType::F4, {3}).ok());
}

TEST(ShapeToString, HasNoSpaces) {
  EXPECT_EQ(ShapeToString({}), "[]");
  EXPECT_EQ(ShapeToString({32000, 4096}), "[32000,4096]");
}

}  // namespace
}  // namespace stfs

namespace stfs {
namespace {

// Mutated headers (bytes flipped, inserted, deleted, truncated) must give
// either a valid Header or a Corruption — never a crash, never a throw.
TEST(HeaderFuzz, RandomMutationsAreRefusedCleanlyOrAccepted) {
  std::vector<testing::TestTensor> t = {{"a", DType::F16, {3, 4}, ""}, {"b/c", DType::F4, {2, 2}, ""},
                                        {"", DType::U8, {0}, ""}, {"s", DType::I64, {}, ""}};
  std::string file = testing::BuildSafetensors(t, R"({"format":"pt"})");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(file[i]);
  const std::string json = file.substr(8, n);
  const uint64_t data_bytes = file.size() - 8 - n;
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  static const char kAlphabet[] = "{}[]\":,0123456789-.eE \\u" "\xff" "\x00" "abdFUI";
  const std::string alphabet(kAlphabet, sizeof kAlphabet - 1);
  int accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string m = json;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !m.empty(); ++e) {
      size_t pos = rng() % m.size();
      char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 4) {
        case 0: m[pos] = c; break;
        case 1: m.insert(m.begin() + static_cast<std::ptrdiff_t>(pos), c); break;
        case 2: m.erase(pos, 1 + rng() % 3); break;
        default: m.resize(pos); break;
      }
    }
    StatusOr<Header> h = ParseHeaderJson(m, 8 + m.size() + data_bytes, "fuzz.safetensors");
    if (h.ok()) {
      ++accepted;
      // Whatever was accepted must tile the data exactly.
      uint64_t total = 0;
      for (const TensorInfo& info : h->tensors) total += info.byte_size();
      EXPECT_EQ(total, data_bytes);
    } else {
      EXPECT_EQ(h.status().code(), StatusCode::kCorruption) << h.status().ToString();
      EXPECT_EQ(h.status().message().rfind("fuzz.safetensors: ", 0), 0u) << h.status().message();
    }
  }
  // Some mutations (inside padding or metadata strings) keep the file valid.
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace stfs
