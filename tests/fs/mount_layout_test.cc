// Real mounts, layout: every dtype, scalars, empty tensors, zero-sized dims,
// the directory name rule, __metadata__, modes, times and inode numbers, all
// compared with the generated file through the kernel.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "tests/fs/mount_harness.h"

namespace stfs::testing {
namespace {

using Mount = MountTest;

// A shape of `dtype` whose element count gives whole bytes (4/6-bit too).
std::vector<uint64_t> WholeByteShape(DType dtype) {
  switch (DTypeBits(dtype)) {
    case 4: return {6, 4};   // 24 x 4 bits = 12 bytes
    case 6: return {4, 4};   // 16 x 6 bits = 12 bytes
    default: return {3, 5};
  }
}

TEST_F(Mount, EveryDtypeReadsByteExact) {
  std::vector<TestTensor> tensors;
  for (DType d : AllDTypes()) tensors.push_back({"t_" + std::string(DTypeName(d)), d, WholeByteShape(d), ""});
  std::string src = WriteSource(BuildSafetensors(tensors));
  std::string mnt = MountFile(src);
  ASSERT_FALSE(mnt.empty());
  ExpectRootListing(mnt, tensors);
  for (const TestTensor& t : tensors) ExpectTensorServed(mnt, t);
  // Spot-check the literal form of a few files, not only the derived one.
  EXPECT_EQ(ReadWholeFile(mnt + "/t_F16/dtype"), "F16\n");
  EXPECT_EQ(ReadWholeFile(mnt + "/t_F4/shape"), "[6,4]\n");
  EXPECT_EQ(ReadWholeFile(mnt + "/t_F8_E4M3FNUZ/dtype"), "F8_E4M3FNUZ\n");
}

TEST_F(Mount, ScalarsEmptyTensorsAndZeroSizedDimsAreServed) {
  std::vector<TestTensor> tensors = {
      {"scalar_f32", DType::F32, {}, ""},
      {"scalar_bool", DType::BOOL, {}, ""},
      {"scalar_c64", DType::C64, {}, ""},
      {"empty_1d", DType::F16, {0}, ""},
      {"zero_middle", DType::I64, {3, 0, 2}, ""},
      {"zero_last_f4", DType::F4, {5, 0}, ""},
      {"after_empty", DType::U8, {7}, ""},
      {"one_of_each", DType::BF16, {1, 1, 1, 1}, ""},
  };
  std::string src = WriteSource(BuildSafetensors(tensors));
  std::string mnt = MountFile(src);
  ASSERT_FALSE(mnt.empty());
  ExpectRootListing(mnt, tensors);
  for (const TestTensor& t : tensors) ExpectTensorServed(mnt, t);
  EXPECT_EQ(ReadWholeFile(mnt + "/scalar_f32/shape"), "[]\n");
  EXPECT_EQ(ReadWholeFile(mnt + "/zero_middle/shape"), "[3,0,2]\n");
  struct stat st;
  ASSERT_EQ(::stat((mnt + "/empty_1d/data").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 0);
  ASSERT_EQ(::stat((mnt + "/scalar_c64/data").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 8);
}

TEST(MountNameRule, ReferenceMatchesTheRuleText) {
  // Pins the test's own reference implementation to literal examples.
  EXPECT_EQ(ExpectedDirName("model.embed.weight"), "model.embed.weight");
  EXPECT_EQ(ExpectedDirName("a/b"), "a%2Fb");
  EXPECT_EQ(ExpectedDirName(""), "%");
  EXPECT_EQ(ExpectedDirName("."), "%2E");
  EXPECT_EQ(ExpectedDirName(".."), "%2E%2E");
  EXPECT_EQ(ExpectedDirName("..."), "...");
  EXPECT_EQ(ExpectedDirName("./"), ".%2F");
  EXPECT_EQ(ExpectedDirName("50%"), "50%25");
  EXPECT_EQ(ExpectedDirName("a%2Fb"), "a%252Fb");
  EXPECT_EQ(ExpectedDirName("tab\tnew\nline"), "tab%09new%0Aline");
  EXPECT_EQ(ExpectedDirName("50%/x"), "50%25%2Fx");
  EXPECT_EQ(ExpectedDirName(std::string("a\0b", 3)), "a%00b");
  EXPECT_EQ(ExpectedDirName("a\x01/\x1f\x7f"), "a%01%2F%1F%7F");
  EXPECT_EQ(ExpectedDirName("a\x01" "b"), "a%01b");  // escaped even where it would be a valid component
  EXPECT_EQ(ExpectedDirName("\xc3\xb1/\xe6\x97\xa5"), "\xc3\xb1%2F\xe6\x97\xa5");
  EXPECT_EQ(ExpectedDirName(std::string(255, 'a')), std::string(255, 'a'));
  EXPECT_EQ(ExpectedDirName(std::string(300, 'x')), std::string(200, 'x') + "~e78ddf9f1ba85555");
  EXPECT_EQ(Fnv1a64Reference(""), 0xcbf29ce484222325ULL);
  // The cut backs off rather than split an escape or a UTF-8 sequence.
  EXPECT_EQ(ExpectedDirName(std::string(198, 'x') + "/" + std::string(100, 'y')).substr(0, 199),
            std::string(198, 'x') + "~");
  EXPECT_EQ(ExpectedDirName(std::string(199, 'x') + "/" + std::string(100, 'y')).substr(0, 200),
            std::string(199, 'x') + "~");
  std::string cjk = "a";
  for (int i = 0; i < 100; ++i) cjk += "\xe6\x97\xa5";
  EXPECT_EQ(ExpectedDirName(cjk).size(), 199u + 17u);
}

// Tensor names that exercise every branch of the rule.
std::vector<std::string> AwkwardNames() {
  std::string cjk = "a";
  for (int i = 0; i < 100; ++i) cjk += "\xe6\x97\xa5";  // 301 bytes; byte 200 is mid-sequence
  return {
      "plain.name",
      "a/b",
      "/leading/and/trailing/",
      "50%",
      "100%/done",
      std::string("nul\0inside", 10),
      "ctrl\x01\x1f\x7f",         // a valid path component: escaped all the same
      "ctrl/\x01\x1f\x7f",
      "a%2Fb",                    // beside "a/b": its own directory, a%252Fb
      "new\nline\ttab",
      "%",
      "%2E",
      "\xc3\xb1" "ame/\xe6\x97\xa5\xe6\x9c\xac",
      "\xf0\x9f\x98\x80 emoji",
      "",
      ".",
      "..",
      "...",
      "./",
      " spaces and \"quotes\" \\ ",
      std::string(255, 'k'),
      std::string(256, 'l'),
      std::string(300, 'x'),
      std::string(198, 'p') + "/" + std::string(100, 'q'),
      std::string(199, 'r') + "/" + std::string(100, 's'),
      cjk,
      std::string(150, 'w') + "/" + std::string(150, 'w'),
  };
}

TEST_F(Mount, TensorNamesFollowTheDirectoryRule) {
  std::vector<TestTensor> tensors;
  for (const std::string& name : AwkwardNames()) tensors.push_back({name, DType::U8, {5}, ""});
  std::string src = WriteSource(BuildSafetensors(tensors));
  std::string mnt = MountFile(src);
  ASSERT_FALSE(mnt.empty());
  ExpectRootListing(mnt, tensors);
  for (const TestTensor& t : tensors) ExpectTensorServed(mnt, t);
  for (const std::string& name : ListDir(mnt)) EXPECT_LE(name.size(), 255u) << name;
  // Literal paths, independent of any rule implementation.
  auto bytes_of = [&](const std::string& name) {
    for (const TestTensor& t : tensors) {
      if (t.name == name) return t.bytes;
    }
    ADD_FAILURE() << "no tensor " << name;
    return std::string();
  };
  EXPECT_EQ(ReadWholeFile(mnt + "/a%2Fb/data"), bytes_of("a/b"));
  EXPECT_EQ(ReadWholeFile(mnt + "/a%252Fb/data"), bytes_of("a%2Fb"));
  EXPECT_EQ(ReadWholeFile(mnt + "/50%25/data"), bytes_of("50%"));
  EXPECT_EQ(ReadWholeFile(mnt + "/%/data"), bytes_of(""));
  EXPECT_EQ(ReadWholeFile(mnt + "/%25/data"), bytes_of("%"));
  EXPECT_EQ(ReadWholeFile(mnt + "/%2E/data"), bytes_of("."));
  EXPECT_EQ(ReadWholeFile(mnt + "/%252E/data"), bytes_of("%2E"));
  EXPECT_EQ(ReadWholeFile(mnt + "/%2E%2E/data"), bytes_of(".."));
  EXPECT_EQ(ReadWholeFile(mnt + "/nul%00inside/data"), bytes_of(std::string("nul\0inside", 10)));
  EXPECT_EQ(ReadWholeFile(mnt + "/new%0Aline%09tab/data"), bytes_of("new\nline\ttab"));
  EXPECT_EQ(ReadWholeFile(mnt + "/ctrl%01%1F%7F/data"), bytes_of("ctrl\x01\x1f\x7f"));
  EXPECT_EQ(ReadWholeFile(mnt + "/" + std::string(200, 'x') + "~e78ddf9f1ba85555/data"), bytes_of(std::string(300, 'x')));
  // No listed name holds a control byte.
  for (const std::string& name : ListDir(mnt)) {
    for (unsigned char c : name) EXPECT_FALSE(c < 0x20 || c == 0x7F) << name;
  }
  // The python reader computes the names with its own implementation.
  CommandResult py = RunCommand({"python3", HelperScript("verify_mount.py"), src, mnt}, 60000);
  EXPECT_EQ(py.exit_code, 0) << py.out << py.err;
}

TEST_F(Mount, LargeRootListingIsComplete) {
  std::vector<TestTensor> tensors;
  for (int i = 0; i < 3000; ++i) {
    tensors.push_back({"layers." + std::to_string(i) + ".mlp/weight", DType::F16, {2}, ""});
  }
  std::string src = WriteSource(BuildSafetensors(tensors));
  std::string mnt = MountFile(src);
  ASSERT_FALSE(mnt.empty());
  ExpectRootListing(mnt, tensors);
  for (int i : {0, 1234, 2999}) ExpectTensorServed(mnt, tensors[static_cast<size_t>(i)]);
}

TEST_F(Mount, MetadataFileHoldsTheHeaderMetadata) {
  std::vector<TestTensor> tensors = {{"w", DType::F32, {2}, ""}};
  const std::string metadata = R"({"format":"pt","note":"caf\u00e9 \"q\" \\ \n","empty":""})";
  std::string mnt = MountFile(WriteSource(BuildSafetensors(tensors, metadata), "with.safetensors"));
  ASSERT_FALSE(mnt.empty());
  std::string text = ReadWholeFile(mnt + "/__metadata__");
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << "one line of JSON: " << text;
  nlohmann::json got = nlohmann::json::parse(text, nullptr, false);
  ASSERT_FALSE(got.is_discarded()) << text;
  EXPECT_EQ(got, nlohmann::json::parse(metadata));
  struct stat st;
  ASSERT_EQ(::stat((mnt + "/__metadata__").c_str(), &st), 0);
  EXPECT_EQ(static_cast<size_t>(st.st_size), text.size());

  std::string none = MountFile(WriteSource(BuildSafetensors(tensors), "without.safetensors"));
  ASSERT_FALSE(none.empty());
  EXPECT_EQ(ReadWholeFile(none + "/__metadata__"), "{}\n");
  std::string null_md = MountFile(WriteSource(BuildSafetensors(tensors, "null"), "null.safetensors"));
  ASSERT_FALSE(null_md.empty());
  EXPECT_EQ(ReadWholeFile(null_md + "/__metadata__"), "{}\n");
}

TEST_F(Mount, ReservedRootNamesNeverListTwice) {
  // A tensor may be called like a root file ("__metadata__" cannot: that key
  // is always the metadata). Whichever wins, the listing must not repeat a
  // name and each listed name must resolve to the inode the listing reports.
  std::vector<TestTensor> tensors = {{"__stats__", DType::U8, {4}, ""}, {"x", DType::U8, {1}, ""}};
  std::string mnt = MountFile(WriteSource(BuildSafetensors(tensors, R"({"k":"v"})")));
  ASSERT_FALSE(mnt.empty());
  std::vector<std::string> names = ListDir(mnt);
  std::set<std::string> unique(names.begin(), names.end());
  EXPECT_EQ(unique.size(), names.size()) << "duplicate names in the root listing";
  DIR* dir = ::opendir(mnt.c_str());
  ASSERT_NE(dir, nullptr);
  while (dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st;
    ASSERT_EQ(::lstat((mnt + "/" + name).c_str(), &st), 0) << name;
    EXPECT_EQ(st.st_ino, e->d_ino) << name << ": readdir and lookup disagree";
  }
  ::closedir(dir);
  EXPECT_EQ(ReadWholeFile(mnt + "/x/data"), tensors[1].bytes);
  EXPECT_EQ(ReadWholeFile(mnt + "/__metadata__"), "{\"k\":\"v\"}\n");
}

TEST_F(Mount, ModesAreReadOnly) {
  std::vector<TestTensor> tensors = {{"w", DType::F32, {4}, ""}, {"a/b", DType::U8, {0}, ""}};
  std::string mnt = MountFile(WriteSource(BuildSafetensors(tensors)));
  ASSERT_FALSE(mnt.empty());
  auto mode_of = [](const std::string& path) {
    struct stat st;
    EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path << ": " << std::strerror(errno);
    return st.st_mode;
  };
  EXPECT_EQ(mode_of(mnt), S_IFDIR | 0555u);
  for (const char* dir : {"/w", "/a%2Fb"}) {
    EXPECT_EQ(mode_of(mnt + dir), S_IFDIR | 0555u) << dir;
    for (const char* file : {"/data", "/dtype", "/shape"}) {
      EXPECT_EQ(mode_of(mnt + dir + file), S_IFREG | 0444u) << dir << file;
    }
  }
  EXPECT_EQ(mode_of(mnt + "/__metadata__"), S_IFREG | 0444u);
  EXPECT_EQ(mode_of(mnt + "/__stats__"), S_IFREG | 0444u);
}

TEST_F(Mount, TimesAreTheSourceMtime) {
  std::vector<TestTensor> tensors = {{"w", DType::F32, {4}, ""}};
  std::string src = WriteSource(BuildSafetensors(tensors));
  const timespec when = {1000000000, 123456789};
  const timespec times[2] = {{1700000000, 0}, when};  // atime differs on purpose
  ASSERT_EQ(::utimensat(AT_FDCWD, src.c_str(), times, 0), 0);
  std::string mnt = MountFile(src);
  ASSERT_FALSE(mnt.empty());
  for (const std::string rel : {"", "/w", "/w/data", "/w/dtype", "/w/shape", "/__metadata__"}) {
    struct stat st;
    ASSERT_EQ(::lstat((mnt + rel).c_str(), &st), 0) << rel;
    EXPECT_EQ(st.st_mtim.tv_sec, when.tv_sec) << rel;
    EXPECT_EQ(st.st_mtim.tv_nsec, when.tv_nsec) << rel;
    EXPECT_EQ(st.st_ctim.tv_sec, when.tv_sec) << rel;
    EXPECT_EQ(st.st_atim.tv_sec, when.tv_sec) << rel;
  }
  // Reading does not move them.
  ReadWholeFile(mnt + "/w/data");
  struct stat st;
  ASSERT_EQ(::stat((mnt + "/w/data").c_str(), &st), 0);
  EXPECT_EQ(st.st_mtim.tv_sec, when.tv_sec);
  EXPECT_EQ(st.st_mtim.tv_nsec, when.tv_nsec);
}

// Returns path -> inode for every node under `mnt`.
std::map<std::string, ino_t> InodesUnder(const std::string& mnt) {
  std::map<std::string, ino_t> out;
  struct stat st;
  if (::lstat(mnt.c_str(), &st) == 0) out[""] = st.st_ino;
  for (const std::string& name : ListDir(mnt)) {
    std::string path = mnt + "/" + name;
    if (::lstat(path.c_str(), &st) != 0) continue;
    out["/" + name] = st.st_ino;
    if (S_ISDIR(st.st_mode)) {
      for (const std::string& child : ListDir(path)) {
        if (::lstat((path + "/" + child).c_str(), &st) == 0) out["/" + name + "/" + child] = st.st_ino;
      }
    }
  }
  return out;
}

TEST_F(Mount, InodeNumbersAreStableAndUnique) {
  std::vector<TestTensor> tensors = {{"w", DType::F32, {4}, ""}, {"a/b", DType::U8, {3}, ""}, {"", DType::I8, {}, ""}};
  std::string mnt = MountFile(WriteSource(BuildSafetensors(tensors)));
  ASSERT_FALSE(mnt.empty());
  std::map<std::string, ino_t> first = InodesUnder(mnt);
  ASSERT_EQ(first.size(), 1u + 2u + 3u * 5u);  // root files; tensor dir, data, data.npy, dtype, shape
  EXPECT_EQ(first[""], 1u);
  std::set<ino_t> unique;
  for (const auto& [path, ino] : first) unique.insert(ino);
  EXPECT_EQ(unique.size(), first.size()) << "two nodes share an inode number";
  EXPECT_EQ(InodesUnder(mnt), first);
  // readdir's d_ino agrees with stat.
  DIR* dir = ::opendir((mnt + "/a%2Fb").c_str());
  ASSERT_NE(dir, nullptr);
  while (dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    EXPECT_EQ(e->d_ino, first["/a%2Fb/" + name]) << name;
  }
  ::closedir(dir);
  // Drop the kernel's dentries and inodes so every path is looked up anew.
  std::ofstream drop("/proc/sys/vm/drop_caches");
  if (drop) {
    drop << "2\n";
    drop.close();
  }
  EXPECT_EQ(InodesUnder(mnt), first) << "inode numbers changed after a re-lookup";
}

}  // namespace
}  // namespace stfs::testing
