// Real mounts, refusals: every write fails with EROFS, and every malformed
// file, bad source, bad mount point, name collision and bad option is refused
// with exactly one "stfs: " line on stderr that names the file and the
// problem, a non-zero exit, and nothing mounted afterwards.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>

#include "tests/fs/mount_harness.h"

namespace stfs::testing {
namespace {

using Mount = MountTest;

TEST_F(Mount, EveryWriteFailsWithErofs) {
  std::vector<TestTensor> tensors = {{"w", DType::F32, {16}, ""}, {"v", DType::U8, {3}, ""}};
  std::string mnt = MountFile(WriteSource(BuildSafetensors(tensors)));
  ASSERT_FALSE(mnt.empty());
  const std::string data = mnt + "/w/data";
  const std::string dtype = mnt + "/w/dtype";
  auto expect_erofs = [](const char* what, int rc) {
    int err = errno;
    EXPECT_EQ(rc, -1) << what << " succeeded";
    EXPECT_EQ(err, EROFS) << what << ": " << std::strerror(err);
  };
  auto open_rc = [](const std::string& path, int flags) {
    int fd = ::open(path.c_str(), flags, 0644);
    if (fd >= 0) ::close(fd);
    return fd < 0 ? -1 : 0;
  };
  expect_erofs("open O_WRONLY", open_rc(data, O_WRONLY));
  expect_erofs("open O_RDWR", open_rc(data, O_RDWR));
  expect_erofs("open O_WRONLY|O_TRUNC", open_rc(dtype, O_WRONLY | O_TRUNC));
  expect_erofs("open O_RDWR|O_APPEND", open_rc(mnt + "/__metadata__", O_RDWR | O_APPEND));
  expect_erofs("creat in root", ::creat((mnt + "/new").c_str(), 0644));
  expect_erofs("open O_CREAT in a tensor dir", open_rc(mnt + "/w/new", O_CREAT | O_WRONLY));
  expect_erofs("mkdir", ::mkdir((mnt + "/newdir").c_str(), 0755));
  expect_erofs("mkdir in a tensor dir", ::mkdir((mnt + "/w/sub").c_str(), 0755));
  expect_erofs("unlink", ::unlink(data.c_str()));
  expect_erofs("rmdir", ::rmdir((mnt + "/v").c_str()));
  expect_erofs("rename dir", ::rename((mnt + "/w").c_str(), (mnt + "/w2").c_str()));
  expect_erofs("rename file", ::rename(data.c_str(), (mnt + "/w/data2").c_str()));
  expect_erofs("chmod", ::chmod(data.c_str(), 0666));
  expect_erofs("chown", ::chown(data.c_str(), 1, 1));
  expect_erofs("truncate", ::truncate(data.c_str(), 0));
  expect_erofs("utimensat", ::utimensat(AT_FDCWD, data.c_str(), nullptr, 0));
  expect_erofs("setxattr", ::setxattr(data.c_str(), "user.test", "x", 1, 0));
  expect_erofs("removexattr", ::removexattr(data.c_str(), "user.test"));
  expect_erofs("symlink", ::symlink("w", (mnt + "/link").c_str()));
  expect_erofs("link", ::link(data.c_str(), (mnt + "/hard").c_str()));
  expect_erofs("mknod", ::mknod((mnt + "/fifo").c_str(), S_IFIFO | 0644, 0));
  // Nothing changed and the mount still serves.
  ExpectRootListing(mnt, tensors);
  for (const TestTensor& t : tensors) ExpectTensorServed(mnt, t);
}

// Checks a refusal: non-zero exit, exactly one stderr line "stfs: ..." that
// names `subject` and contains one of `keywords` (lowercase), nothing mounted.
void ExpectRefused(const CommandResult& r, const std::string& mnt, const std::string& subject,
                   const std::vector<std::string>& keywords) {
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(r.timed_out);
  std::vector<std::string> lines = Lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << "stderr: " << r.err;
  const std::string& line = lines[0];
  EXPECT_EQ(line.rfind("stfs: ", 0), 0u) << line;
  EXPECT_NE(line.find(subject), std::string::npos) << "does not name " << subject << ": " << line;
  bool named = false;
  for (const std::string& k : keywords) named = named || Lower(line).find(k) != std::string::npos;
  EXPECT_TRUE(named) << "does not say the problem (any of " << ::testing::PrintToString(keywords) << "): " << line;
  EXPECT_EQ(r.out, "");
  if (!mnt.empty()) {
    EXPECT_FALSE(IsMounted(mnt)) << "a refused file left a mount at " << mnt;
  }
}

struct MalformedCase {
  const char* name;
  std::function<std::string()> bytes;
  std::vector<std::string> keywords;
};

// Names a case in test output (instead of its raw bytes).
void PrintTo(const MalformedCase& c, std::ostream* os) { *os << c.name; }

std::string OneTensorFile() {
  std::vector<TestTensor> t = {{"a", DType::F32, {2, 2}, ""}, {"b", DType::U8, {3}, ""}};
  return BuildSafetensors(t);
}

std::string Entry(const std::string& name, const std::string& dtype, const std::string& shape, uint64_t b, uint64_t e) {
  return JsonString(name) + ":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
         std::to_string(b) + "," + std::to_string(e) + "]}";
}

std::vector<MalformedCase> MalformedCases() {
  return {
      {"EmptyFile", [] { return std::string(); }, {"short", "8"}},
      {"ShorterThan8Bytes", [] { return std::string("\x05\0\0", 3); }, {"short", "8 byte", "8-byte"}},
      // N = 100,000,001, one over the limit.
      {"HeaderLengthTooLarge", [] { return std::string("\x01\xe1\xf5\x05\0\0\0\0", 8) + "{}"; },
       {"limit", "large", "exceed"}},
      {"HeaderLengthHuge", [] { return std::string("\0\0\0\0\0\0\0\x80", 8) + "{}"; }, {"limit", "large", "exceed"}},
      {"HeaderRunsPastTheEnd", [] { return std::string("\xe8\x03\0\0\0\0\0\0", 8) + "{\"a\":1}"; },
       {"past", "end", "truncat", "larger"}},
      {"HeaderLengthZero", [] { return RawFile(""); }, {"json", "0"}},
      {"TruncatedData", [] { std::string f = OneTensorFile(); return f.substr(0, f.size() - 1); }, {"truncat"}},
      {"TrailingBytes", [] { return OneTensorFile() + "xx"; }, {"trailing"}},
      {"BadJson", [] { return RawFile("{\"a\": {\"dtype\": "); }, {"json"}},
      {"TwoJsonValues", [] { return RawFile("{} {}"); }, {"json"}},
      {"TopLevelArray", [] { return RawFile("[]"); }, {"object"}},
      {"NotUtf8", [] { return RawFile("{" + Entry("a\xff", "U8", "[1]", 0, 1) + "}", "x"); }, {"utf-8", "utf8"}},
      {"DuplicateTensorName",
       [] { return RawFile("{" + Entry("a", "U8", "[1]", 0, 1) + "," + Entry("a", "U8", "[1]", 1, 2) + "}", "xy"); },
       {"twice", "duplicate"}},
      {"UnknownDtype", [] { return RawFile("{" + Entry("a", "F17", "[1]", 0, 2) + "}", "xy"); }, {"dtype", "f17"}},
      {"DtypeWrongCase", [] { return RawFile("{" + Entry("a", "f16", "[1]", 0, 2) + "}", "xy"); }, {"dtype", "f16"}},
      {"MissingDataOffsets", [] { return RawFile(R"({"a":{"dtype":"U8","shape":[1]}})", "x"); }, {"data_offsets"}},
      {"NegativeDim", [] { return RawFile("{" + Entry("a", "U8", "[-1]", 0, 1) + "}", "x"); }, {"shape", "negative"}},
      {"FloatDim", [] { return RawFile("{" + Entry("a", "U8", "[1.0]", 0, 1) + "}", "x"); }, {"shape", "integer"}},
      {"SizeMismatch", [] { return RawFile("{" + Entry("a", "F32", "[2]", 0, 4) + "}", "abcd"); },
       {"byte", "size"}},
      {"ElementCountOverflow",
       [] { return RawFile("{" + Entry("a", "U8", "[4294967296,4294967296,2]", 0, 1) + "}", "x"); },
       {"overflow", "64 bit", "fit"}},
      {"PartialByteF4", [] { return RawFile("{" + Entry("a", "F4", "[3]", 0, 2) + "}", "xy"); }, {"bit", "byte"}},
      {"GapBetweenTensors",
       [] { return RawFile("{" + Entry("a", "U8", "[2]", 0, 2) + "," + Entry("b", "U8", "[2]", 4, 6) + "}", "abcdef"); },
       {"gap"}},
      {"OverlappingTensors",
       [] { return RawFile("{" + Entry("a", "U8", "[4]", 0, 4) + "," + Entry("b", "U8", "[4]", 2, 6) + "}", "abcdef"); },
       {"overlap"}},
      {"EndBeforeBegin", [] { return RawFile("{" + Entry("a", "U8", "[0]", 2, 1) + "}", "xy"); },
       {"offset", "begin", "end"}},
      {"FirstTensorNotAtZero", [] { return RawFile("{" + Entry("a", "U8", "[2]", 2, 4) + "}", "abcd"); },
       {"gap", "start", "0"}},
      {"MetadataNotStrings", [] { return RawFile(R"({"__metadata__":{"k":1}})"); }, {"__metadata__"}},
      {"MetadataArray", [] { return RawFile(R"({"__metadata__":["x"]})"); }, {"__metadata__"}},
      {"RepeatedFieldInEntry",
       [] { return RawFile(R"({"a":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "x"); },
       {"twice", "duplicate", "dtype"}},
  };
}

class MountMalformed : public MountTest, public ::testing::WithParamInterface<MalformedCase> {};

TEST_P(MountMalformed, IsRefusedWithOneLineAndNothingMounted) {
  const MalformedCase& c = GetParam();
  std::string src = WriteSource(c.bytes(), std::string(c.name) + ".safetensors");
  std::string mnt = NewMountpoint();
  CommandResult r = RunStfs({src, mnt});
  ExpectRefused(r, mnt, src, c.keywords);
  // `inspect` reads the same header and refuses it the same way.
  CommandResult inspect = RunStfs({"inspect", src});
  ExpectRefused(inspect, "", src, c.keywords);
}

INSTANTIATE_TEST_SUITE_P(Mount, MountMalformed, ::testing::ValuesIn(MalformedCases()),
                         [](const ::testing::TestParamInfo<MalformedCase>& info) { return std::string(info.param.name); });

TEST_F(Mount, TensorsSharingADirectoryNameAreRefused) {
  // Escaping is one-to-one, so only the hashed cut of a long name can meet
  // another name: a tensor literally named like that cut.
  const std::string long_name(300, 'x');
  const std::string cut = std::string(200, 'x') + "~e78ddf9f1ba85555";
  std::vector<TestTensor> tensors = {{long_name, DType::U8, {1}, ""}, {"ok", DType::U8, {1}, ""}, {cut, DType::U8, {2}, ""}};
  std::string src = WriteSource(BuildSafetensors(tensors), "collide.safetensors");
  std::string mnt = NewMountpoint();
  CommandResult r = RunStfs({src, mnt});
  ExpectRefused(r, mnt, src, {"directory", "same", "share", "collid"});
  EXPECT_NE(r.err.find(cut), std::string::npos) << r.err;
}

TEST_F(Mount, NamesThatOnceCollidedMountAsDistinctDirectories) {
  std::vector<TestTensor> tensors = {{"a/b", DType::U8, {1}, ""},  {"a%2Fb", DType::U8, {2}, ""},
                                     {"", DType::U8, {3}, ""},     {"%", DType::U8, {4}, ""},
                                     {".", DType::U8, {5}, ""},    {"%2E", DType::U8, {6}, ""},
                                     {std::string("x\0", 2), DType::U8, {7}, ""}, {"x%00", DType::U8, {8}, ""}};
  std::string mnt = MountFile(WriteSource(BuildSafetensors(tensors), "formerly-colliding.safetensors"));
  ASSERT_FALSE(mnt.empty());
  ExpectRootListing(mnt, tensors);
  for (const TestTensor& t : tensors) ExpectTensorServed(mnt, t);
}

TEST_F(Mount, NonexistentSourceIsRefused) {
  std::string src = dir_.path() + "/no-such-file.safetensors";
  std::string mnt = NewMountpoint();
  ExpectRefused(RunStfs({src, mnt}), mnt, src, {"no such file", "not found", "exist"});
}

TEST_F(Mount, SourceThatIsADirectoryIsRefused) {
  std::string src = dir_.path() + "/a-directory";
  ASSERT_EQ(::mkdir(src.c_str(), 0755), 0);
  std::string mnt = NewMountpoint();
  ExpectRefused(RunStfs({src, mnt}), mnt, src, {"directory"});
}

TEST_F(Mount, MountpointThatIsNotADirectoryIsRefused) {
  std::string src = WriteSource(OneTensorFile());
  std::string file = WriteSource("not a dir", "plain-file");
  ExpectRefused(RunStfs({src, file}), "", file, {"not a directory"});
  std::string missing = dir_.path() + "/missing-dir";
  ExpectRefused(RunStfs({src, missing}), "", missing, {"no such file", "not found", "exist"});
  EXPECT_FALSE(IsMounted(file));
}

TEST_F(Mount, BadOptionsAreRefused) {
  std::string src = WriteSource(OneTensorFile());
  std::string mnt = NewMountpoint();
  ExpectRefused(RunStfs({"-o", "read_reply=carrier-pigeon", src, mnt}), mnt, "read_reply", {"pread", "expected"});
  ExpectRefused(RunStfs({"-o", "readahead_kb=lots", src, mnt}), mnt, "readahead_kb", {"integer", "number"});
  ExpectRefused(RunStfs({"-o", "no_such_fuse_option", src, mnt}), mnt, "no_such_fuse_option", {"unknown", "option"});
  ExpectRefused(RunStfs({"--no-such-flag", src, mnt}), mnt, "--no-such-flag", {"unknown", "option"});
  ExpectRefused(RunStfs({src}), "", "SOURCE", {"mountpoint", "expected"});
}

}  // namespace
}  // namespace stfs::testing
