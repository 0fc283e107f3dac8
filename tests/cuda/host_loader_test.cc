// The whole loader pipeline against the host copy engine: random files,
// dtypes, shapes and slices, staging budgets smaller than the tensors,
// compared byte for byte with an independent reference; plus the errors a
// caller can meet (bad slice, small destination, short read) and leaks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "core/cuda/loader.h"
#include "tests/cuda/plan_test_util.h"
#include "tests/cuda/reference_slice.h"
#include "tests/test_files.h"

namespace stfs::gpu {
namespace {

using stfs::testing::BuildSafetensors;
using stfs::testing::TempDir;
using stfs::testing::TestTensor;
using testing::RandomShape;
using testing::RandomSlice;
using testing::ReferenceSliceOf;
using testing::SliceText;

std::mt19937_64& Rng() {
  static std::mt19937_64 rng(std::random_device{}());
  return rng;
}

std::unique_ptr<TensorSource> OpenOrDie(const std::string& path) {
  auto source = TensorSource::Open(path);
  EXPECT_TRUE(source.ok()) << source.status().ToString();
  return source.ok() ? std::move(*source) : nullptr;
}

std::unique_ptr<Loader> HostLoader(const LoaderOptions& options, HostEngineOptions host = {}) {
  auto loader = NewHostLoader(options, host);
  EXPECT_TRUE(loader.ok()) << loader.status().ToString();
  return loader.ok() ? std::move(*loader) : nullptr;
}

DType RandomDType(std::mt19937_64& rng) {
  const auto& all = AllDTypes();
  return all[rng() % all.size()];
}

LoaderOptions RandomOptions(std::mt19937_64& rng) {
  LoaderOptions o;
  o.staging_buffer_bytes = 64 + rng() % 4000;
  o.staging_buffer_count = 1 + static_cast<int>(rng() % 4);
  o.reader_threads = static_cast<int>(rng() % 4);
  const uint64_t gaps[] = {0, 8, 200, 1 << 20};
  o.max_read_gap_bytes = gaps[rng() % 4];
  return o;
}

TEST(HostLoader, RandomSlicesMatchReference) {
  std::mt19937_64& rng = Rng();
  TempDir dir;
  int compared = 0;
  for (int file_iter = 0; file_iter < 12; ++file_iter) {
    std::vector<TestTensor> tensors;
    const int n = 1 + static_cast<int>(rng() % 5);
    for (int i = 0; i < n; ++i) {
      DType dtype = RandomDType(rng);
      std::string name = "t";
      name += std::to_string(i);  // (+ on a temporary trips a GCC 12 -Wrestrict false positive)
      tensors.push_back({name, dtype, RandomShape(rng, dtype), ""});
    }
    std::string file_name = "r";
    file_name += std::to_string(file_iter);
    file_name += ".safetensors";
    const std::string path = dir.Write(file_name, BuildSafetensors(tensors));
    auto source = OpenOrDie(path);
    ASSERT_NE(source, nullptr);
    HostEngineOptions host;
    if (file_iter % 4 == 0) host.copy_delay = std::chrono::microseconds(200);
    auto loader = HostLoader(RandomOptions(rng), host);
    ASSERT_NE(loader, nullptr);
    for (int s = 0; s < 25; ++s) {
      const TestTensor& t = tensors[rng() % tensors.size()];
      std::vector<SliceItem> items = RandomSlice(rng, t.shape, /*allow_invalid=*/true);
      auto want = ReferenceSliceOf(t.dtype, t.shape, t.bytes, items);
      auto plan = PlanTensorSlice(*source, t.name, items);
      const std::string what = t.name + " " + std::string(DTypeName(t.dtype)) + ShapeToString(t.shape) + "[" +
                               SliceText(items) + "]";
      if (!want) {
        EXPECT_FALSE(plan.ok()) << what << " should be refused";
        continue;
      }
      if (DTypeBits(t.dtype) % 8 != 0 && !plan.ok()) continue;  // not byte-aligned: refusal is the rule
      ASSERT_TRUE(plan.ok()) << what << ": " << plan.status().ToString();
      ASSERT_EQ(plan->result_shape, want->shape) << what;
      std::string got(want->bytes.size() + 16, '\x5a');
      Status st = loader->LoadInto(*source, t.name, items, got.data(), want->bytes.size());
      ASSERT_TRUE(st.ok()) << what << ": " << st.ToString();
      ASSERT_EQ(got.substr(0, want->bytes.size()), want->bytes) << what;
      ASSERT_EQ(got.substr(want->bytes.size()), std::string(16, '\x5a')) << what << ": wrote past the result";
      ++compared;
    }
  }
  EXPECT_GT(compared, 100);
}

TEST(HostLoader, SpecTextAndItemsAgree) {
  TempDir dir;
  std::vector<TestTensor> tensors = {{"w", DType::BF16, {37, 29}, ""}};
  auto source = OpenOrDie(dir.Write("m.safetensors", BuildSafetensors(tensors)));
  auto loader = HostLoader(LoaderOptions{});
  auto batch = loader->Load(*source, "w", "3:30:4, -5:");
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  auto want = ReferenceSliceOf(DType::BF16, {37, 29}, tensors[0].bytes,
                               {SliceItem::Range(3, 30, 4), SliceItem::Range(-5, std::nullopt)});
  ASSERT_TRUE(want.has_value());
  EXPECT_EQ(batch->tensors[0].shape, want->shape);
  EXPECT_EQ(std::string(static_cast<char*>(batch->tensors[0].data), batch->tensors[0].bytes), want->bytes);
}

// Loads every rank's share along `dim` and checks the pieces against the
// reference of the same slice; returns the stats of each load.
void CheckShards(Loader* loader, const TensorSource& source, const TestTensor& t, int dim, int world) {
  for (int rank = 0; rank < world; ++rank) {
    auto items = ShardSlice(t.shape, dim, rank, world);
    ASSERT_TRUE(items.ok());
    auto want = ReferenceSliceOf(t.dtype, t.shape, t.bytes, *items);
    ASSERT_TRUE(want.has_value());
    std::string got(want->bytes.size(), '\0');
    Status st = loader->LoadInto(source, t.name, *items, got.data(), got.size());
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_EQ(got, want->bytes) << "rank " << rank << " dim " << dim;
    const LoadStats stats = loader->last_stats();
    EXPECT_EQ(stats.bytes_copied, want->bytes.size());
  }
}

TEST(HostLoader, RowAndColumnShardsOfEveryRank) {
  TempDir dir;
  std::vector<TestTensor> tensors = {{"w", DType::F16, {301, 517}, ""}, {"b", DType::F32, {517}, ""}};
  auto source = OpenOrDie(dir.Write("m.safetensors", BuildSafetensors(tensors)));
  LoaderOptions o;
  o.staging_buffer_bytes = 8192;  // far below the 311 KB tensor
  o.staging_buffer_count = 3;
  o.reader_threads = 2;
  for (uint64_t gap : {uint64_t{0}, uint64_t{1} << 20}) {
    o.max_read_gap_bytes = gap;
    auto loader = HostLoader(o);
    CheckShards(loader.get(), *source, tensors[0], 0, 8);
    CheckShards(loader.get(), *source, tensors[0], -1, 8);
    CheckShards(loader.get(), *source, tensors[1], 0, 3);
  }
}

TEST(HostLoader, ColumnShardMovesOnlyItsBytes) {
  TempDir dir;
  std::vector<TestTensor> tensors = {{"w", DType::BF16, {512, 1024}, ""}};
  auto source = OpenOrDie(dir.Write("m.safetensors", BuildSafetensors(tensors)));
  auto items = ShardSlice(tensors[0].shape, -1, 3, 8);
  ASSERT_TRUE(items.ok());
  const uint64_t shard_bytes = 512 * 128 * 2;
  std::string got(shard_bytes, '\0');

  LoaderOptions exact;
  exact.max_read_gap_bytes = 0;
  auto loader = HostLoader(exact);
  ASSERT_TRUE(loader->LoadInto(*source, "w", *items, got.data(), got.size()).ok());
  LoadStats s = loader->last_stats();
  EXPECT_EQ(s.bytes_read, shard_bytes) << "gap 0 reads exactly the shard";
  EXPECT_EQ(s.bytes_copied, shard_bytes);

  LoaderOptions covering;
  covering.max_read_gap_bytes = 64 << 10;
  covering.staging_buffer_bytes = 256 << 10;
  loader = HostLoader(covering);
  ASSERT_TRUE(loader->LoadInto(*source, "w", *items, got.data(), got.size()).ok());
  s = loader->last_stats();
  EXPECT_EQ(s.bytes_copied, shard_bytes);
  EXPECT_GT(s.copies_2d, 0u);
  EXPECT_LE(s.copies, s.fills) << "one 2-D copy per staging buffer";
  EXPECT_EQ(s.reads, s.fills) << "one covering read per staging buffer";
}

TEST(HostLoader, BatchAndLoadAllMatchTheFile) {
  TempDir dir;
  std::vector<TestTensor> tensors;
  for (int i = 0; i < 20; ++i) tensors.push_back({"layer." + std::to_string(i), DType::F32, {13, 1 + uint64_t(i) * 7}, ""});
  tensors.push_back({"empty", DType::F32, {0, 5}, ""});
  tensors.push_back({"scalar", DType::I64, {}, ""});
  auto source = OpenOrDie(dir.Write("m.safetensors", BuildSafetensors(tensors)));
  LoaderOptions o;
  o.staging_buffer_bytes = 1000;
  o.staging_buffer_count = 4;
  o.reader_threads = 3;
  auto loader = HostLoader(o);
  auto all = loader->LoadAll(*source);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->tensors.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(all->tensors[i].name, tensors[i].name);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(all->tensors[i].data) % 256, 0u);
    ASSERT_EQ(std::string(static_cast<char*>(all->tensors[i].data), all->tensors[i].bytes), tensors[i].bytes);
  }
  // A rank's share of many tensors into caller memory, in reverse order.
  std::vector<std::string> out(tensors.size());
  std::vector<LoadRequest> requests;
  std::vector<std::string> want;
  for (size_t i = tensors.size(); i-- > 0;) {
    if (tensors[i].shape.size() != 2) continue;
    auto items = ShardSlice(tensors[i].shape, -1, 1, 4);
    auto ref = ReferenceSliceOf(tensors[i].dtype, tensors[i].shape, tensors[i].bytes, *items);
    out[i].assign(ref->bytes.size(), '\0');
    want.push_back(ref->bytes);
    requests.push_back({tensors[i].name, *items, out[i].data(), out[i].size()});
  }
  ASSERT_TRUE(loader->LoadBatchInto(*source, requests).ok());
  for (size_t k = 0; k < requests.size(); ++k) {
    EXPECT_EQ(std::string(static_cast<char*>(requests[k].dst), requests[k].capacity), want[k]);
  }
}

TEST(HostLoader, LibraryMemoryOutlivesItsLoader) {
  // A DeviceBuffer shares its engine: destroying the loader first leaves
  // the result readable, and the memory is freed once, with the buffer.
  TempDir dir;
  std::vector<TestTensor> tensors = {{"w", DType::F32, {64, 64}, ""}};
  auto source = OpenOrDie(dir.Write("m.safetensors", BuildSafetensors(tensors)));
  const int64_t before = HostEngineLiveAllocations();
  LoadedBatch kept;
  {
    auto loader = HostLoader(LoaderOptions{});
    auto batch = loader->Load(*source, "w", "");
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    kept = std::move(*batch);
  }
  EXPECT_EQ(HostEngineLiveAllocations() - before, 1) << "only the result's memory is left";
  ASSERT_EQ(std::string(static_cast<char*>(kept.tensors[0].data), kept.tensors[0].bytes), tensors[0].bytes);
  kept.buffer.Reset();
  EXPECT_EQ(HostEngineLiveAllocations(), before);
}

TEST(HostLoader, HostMemoryStaysWithinTheStagingBudget) {
  TempDir dir;
  std::vector<TestTensor> tensors = {{"big", DType::U8, {1 << 20}, ""}};
  auto source = OpenOrDie(dir.Write("m.safetensors", BuildSafetensors(tensors)));
  const int64_t before = HostEngineLiveAllocations();
  {
    LoaderOptions o;
    o.staging_buffer_bytes = 4096;
    o.staging_buffer_count = 2;
    auto loader = HostLoader(o);
    EXPECT_EQ(HostEngineLiveAllocations() - before, 2) << "staging is allocated once, up front";
    std::string got(1 << 20, '\0');
    ASSERT_TRUE(loader->LoadInto(*source, "big", "", got.data(), got.size()).ok());
    EXPECT_EQ(got, tensors[0].bytes);
    EXPECT_EQ(HostEngineLiveAllocations() - before, 2) << "a load allocates no more staging";
    EXPECT_EQ(loader->last_stats().fills, 256u);
  }
  EXPECT_EQ(HostEngineLiveAllocations(), before) << "staging freed with the loader";
}

TEST(HostLoader, ErrorsAreClearAndLeaveTheLoaderUsable) {
  TempDir dir;
  std::vector<TestTensor> tensors = {{"w", DType::F32, {10, 10}, ""}};
  const std::string path = dir.Write("m.safetensors", BuildSafetensors(tensors));
  auto source = OpenOrDie(path);
  const int64_t before = HostEngineLiveAllocations();
  auto loader = HostLoader(LoaderOptions{});
  std::string buf(400, '\0');

  Status s = loader->LoadInto(*source, "nope", "", buf.data(), buf.size());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("nope"), std::string::npos) << s.message();

  s = loader->LoadInto(*source, "w", "10", buf.data(), buf.size());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("\"w\""), std::string::npos) << s.message();

  s = loader->LoadInto(*source, "w", "::0", buf.data(), buf.size());
  EXPECT_FALSE(s.ok());

  s = loader->LoadInto(*source, "w", "", buf.data(), 399);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("400"), std::string::npos) << s.message();

  auto failed_alloc = loader->Load(*source, "w", "1, 2, 3");
  EXPECT_FALSE(failed_alloc.ok());
  EXPECT_EQ(HostEngineLiveAllocations() - before, LoaderOptions{}.staging_buffer_count) << "no destination leaked";

  ASSERT_TRUE(loader->LoadInto(*source, "w", "", buf.data(), buf.size()).ok());
  EXPECT_EQ(buf, tensors[0].bytes);
}

TEST(HostLoader, ShortReadIsAnIOErrorNamingTheFile) {
  TempDir dir;
  std::vector<TestTensor> tensors = {{"a", DType::U8, {100}, ""}, {"b", DType::U8, {5000}, ""}};
  const std::string path = dir.Write("m.safetensors", BuildSafetensors(tensors));
  auto source = OpenOrDie(path);
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(source->FileOffset(*source->Find("b")) + 10)), 0);
  const int64_t before = HostEngineLiveAllocations();
  {
    LoaderOptions o;
    o.staging_buffer_bytes = 1024;
    o.staging_buffer_count = 3;
    o.reader_threads = 3;
    auto loader = HostLoader(o);
    std::string buf(5000, '\0');
    Status s = loader->LoadInto(*source, "b", "", buf.data(), buf.size());
    EXPECT_EQ(s.code(), StatusCode::kIOError) << s.ToString();
    EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
    auto allocated = loader->Load(*source, "b", "");  // fails after allocating
    EXPECT_EQ(allocated.status().code(), StatusCode::kIOError);
    // Bytes before the cut still load.
    ASSERT_TRUE(loader->LoadInto(*source, "a", "", buf.data(), 100).ok());
    EXPECT_EQ(buf.substr(0, 100), tensors[0].bytes);
  }
  EXPECT_EQ(HostEngineLiveAllocations(), before);
}

TEST(HostLoader, DirectIoMatchesBufferedReads) {
  TempDir dir;
  std::vector<TestTensor> tensors = {{"w", DType::BF16, {333, 77}, ""}, {"tail", DType::U8, {4097}, ""}};
  auto source = OpenOrDie(dir.Write("m.safetensors", BuildSafetensors(tensors)));
  LoaderOptions o;
  o.direct_io = true;
  o.staging_buffer_bytes = 3 * 4096;
  o.staging_buffer_count = 2;
  auto made = NewHostLoader(o);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  auto loader = std::move(*made);
  std::string got(333 * 77 * 2, '\0');
  Status s = loader->LoadInto(*source, "w", "", got.data(), got.size());
  if (s.code() == StatusCode::kNotSupported) GTEST_SKIP() << "filesystem refuses O_DIRECT: " << s.message();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(got, tensors[0].bytes);
  for (int rank = 0; rank < 5; ++rank) {
    auto items = ShardSlice(tensors[0].shape, -1, rank, 5);
    auto want = ReferenceSliceOf(DType::BF16, tensors[0].shape, tensors[0].bytes, *items);
    std::string shard(want->bytes.size(), '\0');
    ASSERT_TRUE(loader->LoadInto(*source, "w", *items, shard.data(), shard.size()).ok());
    EXPECT_EQ(shard, want->bytes);
  }
  std::string tail(4097, '\0');  // ends at the end of file, not on a block
  ASSERT_TRUE(loader->LoadInto(*source, "tail", "", tail.data(), tail.size()).ok());
  EXPECT_EQ(tail, tensors[1].bytes);
}

TEST(HostLoader, RejectsBadOptions) {
  LoaderOptions o;
  o.staging_buffer_count = 0;
  EXPECT_EQ(NewHostLoader(o).status().code(), StatusCode::kInvalidArgument);
  o = LoaderOptions{};
  o.direct_io = true;
  o.staging_buffer_bytes = 5000;  // not a multiple of the 4 KiB block
  EXPECT_EQ(NewHostLoader(o).status().code(), StatusCode::kInvalidArgument);
}

TEST(ShardSliceTest, SplitsLikeTorchChunk) {
  auto items = ShardSlice({10, 7}, -1, 2, 3);  // parts of 3: 0:3, 3:6, 6:7
  ASSERT_TRUE(items.ok());
  ASSERT_EQ(items->size(), 2u);
  EXPECT_EQ((*items)[1].start, 6);
  EXPECT_EQ((*items)[1].stop, 7);
  items = ShardSlice({10, 7}, 0, 3, 4);  // parts of 3: last is 9:10
  EXPECT_EQ((*items)[0].start, 9);
  EXPECT_EQ((*items)[0].stop, 10);
  items = ShardSlice({2}, 0, 3, 4);  // ceil(2/4)=1: rank 3 gets nothing
  EXPECT_EQ((*items)[0].start, 2);
  EXPECT_EQ((*items)[0].stop, 2);
  EXPECT_FALSE(ShardSlice({}, 0, 0, 1).ok());
  EXPECT_FALSE(ShardSlice({4}, 1, 0, 1).ok());
  EXPECT_FALSE(ShardSlice({4}, 0, 2, 2).ok());
}

}  // namespace
}  // namespace stfs::gpu
