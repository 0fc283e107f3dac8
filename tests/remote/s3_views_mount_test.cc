// s3:// mounts (the stfs binary against s3rver) serve what local and nginx
// mounts do: every one of the 22 dtypes byte-exact (data, data.npy, read(),
// mmap; verify_mount.py and verify_npy.py), slice views equal to numpy's own
// basic indexing (verify_slices.py), and every rank part of several world
// sizes along every dimension byte-exact (verify_parts.py). The object is
// uploaded to s3rver and also written locally, as the scripts' reference.
#include <cstdio>

#include "tests/fs/mount_harness.h"
#include "tests/remote/s3_mount_fixture.h"
#include "tests/remote/s3_server.h"

namespace stfs::testing {
namespace {

class S3Views : public S3rverMountTest {
 protected:
  // Uploads `tensors` as s3://models/views/model.safetensors, writes the same
  // bytes locally (returned path) and mounts the object at *mnt with small
  // blocks (`cache` options), so reads cross blocks and the cache.
  std::string PutAndMount(std::vector<TestTensor>& tensors, std::string* mnt,
                          const std::string& cache = "block_size=256K,cache_size=16M") {
    const std::string bytes = BuildSafetensors(tensors, R"({"format":"pt"})");
    server_->Put("models", "views/model.safetensors", bytes);
    std::string source = WriteSource(bytes);
    *mnt = MountFile("s3://models/views/model.safetensors",
                     {"-o", EndpointOption() + "," + cache});
    return source;
  }

  // Runs a numpy checker script; it prints "ok N" with N the views checked.
  int RunChecker(const std::vector<std::string>& argv) {
    CommandResult py = RunCommand(argv, 240000);
    EXPECT_EQ(py.exit_code, 0) << py.out << py.err;
    if (py.out.rfind("ok ", 0) != 0) {
      ADD_FAILURE() << py.out << py.err;
      return 0;
    }
    std::printf("%s: %s", argv[1].substr(argv[1].rfind('/') + 1).c_str(), py.out.c_str());
    return std::stoi(py.out.substr(3));
  }
};

// Every dtype of core/dtype.h, shapes of rank 1-3, the packed 4/6-bit kinds
// (also one whose rows are not whole bytes), a scalar, an empty tensor, and
// one tensor over several 256 KiB blocks.
std::vector<TestTensor> EveryDTypeTensors() {
  const std::vector<std::vector<uint64_t>> shapes = {{64, 33}, {5, 4, 3}, {1001}};
  std::vector<TestTensor> tensors;
  int i = 0;
  for (DType dtype : AllDTypes()) {
    const bool packed = DTypeBits(dtype) < 8;
    tensors.push_back({"t_" + std::string(DTypeName(dtype)), dtype,
                       packed ? std::vector<uint64_t>{6, 8} : shapes[i++ % shapes.size()], ""});
  }
  tensors.push_back({"f4_odd", DType::F4, {2, 3}, ""});
  tensors.push_back({"scalar", DType::F64, {}, ""});
  tensors.push_back({"empty", DType::F32, {0, 3}, ""});
  tensors.push_back({"big", DType::BF16, {700, 1001}, ""});
  return tensors;
}

TEST_F(S3Views, EveryDTypeIsServedByteForByte) {
  std::vector<TestTensor> tensors = EveryDTypeTensors();
  std::string mnt;
  std::string source = PutAndMount(tensors, &mnt);
  ASSERT_FALSE(mnt.empty());
  ExpectRootListing(mnt, tensors);
  for (const TestTensor& t : tensors) ExpectTensorServed(mnt, t);
  CommandResult whole = RunCommand({"python3", HelperScript("verify_mount.py"), source, mnt}, 240000);
  EXPECT_EQ(whole.exit_code, 0) << whole.out << whole.err;
  // numpy.load of data.npy for every tensor, of two slices and a part each.
  EXPECT_GE(RunChecker({NumpyPython(), HelperScript("verify_npy.py"), source, mnt}), kDTypeCount + 40);
}

TEST_F(S3Views, SlicesAreNumpyBasicIndexingOfEveryDType) {
  std::vector<TestTensor> tensors = EveryDTypeTensors();
  std::string mnt;
  std::string source = PutAndMount(tensors, &mnt);
  ASSERT_FALSE(mnt.empty());
  const std::vector<std::string> specs = {"1", "-1", "1:4", ":,2:", "::2,1,-2:", "...,1", "0,...", "5:1",
                                          "10:20", "-100:2", "0 , 1", ":,::3,1:3", "2:3,4,2", "...", ":",
                                          "::4,:,::5", "600:,-3"};
  std::vector<std::string> argv = {NumpyPython(), std::string(STFS_SOURCE_DIR) + "/tests/remote/verify_slices.py",
                                   source, mnt};
  argv.insert(argv.end(), specs.begin(), specs.end());
  // 19 whole-byte dtypes (+ "big" and "empty"), most specs valid on each.
  EXPECT_GE(RunChecker(argv), 19 * 10);
}

TEST_F(S3Views, EveryRankPartIsByteExactAgainstNumpy) {
  std::vector<TestTensor> tensors = {{"w", DType::F32, {96, 300}, ""}, {"b", DType::BF16, {37, 5, 11}, ""},
                                     {"u", DType::U8, {13, 7}, ""},      {"v", DType::I64, {9}, ""},
                                     {"f8", DType::F8_E4M3, {6, 10}, ""}, {"flags", DType::BOOL, {17}, ""}};
  std::string mnt;
  // 64 KiB blocks (the smallest): parts gather runs across many block edges.
  std::string source = PutAndMount(tensors, &mnt, "block_size=64K,cache_size=1M");
  ASSERT_FALSE(mnt.empty());
  EXPECT_GT(RunChecker({NumpyPython(), HelperScript("verify_parts.py"), source, mnt, "3"}), 1000);
}

}  // namespace
}  // namespace stfs::testing
