// Real mounts, NumPy files: numpy.load(mmap_mode='r') of every data.npy kind
// (tensors of every whole-byte dtype, BF16 and F8 stand-ins, packed 4/6-bit
// tensors, slices and parts) gives the documented dtype and shape and the
// reference bytes (verify_npy.py); st_size is exact and data.npy is listed
// beside data in view directories too.
#include <sys/stat.h>

#include "tests/fs/mount_harness.h"

namespace stfs::testing {
namespace {

using MountNpy = MountTest;

TEST_F(MountNpy, NumpyLoadsEveryKindWithTheRightDtypeShapeAndBytes) {
  std::vector<TestTensor> tensors;
  const DType kDTypes[] = {DType::BOOL, DType::U8,  DType::I8,  DType::I16, DType::U16,  DType::F16,
                           DType::I32,  DType::U32, DType::F32, DType::I64, DType::U64,  DType::F64,
                           DType::C64,  DType::BF16, DType::F8_E4M3, DType::F8_E5M2, DType::F8_E8M0};
  int i = 0;
  for (DType dtype : kDTypes) {
    std::vector<uint64_t> shape = i % 3 == 0 ? std::vector<uint64_t>{5} : i % 3 == 1 ? std::vector<uint64_t>{4, 3}
                                                                                       : std::vector<uint64_t>{3, 2, 5};
    tensors.push_back({"t" + std::to_string(i++), dtype, shape, ""});
  }
  tensors.push_back({"scalar", DType::F64, {}, ""});
  tensors.push_back({"empty", DType::F32, {0, 3}, ""});
  tensors.push_back({"f4", DType::F4, {3, 8}, ""});
  tensors.push_back({"f6", DType::F6_E2M3, {4, 4}, ""});
  tensors.push_back({"f4odd", DType::F4, {2, 3}, ""});
  std::string src = WriteSource(BuildSafetensors(tensors));
  std::string mnt = MountFile(src);
  ASSERT_FALSE(mnt.empty());
  CommandResult py = RunCommand({NumpyPython(), HelperScript("verify_npy.py"), src, mnt}, 120000);
  EXPECT_EQ(py.exit_code, 0) << py.out << py.err;
  EXPECT_EQ(py.out.rfind("ok ", 0), 0u) << py.out;
  EXPECT_GE(std::stoi(py.out.substr(3)), 40) << py.out;
  // View directories list data.npy beside data.
  EXPECT_EQ(ListDir(mnt + "/t1/slices/0"), (std::vector<std::string>{"data", "data.npy", "dtype", "shape"}));
  EXPECT_EQ(ListDir(mnt + "/t1/parts/2/0"), (std::vector<std::string>{"data", "data.npy", "dtype", "shape"}));
}

}  // namespace
}  // namespace stfs::testing
