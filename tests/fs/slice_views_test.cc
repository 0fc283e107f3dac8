// Slice views in-process: canonical keys, the bounded cache, kernel
// reference counts, stale inodes and handles that pin their view; and the
// shared directory listings. Real files, real LocalFileSource.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <string>

#include "fs/filesystem.h"
#include "tests/test_files.h"

namespace stfs {
namespace {

using testing::BuildSafetensors;
using testing::TempDir;
using testing::TestTensor;

// Resident set size of this process, from /proc/self/statm.
uint64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

class SliceViewsTest : public ::testing::Test {
 protected:
  std::unique_ptr<Filesystem> Build(std::vector<TestTensor>& tensors, FilesystemOptions options = {}) {
    file_ = BuildSafetensors(tensors);
    std::string path = dir_.Write("m.safetensors", file_);
    auto source = OpenLocalFile(path);
    EXPECT_TRUE(source.ok());
    auto header = ReadHeader(**source);
    EXPECT_TRUE(header.ok());
    auto fs = Filesystem::Create(std::move(*source), std::move(*header), options);
    EXPECT_TRUE(fs.ok()) << fs.status().ToString();
    return std::move(*fs);
  }

  static FilesystemOptions Capped(size_t max_slice_views) {
    FilesystemOptions options;
    options.max_slice_views = max_slice_views;
    return options;
  }

  InodeId SlicesDir(const Filesystem& fs, const std::string& tensor) {
    return fs.Lookup(fs.Lookup(kRootInode, tensor)->ino, "slices")->ino;
  }

  std::string ReadAll(const Filesystem& fs, const FileHandle& file) {
    std::string out;
    char buf[64];
    for (uint64_t off = 0;; off += sizeof buf) {
      auto n = fs.Read(file, off, sizeof buf, buf);
      EXPECT_TRUE(n.ok()) << n.status().ToString();
      if (!n.ok() || *n == 0) break;
      out.append(buf, *n);
    }
    return out;
  }

  TempDir dir_;
  std::string file_;
};

TEST_F(SliceViewsTest, SpellingsOfOneSliceAreOneView) {
  std::vector<TestTensor> t = {{"w", DType::F32, {8, 3}, ""}, {"v", DType::F32, {8, 3}, ""}};
  auto fs = Build(t);
  InodeId slices = SlicesDir(*fs, "w");
  InodeId a = fs->Lookup(slices, "0:4")->ino;
  EXPECT_EQ(fs->Lookup(slices, "0:4:1")->ino, a);
  EXPECT_EQ(fs->Lookup(slices, ":4")->ino, a);
  EXPECT_EQ(fs->Lookup(slices, " :4 , : ")->ino, a);
  EXPECT_EQ(fs->Lookup(slices, "0:4, ...")->ino, a);
  EXPECT_EQ(fs->slice_view_count(), 1u);
  // A different selection, or the same text on another tensor, is another view.
  EXPECT_NE(fs->Lookup(slices, "0:5")->ino, a);
  EXPECT_NE(fs->Lookup(slices, "0")->ino, a);  // drops a dimension: another shape
  EXPECT_NE(fs->Lookup(SlicesDir(*fs, "v"), "0:4")->ino, a);
  EXPECT_EQ(fs->slice_view_count(), 4u);
}

TEST_F(SliceViewsTest, CacheNeverHoldsMoreThanItsCapacity) {
  std::vector<TestTensor> t = {{"w", DType::U8, {1000}, ""}};
  auto fs = Build(t, Capped(8));
  InodeId slices = SlicesDir(*fs, "w");
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(fs->Lookup(slices, std::to_string(i) + ":").ok());
    EXPECT_LE(fs->slice_view_count(), 8u);
  }
  // The newest are still there and read the right bytes.
  auto view = fs->Lookup(slices, "999:");
  auto data = fs->Lookup(view->ino, "data");
  auto file = fs->Open(data->ino);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(ReadAll(*fs, *file), t[0].bytes.substr(999));
}

TEST_F(SliceViewsTest, EvictedViewIsStaleAndALookupMakesItAfresh) {
  std::vector<TestTensor> t = {{"w", DType::U8, {100}, ""}};
  auto fs = Build(t, Capped(2));
  InodeId slices = SlicesDir(*fs, "w");
  auto first = fs->Lookup(slices, "10:20");
  InodeId first_data = fs->Lookup(first->ino, "data")->ino;
  ASSERT_TRUE(fs->Lookup(slices, "1:").ok());
  ASSERT_TRUE(fs->Lookup(slices, "2:").ok());  // evicts 10:20, the least recently used
  EXPECT_EQ(fs->GetAttr(first->ino).status().code(), StatusCode::kStale);
  EXPECT_EQ(fs->GetAttr(first_data).status().code(), StatusCode::kStale);
  EXPECT_EQ(fs->Lookup(first->ino, "data").status().code(), StatusCode::kStale);
  EXPECT_EQ(fs->Open(first_data).status().code(), StatusCode::kStale);
  // Its directory still lists its names (not its sizes); its files are Stale.
  auto listing = fs->OpenDir(first->ino);
  ASSERT_TRUE(listing.ok());
  EXPECT_FALSE(listing->attributes_known());
  ASSERT_EQ(listing->size(), 4u);  // data, data.npy, dtype, shape
  EXPECT_EQ(listing->NameAt(0), "data");
  EXPECT_EQ(listing->AttrAt(0).ino, first_data);
  EXPECT_EQ(fs->OpenDir(first_data).status().code(), StatusCode::kStale);
  // Never-issued inode numbers are simply not found.
  EXPECT_EQ(fs->GetAttr(first->ino + 1000000).status().code(), StatusCode::kNotFound);
  auto again = fs->Lookup(slices, "10:20");
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->ino, first->ino);  // numbers are never reused
  auto file = fs->Open(fs->Lookup(again->ino, "data")->ino);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(ReadAll(*fs, *file), t[0].bytes.substr(10, 10));
}

TEST_F(SliceViewsTest, OpenFilesAndListingsPinTheirView) {
  std::vector<TestTensor> t = {{"w", DType::U16, {50, 2}, ""}};
  auto fs = Build(t, Capped(1));
  InodeId slices = SlicesDir(*fs, "w");
  auto view = fs->Lookup(slices, "5:7");
  auto data = fs->Open(fs->Lookup(view->ino, "data")->ino);
  auto shape = fs->Open(fs->Lookup(view->ino, "shape")->ino);
  auto dtype = fs->Open(fs->Lookup(view->ino, "dtype")->ino);
  auto listing = fs->OpenDir(view->ino);
  ASSERT_TRUE(data.ok() && shape.ok() && dtype.ok() && listing.ok());
  ASSERT_TRUE(fs->Lookup(slices, "0").ok());  // evicts 5:7 from the cache
  EXPECT_EQ(fs->GetAttr(view->ino).status().code(), StatusCode::kStale);
  EXPECT_EQ(ReadAll(*fs, *data), t[0].bytes.substr(5 * 4, 2 * 4));
  EXPECT_EQ(ReadAll(*fs, *shape), "[2,2]\n");
  EXPECT_EQ(ReadAll(*fs, *dtype), "U16\n");
  ASSERT_EQ(listing->size(), 4u);  // data, data.npy, dtype, shape
  EXPECT_EQ(listing->NameAt(0), "data");
  EXPECT_EQ(listing->AttrAt(0).size, 8u);
}

TEST_F(SliceViewsTest, ForgottenViewsGoBeforeReferencedOnes) {
  std::vector<TestTensor> t = {{"w", DType::U8, {100}, ""}};
  auto fs = Build(t, Capped(2));
  InodeId slices = SlicesDir(*fs, "w");
  InodeId a = fs->Lookup(slices, "1:")->ino;
  fs->Remember(a);
  InodeId b = fs->Lookup(slices, "2:")->ino;
  fs->Remember(b);
  InodeId b_data = fs->Lookup(b, "data")->ino;
  fs->Remember(b_data);
  // a is the least recently used, but b is wholly forgotten: b goes.
  fs->Forget(b, 1);
  fs->Forget(b_data, 1);
  ASSERT_TRUE(fs->Lookup(slices, "3:").ok());
  EXPECT_TRUE(fs->GetAttr(a).ok());
  EXPECT_EQ(fs->GetAttr(b).status().code(), StatusCode::kStale);
  // Forgetting more than was counted, or an evicted inode, is harmless.
  fs->Forget(a, 100);
  fs->Forget(b, 5);
  fs->Forget(kRootInode, 1);
  EXPECT_TRUE(fs->GetAttr(kRootInode).ok());
}

TEST_F(SliceViewsTest, AMillionDistinctLookupsKeepMemoryBoundedAndLookupsWorking) {
  // 2000 x 500 single elements: 1,000,000 distinct views, with the default cap.
  std::vector<TestTensor> t = {{"w", DType::U8, {2000, 500}, ""}};
  auto fs = Build(t);
  InodeId slices = SlicesDir(*fs, "w");
  // Warm up to the cap first, so the bound measured is the steady state.
  const uint64_t before_warm_up = ResidentBytes();
  char spec[32];
  for (size_t i = 0; i < kDefaultMaxSliceViews; ++i) {
    std::snprintf(spec, sizeof spec, "%zu,%zu", i / 500, i % 500);
    ASSERT_TRUE(fs->Lookup(slices, spec).ok());
  }
  const uint64_t start = ResidentBytes();
  for (size_t i = 0; i < 1000000; ++i) {
    std::snprintf(spec, sizeof spec, "%zu,%zu", i / 500, i % 500);
    auto view = fs->Lookup(slices, spec);
    ASSERT_TRUE(view.ok()) << spec << ": " << view.status().ToString();
    if (i % 3 == 0) fs->Remember(view->ino);
  }
  const uint64_t end = ResidentBytes();
  std::printf("RSS: +%.1f MiB for the first %zu views, then %+.1f MiB over 1,000,000 more lookups\n",
              (static_cast<double>(start) - static_cast<double>(before_warm_up)) / (1 << 20), kDefaultMaxSliceViews,
              (static_cast<double>(end) - static_cast<double>(start)) / (1 << 20));
  EXPECT_LE(fs->slice_view_count(), kDefaultMaxSliceViews);
  EXPECT_LT(end, before_warm_up + (64u << 20)) << "RSS grew by " << ((end - before_warm_up) >> 20) << " MiB";
  EXPECT_LT(end, start + (16u << 20)) << "RSS still grows at the cap: " << ((end - start) >> 20) << " MiB";
  // Lookups still work and read the right byte.
  auto view = fs->Lookup(slices, "1234,56");
  ASSERT_TRUE(view.ok());
  auto file = fs->Open(fs->Lookup(view->ino, "data")->ino);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(ReadAll(*fs, *file), t[0].bytes.substr(1234 * 500 + 56, 1));
}

TEST_F(SliceViewsTest, DirectoryListingsAreSharedNotCopied) {
  std::vector<TestTensor> t;
  for (int i = 0; i < 1000; ++i) t.push_back({"t" + std::to_string(i), DType::U8, {1}, ""});
  auto fs = Build(t);
  auto a = fs->OpenDir(kRootInode);
  auto b = fs->OpenDir(kRootInode);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), 1002u);
  // Both listings show the filesystem's own name storage.
  for (size_t i : {0, 500, 1001}) EXPECT_EQ(a->NameAt(i).data(), b->NameAt(i).data());
  EXPECT_EQ(a->NameAt(500), "t500");
  EXPECT_EQ(a->AttrAt(500).ino, fs->Lookup(kRootInode, "t500")->ino);
  std::set<std::string> names;
  for (size_t i = 0; i < a->size(); ++i) names.emplace(a->NameAt(i));
  EXPECT_EQ(names.size(), 1002u);
}

}  // namespace
}  // namespace stfs
