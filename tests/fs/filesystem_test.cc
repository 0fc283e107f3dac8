// The filesystem core in-process: tree shape, attributes, reads, errors,
// without FUSE. Real files, real LocalFileSource.
#include "fs/filesystem.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>
#include <span>
#include <utility>
#include <random>
#include <thread>

#include "tests/test_files.h"

namespace stfs {
namespace {

using testing::BuildSafetensors;
using testing::TempDir;
using testing::TestTensor;

class FilesystemTest : public ::testing::Test {
 protected:
  StatusOr<std::unique_ptr<Filesystem>> Build(std::vector<TestTensor>& tensors, const std::string& metadata = "") {
    file_ = BuildSafetensors(tensors, metadata);
    path_ = dir_.Write("m.safetensors", file_);
    ASSIGN_OR_RETURN(auto source, OpenLocalFile(path_));
    ASSIGN_OR_RETURN(Header header, ReadHeader(*source));
    return Filesystem::Create(std::move(source), std::move(header));
  }

  std::string ReadAll(const Filesystem& fs, InodeId ino, size_t chunk = 7) {
    std::string out;
    std::string buf(chunk, '\0');
    for (uint64_t off = 0;; off += chunk) {
      auto n = fs.Read(ino, off, chunk, buf.data());
      EXPECT_TRUE(n.ok()) << n.status().ToString();
      if (!n.ok() || *n == 0) break;
      out.append(buf.data(), *n);
    }
    return out;
  }

  TempDir dir_;
  std::string file_;
  std::string path_;
};

TEST_F(FilesystemTest, RootListsTensorDirectoriesThenMetadataAndStats) {
  std::vector<TestTensor> t = {{"b", DType::F16, {2}, ""}, {"a/x", DType::U8, {3}, ""}};
  auto fs = Build(t);
  ASSERT_TRUE(fs.ok()) << fs.status().ToString();
  auto entries = (*fs)->ReadDir(kRootInode);
  ASSERT_TRUE(entries.ok());
  std::vector<std::string> names;
  for (auto& e : *entries) names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"b", "a%2Fx", "__metadata__", "__stats__"}));
  auto root = (*fs)->GetAttr(kRootInode);
  EXPECT_EQ(root->mode, static_cast<uint32_t>(S_IFDIR | 0555));
  EXPECT_EQ(root->nlink, 4u);
}

TEST_F(FilesystemTest, TensorDirectoryHoldsDtypeShapeData) {
  std::vector<TestTensor> t = {{"w", DType::BF16, {3, 5}, ""}, {"s", DType::I64, {}, ""}};
  auto fs = Build(t, R"({"k":"v"})");
  ASSERT_TRUE(fs.ok());
  const Filesystem& f = **fs;
  auto dir = f.Lookup(kRootInode, "w");
  ASSERT_TRUE(dir.ok());
  EXPECT_TRUE(dir->is_directory);
  auto dtype = f.Lookup(dir->ino, "dtype");
  auto shape = f.Lookup(dir->ino, "shape");
  auto data = f.Lookup(dir->ino, "data");
  ASSERT_TRUE(dtype.ok() && shape.ok() && data.ok());
  EXPECT_EQ(ReadAll(f, dtype->ino), "BF16\n");
  EXPECT_EQ(ReadAll(f, shape->ino), "[3,5]\n");
  EXPECT_EQ(data->size, 30u);
  EXPECT_EQ(data->mode, static_cast<uint32_t>(S_IFREG | 0444));
  EXPECT_EQ(ReadAll(f, data->ino), t[0].bytes);
  auto s = f.Lookup(kRootInode, "s");
  EXPECT_EQ(ReadAll(f, f.Lookup(s->ino, "shape")->ino), "[]\n");
  EXPECT_EQ(ReadAll(f, f.Lookup(s->ino, "data")->ino, 3), t[1].bytes);
  EXPECT_EQ(ReadAll(f, f.Lookup(kRootInode, "__metadata__")->ino), "{\"k\":\"v\"}\n");
}

TEST_F(FilesystemTest, MetadataIsEmptyObjectWhenAbsent) {
  std::vector<TestTensor> t = {{"w", DType::U8, {1}, ""}};
  auto fs = Build(t);
  ASSERT_TRUE(fs.ok());
  EXPECT_EQ(ReadAll(**fs, (*fs)->Lookup(kRootInode, "__metadata__")->ino), "{}\n");
}

TEST_F(FilesystemTest, ReadsPastEndReturnNothingAndReadsClampToTheTensor) {
  std::vector<TestTensor> t = {{"a", DType::U8, {10}, ""}, {"b", DType::U8, {10}, ""}};
  auto fs = Build(t);
  ASSERT_TRUE(fs.ok());
  InodeId data = (*fs)->Lookup((*fs)->Lookup(kRootInode, "a")->ino, "data")->ino;
  char buf[64];
  auto n = (*fs)->Read(data, 5, 64, buf);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 5u);  // never spills into tensor b
  EXPECT_EQ(std::string(buf, 5), t[0].bytes.substr(5));
  EXPECT_EQ(*(*fs)->Read(data, 10, 64, buf), 0u);
  EXPECT_EQ(*(*fs)->Read(data, 1ull << 40, 64, buf), 0u);
}

TEST_F(FilesystemTest, DataWindowMapsToSourceOffsets) {
  std::vector<TestTensor> t = {{"a", DType::F32, {4}, ""}, {"b", DType::F32, {4}, ""}};
  auto fs = Build(t);
  ASSERT_TRUE(fs.ok());
  InodeId data = (*fs)->Lookup((*fs)->Lookup(kRootInode, "b")->ino, "data")->ino;
  auto w = (*fs)->DataWindow(data, 4, 100);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->offset, (*fs)->catalogue().shards()[0].data_start() + 16 + 4);
  EXPECT_EQ(w->length, 12u);
  EXPECT_GE(w->fd, 0);
  EXPECT_EQ(file_.substr(w->offset, w->length), t[1].bytes.substr(4));
}

TEST_F(FilesystemTest, EmptyAndZeroDimTensorsHaveEmptyData) {
  std::vector<TestTensor> t = {{"e", DType::F32, {0}, ""}, {"z", DType::F16, {4, 0, 2}, ""}};
  auto fs = Build(t);
  ASSERT_TRUE(fs.ok());
  auto z = (*fs)->Lookup(kRootInode, "z");
  auto data = (*fs)->Lookup(z->ino, "data");
  EXPECT_EQ(data->size, 0u);
  EXPECT_EQ(ReadAll(**fs, (*fs)->Lookup(z->ino, "shape")->ino), "[4,0,2]\n");
}

TEST_F(FilesystemTest, InodesAreStableAndDistinct) {
  std::vector<TestTensor> t;
  for (int i = 0; i < 50; ++i) t.push_back({"t" + std::to_string(i), DType::U8, {1}, ""});
  auto fs = Build(t);
  ASSERT_TRUE(fs.ok());
  std::map<InodeId, std::string> seen;
  auto root = (*fs)->ReadDir(kRootInode);
  ASSERT_TRUE(root.ok());
  for (auto& e : *root) {
    EXPECT_TRUE(seen.emplace(e.attr.ino, e.name).second);
    EXPECT_EQ((*fs)->Lookup(kRootInode, e.name)->ino, e.attr.ino);
    if (e.attr.is_directory) {
      auto children = (*fs)->ReadDir(e.attr.ino);
      ASSERT_TRUE(children.ok());
      for (auto& c : *children) EXPECT_TRUE(seen.emplace(c.attr.ino, c.name).second);
    }
  }
  // + the root, + hidden `slices` and `parts` directories per tensor.
  EXPECT_EQ(seen.size() + 1 + 2 * t.size(), (*fs)->inode_count());
}

TEST_F(FilesystemTest, LookupMissIsNotFoundAndFilesAreNotDirectories) {
  std::vector<TestTensor> t = {{"w", DType::U8, {1}, ""}};
  auto fs = Build(t);
  ASSERT_TRUE(fs.ok());
  EXPECT_EQ((*fs)->Lookup(kRootInode, "nope").status().code(), StatusCode::kNotFound);
  auto w = (*fs)->Lookup(kRootInode, "w");
  EXPECT_EQ((*fs)->Lookup(w->ino, "nope").status().code(), StatusCode::kNotFound);
  InodeId data = (*fs)->Lookup(w->ino, "data")->ino;
  EXPECT_FALSE((*fs)->Lookup(data, "x").ok());
  EXPECT_FALSE((*fs)->ReadDir(data).ok());
  EXPECT_FALSE((*fs)->Open(w->ino).ok());
  EXPECT_TRUE((*fs)->Open(data).ok());
  EXPECT_EQ((*fs)->GetAttr(999999).status().code(), StatusCode::kNotFound);
  EXPECT_EQ((*fs)->Lookup(w->ino, "..")->ino, kRootInode);
}

TEST_F(FilesystemTest, RefusesTwoTensorsWithOneDirectoryName) {
  // Only a hashed cut can meet another name: here a tensor named like one.
  const std::string long_name(300, 'x');
  const std::string cut = std::string(200, 'x') + "~e78ddf9f1ba85555";
  std::vector<TestTensor> t = {{long_name, DType::U8, {1}, ""}, {cut, DType::U8, {1}, ""}};
  auto fs = Build(t);
  ASSERT_FALSE(fs.ok());
  EXPECT_NE(fs.status().message().find("\"" + long_name + "\""), std::string::npos) << fs.status().message();
  EXPECT_NE(fs.status().message().find("\"" + cut + "\""), std::string::npos);
  EXPECT_NE(fs.status().message().find(path_), std::string::npos);
}

TEST_F(FilesystemTest, EscapedNamesNeverCollide) {
  std::vector<TestTensor> t = {{"a/b", DType::U8, {1}, ""}, {"a%2Fb", DType::U8, {2}, ""}, {"50%", DType::U8, {3}, ""}};
  auto fs = Build(t);
  ASSERT_TRUE(fs.ok()) << fs.status().ToString();
  EXPECT_EQ((*fs)->DirectoryName(0), "a%2Fb");
  EXPECT_EQ((*fs)->DirectoryName(1), "a%252Fb");
  EXPECT_EQ((*fs)->DirectoryName(2), "50%25");
  EXPECT_EQ(ReadAll(**fs, (*fs)->Lookup((*fs)->Lookup(kRootInode, "a%252Fb")->ino, "data")->ino), t[1].bytes);
}

TEST_F(FilesystemTest, TensorNamedLikeStatsFileWins) {
  std::vector<TestTensor> t = {{"__stats__", DType::U8, {1}, ""}};
  auto fs = Build(t);
  ASSERT_TRUE(fs.ok());
  EXPECT_TRUE((*fs)->Lookup(kRootInode, "__stats__")->is_directory);
  EXPECT_EQ((*fs)->ReadDir(kRootInode)->size(), 2u);
}

TEST_F(FilesystemTest, StatsCountReadsAndBytes) {
  std::vector<TestTensor> t = {{"w", DType::U8, {100}, ""}};
  auto fs = Build(t);
  ASSERT_TRUE(fs.ok());
  InodeId data = (*fs)->Lookup((*fs)->Lookup(kRootInode, "w")->ino, "data")->ino;
  char buf[100];
  ASSERT_TRUE((*fs)->Read(data, 0, 60, buf).ok());
  ASSERT_TRUE((*fs)->Read(data, 60, 60, buf).ok());
  auto stats = (*fs)->Lookup(kRootInode, "__stats__");
  EXPECT_TRUE(stats->is_volatile);
  std::string text = ReadAll(**fs, stats->ino, 4096);
  EXPECT_NE(text.find("\"reads\":2"), std::string::npos) << text;
  EXPECT_NE(text.find("\"bytes_read\":100"), std::string::npos) << text;
}

TEST_F(FilesystemTest, SourceShrunkAfterMountGivesErrorNotWrongBytes) {
  std::vector<TestTensor> t = {{"w", DType::U8, {4096}, ""}};
  auto fs = Build(t);
  ASSERT_TRUE(fs.ok());
  ASSERT_EQ(::truncate(path_.c_str(), 100), 0);
  InodeId data = (*fs)->Lookup((*fs)->Lookup(kRootInode, "w")->ino, "data")->ino;
  std::string buf(4096, '\0');
  auto n = (*fs)->Read(data, 0, 4096, buf.data());
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kIOError);
}

TEST_F(FilesystemTest, ConcurrentReadsAreByteExact) {
  std::vector<TestTensor> t = {{"w", DType::F32, {1 << 18}, ""}};
  auto fs = Build(t);
  ASSERT_TRUE(fs.ok());
  InodeId data = (*fs)->Lookup((*fs)->Lookup(kRootInode, "w")->ino, "data")->ino;
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      std::mt19937_64 rng(i);
      std::string buf(1 << 16, '\0');
      for (int k = 0; k < 300; ++k) {
        uint64_t off = rng() % t[0].bytes.size();
        size_t len = 1 + rng() % buf.size();
        auto n = (*fs)->Read(data, off, len, buf.data());
        size_t want = std::min<uint64_t>(len, t[0].bytes.size() - off);
        if (!n.ok() || *n != want || buf.compare(0, want, t[0].bytes, off, want) != 0) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST_F(FilesystemTest, AllTimesAreTheSourceMtime) {
  std::vector<TestTensor> t = {{"w", DType::U8, {1}, ""}};
  auto fs = Build(t);
  ASSERT_TRUE(fs.ok());
  struct stat st;
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  auto root = (*fs)->ReadDir(kRootInode);
  ASSERT_TRUE(root.ok());
  for (auto& e : *root) {
    EXPECT_EQ(e.attr.mtime.tv_sec, st.st_mtim.tv_sec);
    EXPECT_EQ(e.attr.mtime.tv_nsec, st.st_mtim.tv_nsec);
  }
}

TEST_F(FilesystemTest, SlicesDirectoryIsHiddenFromListingsButAnswersLookups) {
  std::vector<TestTensor> t = {{"w", DType::F32, {4, 6}, ""}};
  auto fs = Build(t);
  ASSERT_TRUE(fs.ok());
  InodeId w = (*fs)->Lookup(kRootInode, "w")->ino;
  auto listing = (*fs)->ReadDir(w);
  ASSERT_TRUE(listing.ok());
  EXPECT_EQ(listing->size(), 4u);  // data, data.npy, dtype, shape
  auto slices = (*fs)->Lookup(w, "slices");
  ASSERT_TRUE(slices.ok());
  EXPECT_TRUE(slices->is_directory);
  EXPECT_TRUE((*fs)->ReadDir(slices->ino)->empty());
}

// Reference: the slice's bytes gathered element by element (C order).
std::string GatherRows(const std::string& bytes, size_t row_bytes, size_t col_begin, size_t col_end,
                       size_t col_step, size_t row_begin, size_t row_end, size_t elem) {
  std::string out;
  for (size_t r = row_begin; r < row_end; ++r) {
    for (size_t c = col_begin; c < col_end; c += col_step) out += bytes.substr(r * row_bytes + c * elem, elem);
  }
  return out;
}

TEST_F(FilesystemTest, SliceViewReadsExactlyTheSelectedBytes) {
  std::vector<TestTensor> t = {{"pad", DType::U8, {3}, ""}, {"w", DType::F32, {50, 40}, ""}};
  auto fs = Build(t);
  ASSERT_TRUE(fs.ok());
  InodeId slices = (*fs)->Lookup((*fs)->Lookup(kRootInode, "w")->ino, "slices")->ino;
  struct Case { const char* spec; size_t rb, re, cb, ce, cs; const char* shape; };
  for (const Case& c : {Case{"10:20", 10, 20, 0, 40, 1, "[10,40]\n"}, Case{":, 5:9", 0, 50, 5, 9, 1, "[50,4]\n"},
                        Case{"-3:, ::7", 47, 50, 0, 40, 7, "[3,6]\n"}, Case{"...", 0, 50, 0, 40, 1, "[50,40]\n"}}) {
    SCOPED_TRACE(c.spec);
    auto dir = (*fs)->Lookup(slices, c.spec);
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    auto data = (*fs)->Lookup(dir->ino, "data");
    auto shape = (*fs)->Lookup(dir->ino, "shape");
    ASSERT_TRUE(data.ok() && shape.ok());
    EXPECT_EQ(ReadAll(**fs, shape->ino), c.shape);
    EXPECT_EQ(ReadAll(**fs, (*fs)->Lookup(dir->ino, "dtype")->ino), "F32\n");
    std::string expected = GatherRows(t[1].bytes, 160, c.cb, c.ce, c.cs, c.rb, c.re, 4);
    EXPECT_EQ(data->size, expected.size());
    EXPECT_EQ(ReadAll(**fs, data->ino, 13), expected);
    EXPECT_EQ(ReadAll(**fs, data->ino, 1 << 20), expected);
    // Same spec, same inode.
    EXPECT_EQ((*fs)->Lookup(slices, c.spec)->ino, dir->ino);
    EXPECT_EQ((*fs)->Lookup(dir->ino, "..")->ino, slices);
  }
}

TEST_F(FilesystemTest, SliceViewRefusesBadIndexWithInvalidArgument) {
  std::vector<TestTensor> t = {{"w", DType::F32, {5, 4}, ""}};
  auto fs = Build(t);
  ASSERT_TRUE(fs.ok());
  InodeId slices = (*fs)->Lookup((*fs)->Lookup(kRootInode, "w")->ino, "slices")->ino;
  EXPECT_EQ((*fs)->Lookup(slices, "7").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*fs)->Lookup(slices, "0,0,0").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*fs)->Lookup(slices, "::0").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*fs)->Lookup(slices, "abc").status().code(), StatusCode::kInvalidArgument);
}

// Forwards to a local file and keeps the hint of every ReadRuns.
class HintRecordingSource : public ByteSource {
 public:
  explicit HintRecordingSource(std::unique_ptr<ByteSource> inner) : inner_(std::move(inner)) {}
  StatusOr<size_t> ReadAt(uint64_t offset, size_t length, char* dst) const override {
    return inner_->ReadAt(offset, length, dst);
  }
  Status ReadRuns(std::span<const ByteRun> runs, const ReadHint& hint) const override {
    std::lock_guard<std::mutex> lock(mu_);
    hints_.push_back(hint);
    for (const ByteRun& run : runs) last_run_end_ = std::max(last_run_end_, run.offset + run.length);
    return inner_->ReadRuns(runs, hint);
  }
  uint64_t Size() const override { return inner_->Size(); }
  const std::string& Describe() const override { return inner_->Describe(); }
  // Returns the hints since the last call and forgets them and the runs' end.
  std::vector<ReadHint> TakeHints() const {
    std::lock_guard<std::mutex> lock(mu_);
    last_run_end_ = 0;
    return std::exchange(hints_, {});
  }
  uint64_t last_run_end() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_run_end_;
  }

 private:
  std::unique_ptr<ByteSource> inner_;
  mutable std::mutex mu_;
  mutable std::vector<ReadHint> hints_;
  mutable uint64_t last_run_end_ = 0;
};

TEST_F(FilesystemTest, ReadsTellTheSourceTheirStreamAndFence) {
  std::vector<TestTensor> t = {{"a", DType::U8, {64}, ""}, {"m", DType::U16, {16, 32}, ""}, {"z", DType::U8, {50}, ""}};
  file_ = BuildSafetensors(t, "");
  auto local = OpenLocalFile(dir_.Write("m.safetensors", file_));
  ASSERT_TRUE(local.ok());
  auto header = ReadHeader(**local);
  ASSERT_TRUE(header.ok());
  auto recording = std::make_unique<HintRecordingSource>(std::move(*local));
  const HintRecordingSource* source = recording.get();
  auto created = Filesystem::Create(std::move(recording), std::move(*header));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  const Filesystem& fs = **created;
  const CatalogueTensor& m = fs.catalogue().tensors()[1];
  ASSERT_EQ(m.info.name, "m");
  const uint64_t m_start = fs.catalogue().FileOffset(m);
  const uint64_t m_end = m_start + m.info.byte_size();
  auto dir = fs.Lookup(kRootInode, "m");
  ASSERT_TRUE(dir.ok());
  std::string buf(4096, '\0');

  // data and data.npy: the handle's stream, fenced at the tensor's end.
  for (const char* name : {"data", "data.npy"}) {
    SCOPED_TRACE(name);
    auto ino = fs.Lookup(dir->ino, name);
    ASSERT_TRUE(ino.ok());
    auto first = fs.Open(ino->ino), second = fs.Open(ino->ino);
    ASSERT_TRUE(first.ok() && second.ok());
    EXPECT_NE(first->stream, 0u);
    EXPECT_NE(first->stream, second->stream);
    source->TakeHints();
    ASSERT_TRUE(fs.Read(*first, 0, buf.size(), buf.data()).ok());
    ASSERT_TRUE(fs.Read(ino->ino, 0, buf.size(), buf.data()).ok());
    std::vector<ReadHint> hints = source->TakeHints();
    ASSERT_EQ(hints.size(), 2u);
    EXPECT_EQ(hints[0].stream, first->stream);
    EXPECT_EQ(hints[0].fence, m_end);
    EXPECT_EQ(hints[1].stream, 0u);  // a read without a handle is no stream
    EXPECT_EQ(hints[1].fence, m_end);
  }

  // A slice view and a column part: fenced at the end of their last run.
  auto parts = fs.Lookup(dir->ino, "parts");
  ASSERT_TRUE(parts.ok());
  auto world = fs.Lookup(parts->ino, "4");
  ASSERT_TRUE(world.ok());
  auto part = fs.Lookup(world->ino, "1@1");
  auto slices = fs.Lookup(dir->ino, "slices");
  ASSERT_TRUE(part.ok() && slices.ok());
  auto slice = fs.Lookup(slices->ino, "2:5, 3:9");
  ASSERT_TRUE(slice.ok());
  for (InodeId view_dir : {part->ino, slice->ino}) {
    auto data = fs.Lookup(view_dir, "data");
    ASSERT_TRUE(data.ok());
    auto file = fs.Open(data->ino);
    ASSERT_TRUE(file.ok());
    source->TakeHints();
    auto n = fs.Read(*file, 0, buf.size(), buf.data());
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n, data->size);
    const uint64_t last_run_end = source->last_run_end();
    std::vector<ReadHint> hints = source->TakeHints();
    ASSERT_EQ(hints.size(), 1u);
    EXPECT_EQ(hints[0].stream, file->stream);
    EXPECT_EQ(hints[0].fence, last_run_end);
    EXPECT_LT(hints[0].fence, m_end);
    // parts/4/1@1 of [16, 32] U16: columns 8..15, the last row's end at column 16;
    // slices/2:5, 3:9: row 4's end at column 9.
    EXPECT_EQ(hints[0].fence, view_dir == part->ino ? m_start + 15 * 64 + 16 * 2 : m_start + 4 * 64 + 9 * 2);
  }
}

}  // namespace
}  // namespace stfs
