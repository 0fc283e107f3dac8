// Real mounts, rank parts: every rank of several W along every dimension of
// random tensors (random dtypes and shapes) is byte-exact against the numpy
// reference in verify_parts.py, the ranks tile each tensor exactly once, and
// names that are not parts are ENOENT; parts stay within the views' cap.
#include <sys/stat.h>

#include <cerrno>
#include <random>

#include "tests/fs/mount_harness.h"

namespace stfs::testing {
namespace {

using MountParts = MountTest;

std::vector<TestTensor> RandomTensors(uint32_t seed) {
  static const DType kDTypes[] = {DType::F32, DType::BF16, DType::F16, DType::U8,  DType::I64,
                                  DType::BOOL, DType::F8_E4M3, DType::C64, DType::I16, DType::F64};
  std::mt19937 rng(seed);
  std::vector<TestTensor> tensors;
  for (int i = 0; i < 10; ++i) {
    std::vector<uint64_t> shape(1 + rng() % 3);
    for (uint64_t& d : shape) d = 1 + rng() % 13;
    tensors.push_back({"t" + std::to_string(i), kDTypes[rng() % std::size(kDTypes)], shape, ""});
  }
  tensors.push_back({"scalar", DType::F32, {}, ""});
  tensors.push_back({"packed", DType::F4, {6, 4}, ""});
  return tensors;
}

TEST_F(MountParts, EveryRankOfEveryWorldSizeIsByteExactAndTilesTheTensorOnce) {
  for (uint32_t seed : {1u, 2u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::vector<TestTensor> tensors = RandomTensors(seed);
    std::string src = WriteSource(BuildSafetensors(tensors), "m" + std::to_string(seed) + ".safetensors");
    std::string mnt = MountFile(src);
    ASSERT_FALSE(mnt.empty());
    CommandResult py = RunCommand({NumpyPython(), HelperScript("verify_parts.py"), src, mnt, std::to_string(seed)}, 240000);
    EXPECT_EQ(py.exit_code, 0) << py.out << py.err;
    EXPECT_EQ(py.out.rfind("ok ", 0), 0u) << py.out;
    // The tensor directory still lists only its files.
    EXPECT_EQ(ListDir(mnt + "/t0"), (std::vector<std::string>{"data", "data.npy", "dtype", "shape"}));
    EXPECT_TRUE(ListDir(mnt + "/t0/parts").empty());
    EXPECT_TRUE(ListDir(mnt + "/t0/parts/1").empty());
  }
}

TEST_F(MountParts, NamesThatAreNotPartsAreEnoentWithALogLine) {
  std::vector<TestTensor> tensors = {{"w", DType::F32, {6, 4}, ""}};
  std::string log = dir_.path() + "/daemon.log";
  std::string mnt = MountFile(WriteSource(BuildSafetensors(tensors)), {"-o", "log=" + log});
  ASSERT_FALSE(mnt.empty());
  struct stat st;
  for (const char* bad : {"/w/parts/7", "/w/parts/5/1@1", "/w/parts/2/2", "/w/parts/2/0@0"}) {
    errno = 0;
    EXPECT_NE(::stat((mnt + bad).c_str(), &st), 0) << bad;
    EXPECT_EQ(errno, ENOENT) << bad;
  }
  ASSERT_EQ(::stat((mnt + "/w/parts/4/1@1/data").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 6 * 1 * 4);
  std::string text = ReadWholeFile(log);
  for (const char* name : {"parts/7:", "parts/5/1@1:", "parts/2/2:", "parts/2/0@0:"}) {
    EXPECT_NE(text.find(std::string("stfs: tensor \"w\": ") + name), std::string::npos) << name << " in\n" << text;
  }
}

TEST_F(MountParts, PartsShareTheSliceViewCap) {
  std::vector<TestTensor> tensors = {{"w", DType::F32, {64, 4}, ""}};
  std::string src = WriteSource(BuildSafetensors(tensors));
  std::string mnt = MountFile(src, {"-o", "max_slice_views=8"});
  ASSERT_FALSE(mnt.empty());
  const std::string& bytes = tensors[0].bytes;
  for (int w = 1; w <= 64; w += 3) {
    for (int r = 0; r < w; r += 5) {
      std::string data = ReadWholeFile(mnt + "/w/parts/" + std::to_string(w) + "/" + std::to_string(r) + "/data");
      uint64_t lo = 64ull * r / w, hi = 64ull * (r + 1) / w;
      EXPECT_EQ(data, bytes.substr(lo * 16, (hi - lo) * 16)) << w << "/" << r;
    }
  }
  std::string stats = ReadWholeFile(mnt + "/__stats__");
  size_t at = stats.find("\"slice_views\":");
  ASSERT_NE(at, std::string::npos) << stats;
  EXPECT_LE(std::stoul(stats.substr(at + 14)), 8u) << stats;
}

}  // namespace
}  // namespace stfs::testing
