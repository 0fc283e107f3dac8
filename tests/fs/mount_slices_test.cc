// Real mounts, slice views: `<tensor>/slices/<numpy index>/{data,dtype,shape}`
// through the kernel, compared with a brute-force numpy basic-indexing
// reference written here (element by element, nothing from core).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "tests/fs/mount_harness.h"

namespace stfs::testing {
namespace {

using Mount = MountTest;

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// One dimension's selection: the source indices it keeps, and whether the
// dimension stays in the result (a slice) or is dropped (an integer).
struct DimSelection {
  std::vector<uint64_t> indices;
  bool keeps_dim = true;
};

// numpy basic indexing on `shape` for `spec` (ints, start:stop:step with
// step >= 1, one "...", trailing dims whole); nullopt when numpy would raise.
std::optional<std::vector<DimSelection>> ReferenceSelect(const std::vector<uint64_t>& shape, const std::string& spec) {
  std::vector<std::string> items;
  size_t start = 0;
  while (true) {
    size_t comma = spec.find(',', start);
    items.push_back(Trim(spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (items.size() == 1 && items[0].empty()) items.clear();
  size_t ellipses = 0, indexing = 0;
  for (const std::string& it : items) (it == "..." ? ellipses : indexing)++;
  if (ellipses > 1 || indexing > shape.size()) return std::nullopt;
  std::vector<std::string> full;
  for (const std::string& it : items) {
    if (it == "...") {
      for (size_t k = 0; k < shape.size() - indexing; ++k) full.push_back(":");
    } else {
      full.push_back(it);
    }
  }
  while (full.size() < shape.size()) full.push_back(":");
  auto parse_int = [](const std::string& t, int64_t* out) {
    if (t.empty()) return false;
    char* end = nullptr;
    *out = std::strtoll(t.c_str(), &end, 10);
    return *end == '\0';
  };
  std::vector<DimSelection> out;
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t n = static_cast<int64_t>(shape[d]);
    const std::string& it = full[d];
    DimSelection sel;
    if (it.find(':') == std::string::npos) {
      int64_t i;
      if (!parse_int(it, &i)) return std::nullopt;
      if (i < 0) i += n;
      if (i < 0 || i >= n) return std::nullopt;
      sel.indices = {static_cast<uint64_t>(i)};
      sel.keeps_dim = false;
    } else {
      std::string parts[3];
      size_t c1 = it.find(':'), c2 = it.find(':', c1 + 1);
      parts[0] = Trim(it.substr(0, c1));
      parts[1] = Trim(it.substr(c1 + 1, c2 == std::string::npos ? std::string::npos : c2 - c1 - 1));
      parts[2] = c2 == std::string::npos ? "" : Trim(it.substr(c2 + 1));
      int64_t step = 1, lo = 0, hi = n;
      if (!parts[2].empty() && !parse_int(parts[2], &step)) return std::nullopt;
      if (step < 1) return std::nullopt;
      if (!parts[0].empty()) {
        if (!parse_int(parts[0], &lo)) return std::nullopt;
        if (lo < 0) lo += n;
        lo = std::clamp<int64_t>(lo, 0, n);
      }
      if (!parts[1].empty()) {
        if (!parse_int(parts[1], &hi)) return std::nullopt;
        if (hi < 0) hi += n;
        hi = std::clamp<int64_t>(hi, 0, n);
      }
      for (int64_t i = lo; i < hi; i += step) sel.indices.push_back(static_cast<uint64_t>(i));
    }
    out.push_back(sel);
  }
  return out;
}

struct Expected {
  std::vector<uint64_t> shape;
  std::string bytes;
};

// Copies the selected elements of a tensor of `elem_bytes`-byte elements.
Expected ReferenceSlice(const std::vector<uint64_t>& shape, size_t elem_bytes, const std::string& data,
                        const std::vector<DimSelection>& sel) {
  Expected e;
  for (const DimSelection& s : sel) {
    if (s.keeps_dim) e.shape.push_back(s.indices.size());
  }
  uint64_t total = 1;
  for (const DimSelection& s : sel) total *= s.indices.size();
  std::vector<size_t> pos(sel.size(), 0);
  for (uint64_t k = 0; k < total; ++k) {
    uint64_t flat = 0;
    for (size_t d = 0; d < sel.size(); ++d) flat = flat * shape[d] + sel[d].indices[pos[d]];
    e.bytes += data.substr(flat * elem_bytes, elem_bytes);
    for (size_t d = sel.size(); d-- > 0;) {
      if (++pos[d] < sel[d].indices.size()) break;
      pos[d] = 0;
    }
  }
  return e;
}

TEST_F(Mount, SliceViewsMatchNumpyBasicIndexing) {
  const std::vector<uint64_t> shape = {6, 5, 4};
  std::vector<TestTensor> tensors = {{"w", DType::F32, shape, ""}, {"layer/0", DType::I16, {7, 3}, ""}};
  std::string mnt = MountFile(WriteSource(BuildSafetensors(tensors)));
  ASSERT_FALSE(mnt.empty());
  EXPECT_EQ(ListDir(mnt + "/w"), (std::vector<std::string>{"data", "data.npy", "dtype", "shape"})) << "slices stays hidden";
  EXPECT_EQ(ListDir(mnt + "/w/slices"), std::vector<std::string>{});
  for (const std::string spec : {"1", "-1", "1:4", ":,2:", "::2,1,-2:", "...,1", "0,...", "5:1", "10:20", "-100:2",
                                 "0 , 1", ":,::3,1:3", "2:3,4,3", "...", ":", "::4,:,::5"}) {
    SCOPED_TRACE("w[" + spec + "]");
    std::optional<std::vector<DimSelection>> sel = ReferenceSelect(shape, spec);
    ASSERT_TRUE(sel.has_value());
    Expected want = ReferenceSlice(shape, 4, tensors[0].bytes, *sel);
    std::string dir = mnt + "/w/slices/" + spec;
    EXPECT_EQ(ReadWholeFile(dir + "/shape"), ShapeJson(want.shape) + "\n");
    EXPECT_EQ(ReadWholeFile(dir + "/dtype"), "F32\n");
    struct stat st;
    ASSERT_EQ(::stat((dir + "/data").c_str(), &st), 0) << std::strerror(errno);
    EXPECT_EQ(static_cast<size_t>(st.st_size), want.bytes.size());
    EXPECT_TRUE(ReadWholeFile(dir + "/data") == want.bytes) << "slice bytes differ from the reference";
    EXPECT_EQ(ListDir(dir), (std::vector<std::string>{"data", "data.npy", "dtype", "shape"}));
  }
  // A tensor whose directory name is encoded.
  const std::vector<uint64_t> shape2 = {7, 3};
  Expected col = ReferenceSlice(shape2, 2, tensors[1].bytes, *ReferenceSelect(shape2, ":,1"));
  EXPECT_TRUE(ReadWholeFile(mnt + "/layer%2F0/slices/:,1/data") == col.bytes);
}

TEST_F(Mount, SliceDataReadsWithOffsetsAndMmap) {
  std::vector<TestTensor> tensors = {{"m", DType::U8, {512, 1024}, ""}};
  std::string mnt = MountFile(WriteSource(BuildSafetensors(tensors)));
  ASSERT_FALSE(mnt.empty());
  const std::vector<uint64_t> shape = {512, 1024};
  Expected want = ReferenceSlice(shape, 1, tensors[0].bytes, *ReferenceSelect(shape, "3:500:7,100:900"));
  std::string path = mnt + "/m/slices/3:500:7,100:900/data";
  int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  std::vector<char> buf(want.bytes.size() + 100);
  for (uint64_t off : {uint64_t{0}, uint64_t{1}, uint64_t{799}, uint64_t{800}, uint64_t{12345}, want.bytes.size() - 3}) {
    ssize_t n = ::pread(fd, buf.data(), 5000, static_cast<off_t>(off));
    size_t expect = std::min<uint64_t>(5000, want.bytes.size() - off);
    ASSERT_EQ(n, static_cast<ssize_t>(expect)) << off;
    EXPECT_EQ(std::memcmp(buf.data(), want.bytes.data() + off, expect), 0) << off;
  }
  EXPECT_EQ(::pread(fd, buf.data(), 10, static_cast<off_t>(want.bytes.size())), 0);
  void* map = ::mmap(nullptr, want.bytes.size(), PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(map, MAP_FAILED) << std::strerror(errno);
  EXPECT_EQ(std::memcmp(map, want.bytes.data(), want.bytes.size()), 0);
  ::munmap(map, want.bytes.size());
  ::close(fd);
}

TEST_F(Mount, BadSliceIndicesFailWithEinval) {
  std::vector<TestTensor> tensors = {{"w", DType::F32, {6, 5}, ""}, {"q", DType::F4, {4, 6}, ""}};
  std::string mnt = MountFile(WriteSource(BuildSafetensors(tensors)));
  ASSERT_FALSE(mnt.empty());
  for (const char* spec : {"6", "-7", "0,0,0", "::0", "::-1", "...,...", "abc", "1:2:3:4"}) {
    EXPECT_FALSE(ReferenceSelect({6, 5}, spec).has_value()) << spec << " (the reference disagrees)";
    struct stat st;
    errno = 0;
    EXPECT_EQ(::stat((mnt + "/w/slices/" + spec).c_str(), &st), -1) << spec;
    EXPECT_EQ(errno, EINVAL) << spec << ": " << std::strerror(errno);
  }
  // 4-bit elements: a row is 3 whole bytes, a column is not byte-aligned.
  EXPECT_TRUE(ReadWholeFile(mnt + "/q/slices/1/data") == tensors[1].bytes.substr(3, 3));
  EXPECT_EQ(ReadWholeFile(mnt + "/q/slices/1/shape"), "[6]\n");
  struct stat st;
  errno = 0;
  EXPECT_EQ(::stat((mnt + "/q/slices/:,1").c_str(), &st), -1);
  EXPECT_EQ(errno, EINVAL) << std::strerror(errno);
  // The mount still serves after the refusals.
  ExpectTensorServed(mnt, tensors[0]);
}

}  // namespace
}  // namespace stfs::testing
