// Real mounts of remote objects: the stfs binary over nginx (and the fault
// proxy), checked the way a user sees them — every byte through the kernel,
// `stfs inspect URL` request counts, dd fetching about what it reads, errno
// EIO / ESTALE with the mount alive, hf:// with a token, and __stats__.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "tests/remote/remote_test_util.h"
#include "tests/remote/nginx_mount_fixture.h"

namespace stfs::testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

class RemoteMount : public NginxMountTest {
 protected:
  void TearDown() override {
    NginxMountTest::TearDown();
    proxy_.reset();
  }

  // Writes `bytes` as NAME in the served dir and returns its URL.
  std::string Serve(const std::string& bytes, const std::string& name = "model.safetensors") {
    WriteSource(bytes, name);
    return nginx_->Url("/" + name);
  }

  // Starts the fault proxy in front of nginx.
  void StartProxy() {
    std::string error;
    proxy_ = FaultProxy::Start(nginx_->Url(""), &error);
    ASSERT_NE(proxy_, nullptr) << error;
  }

  // Runs `stfs ARGS` and checks it fails within 10 s with one error line
  // that mentions the timeout.
  void ExpectOneLineFailureWithinTheDeadline(const std::vector<std::string>& args) {
    auto start = std::chrono::steady_clock::now();
    CommandResult r = RunStfs(args, 20000);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_FALSE(r.timed_out);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_LT(seconds, 10.0);
    ASSERT_EQ(Lines(r.err).size(), 1u) << r.err;
    EXPECT_EQ(r.err.rfind("stfs: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find("timeout"), std::string::npos) << r.err;
  }

  std::vector<LoggedRequest> Logged() const {
    usleep(50000);
    return nginx_->Requests();
  }

  nlohmann::json Stats(const std::string& mnt) {
    int err = 0;
    std::string text = PreadFile(mnt + "/__stats__", &err);
    EXPECT_EQ(err, 0) << std::strerror(err);
    return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  }

  std::unique_ptr<FaultProxy> proxy_;
};

TEST_F(RemoteMount, ServesEveryTensorByteForByte) {
  std::vector<TestTensor> tensors = {{"embed", DType::F16, {1000, 3001}, ""},
                                     {"layers.0/attn%q", DType::BF16, {7, 3}, ""},
                                     {"scalar", DType::F64, {}, ""},
                                     {"empty", DType::I32, {0, 4}, ""},
                                     {"tail", DType::U8, {5 * kMiB + 3}, ""}};
  std::string url = Serve(BuildSafetensors(tensors, R"({"format":"pt"})"));
  std::string mnt = MountFile(url, {"-o", "block_size=1M,cache_size=16M"});
  ASSERT_FALSE(mnt.empty());
  ExpectRootListing(mnt, tensors);
  for (const TestTensor& t : tensors) ExpectTensorServed(mnt, t);
  int err = 0;
  EXPECT_EQ(PreadFile(mnt + "/__metadata__", &err), "{\"format\":\"pt\"}\n");
}

TEST_F(RemoteMount, InspectOfASmallHeaderIsOneRequest) {
  std::string url = Serve(FileWithTensorSizes({3 * kMiB, 1000, 77}));
  CommandResult r = RunStfs({"inspect", url});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("tensor.1"), std::string::npos) << r.out;
  std::vector<LoggedRequest> log = Logged();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].range, "bytes=0-99999");
}

TEST_F(RemoteMount, DdOfEightMiBFetchesAboutEightMiB) {
  std::string url = Serve(FileWithTensorSizes({256 * kMiB}));
  std::string mnt = MountFile(url);
  ASSERT_FALSE(mnt.empty());
  nginx_->ClearLog();
  std::string out = dir_.path() + "/dd.out";
  CommandResult r = RunCommand(
      {"dd", "if=" + mnt + "/tensor.0/data", "of=" + out, "bs=1M", "count=8", "status=none"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadWholeFile(out).size(), 8 * kMiB);
  uint64_t fetched = 0;
  for (const LoggedRequest& req : Logged()) fetched += req.bytes;
  EXPECT_GE(fetched, 8 * kMiB);
  // 8 MiB read + the kernel's read-ahead (4 MiB) + ours (as far as the
  // reader got) + block rounding: far from the 256 MiB tensor.
  EXPECT_LE(fetched, 32 * kMiB) << "fetched " << fetched;
  std::printf("dd of 8 MiB fetched %.1f MiB\n", fetched / double(kMiB));
}

// Memory reclaim can take single pages of a file the kernel has cached (this
// VM's DAMON pageout scheme does, see docs/PERFORMANCE.md); reading the file
// again, the kernel asks for just the missing pages. Those holes must not
// each cost a whole block, nor look like a scan that earns read-ahead.
class RemoteMountHoles : public RemoteMount {
 protected:
  // Mounts a 64 MiB tensor (16 MiB of cache: the blocks around the holes are
  // long gone), reads it, drops two pages of the kernel's cache every
  // `stride` bytes over the first `span` bytes, reads it all again and
  // returns the bytes fetched for that; `missing` = pages that were dropped.
  uint64_t RefetchedForHoles(uint64_t stride, uint64_t span, size_t* missing) {
    std::string file = FileWithTensorSizes({64 * kMiB});
    std::string mnt = MountFile(Serve(file), {"-o", "cache_size=16M"});
    EXPECT_FALSE(mnt.empty());
    const std::string path = mnt + "/tensor.0/data";
    const std::string data = file.substr(file.size() - 64 * kMiB);
    int err = 0;
    EXPECT_EQ(PreadFile(path, &err), data) << std::strerror(err);
    int fd = ::open(path.c_str(), O_RDONLY);
    EXPECT_GE(fd, 0);
    void* map = ::mmap(nullptr, 64 * kMiB, PROT_READ, MAP_SHARED, fd, 0);
    EXPECT_NE(map, MAP_FAILED);
    for (uint64_t hole = kMiB + 12288; hole < kMiB + span; hole += stride) {
      EXPECT_EQ(::posix_fadvise(fd, static_cast<off_t>(hole), 8192, POSIX_FADV_DONTNEED), 0);
    }
    std::vector<unsigned char> resident(64 * kMiB / 4096);
    EXPECT_EQ(::mincore(map, 64 * kMiB, resident.data()), 0);
    *missing = 0;
    for (unsigned char r : resident) *missing += (r & 1) ? 0 : 1;
    ::munmap(map, 64 * kMiB);
    ::close(fd);
    const uint64_t before = Stats(mnt)["source"]["bytes_fetched"].get<uint64_t>();
    EXPECT_EQ(PreadFile(path, &err), data) << std::strerror(err);
    const uint64_t refetched = Stats(mnt)["source"]["bytes_fetched"].get<uint64_t>() - before;
    std::printf("%zu missing pages refetched %.2f MiB\n", *missing, refetched / double(kMiB));
    return refetched;
  }
};

TEST_F(RemoteMountHoles, FewFarApartCostAboutTheirPages) {
  size_t missing = 0;
  uint64_t refetched = RefetchedForHoles(4 * kMiB, 40 * kMiB, &missing);  // 10 holes
  ASSERT_GE(missing, 20u) << "fadvise dropped no pages";
  ASSERT_LE(missing, 84u) << "the kernel kept too little of the file for this test";
  // The first hole may start the new open file's stream (one 4 MiB block);
  // whole blocks for each would be 40 MiB.
  EXPECT_LE(refetched, 6 * kMiB);
}

TEST_F(RemoteMountHoles, ManyCloseTogetherGetNoReadahead) {
  size_t missing = 0;
  // 1,920 holes, 15 MiB of pages over 60 MiB: past the first 4 MiB of them
  // the stream used to look like a scan (whole blocks, then read-ahead).
  uint64_t refetched = RefetchedForHoles(32 << 10, 60 * kMiB, &missing);
  ASSERT_GE(missing, 3840u) << "fadvise dropped too few pages";
  ASSERT_LE(missing, 3904u) << "the kernel kept too little of the file for this test";
  EXPECT_LE(refetched, 24 * kMiB);
}

TEST_F(RemoteMount, ServerErrorsAreEioAndTheMountStaysUp) {
  std::vector<TestTensor> tensors = {{"a", DType::U8, {3 * kMiB}, ""},
                                     {"b", DType::U8, {3 * kMiB}, ""}};
  Serve(BuildSafetensors(tensors));
  ASSERT_NO_FATAL_FAILURE(StartProxy());
  std::string mnt = MountFile(proxy_->Url("/model.safetensors"),
                              {"-o", "retries=1,retry_delay=10ms,block_size=1M"});
  ASSERT_FALSE(mnt.empty());
  int err = 0;
  EXPECT_EQ(PreadFile(mnt + "/a/data", &err), tensors[0].bytes);
  proxy_->Set("fault=status&status=503");
  // (b's first bytes share a block with a's last ones, which is cached.)
  PreadFile(mnt + "/b/data", &err, 2 * kMiB, 4096);
  EXPECT_EQ(err, EIO) << std::strerror(err);
  // Still mounted and answering: metadata, cached data, the stats file.
  EXPECT_TRUE(IsMounted(mnt));
  EXPECT_EQ(PreadFile(mnt + "/b/dtype", &err), "U8\n");
  EXPECT_EQ(PreadFile(mnt + "/a/data", &err, kMiB, 1000), tensors[0].bytes.substr(kMiB, 1000));
  EXPECT_GE(Stats(mnt)["source"]["failures"].get<uint64_t>(), 1u);
  proxy_->Set("fault=none");
  EXPECT_EQ(PreadFile(mnt + "/b/data", &err), tensors[1].bytes);
  EXPECT_EQ(err, 0);
}

TEST_F(RemoteMount, ReplacedObjectIsEstaleAndTheMountStaysUp) {
  std::vector<TestTensor> tensors = {{"a", DType::U8, {2 * kMiB}, ""},
                                     {"b", DType::U8, {6 * kMiB}, ""}};
  std::string url = Serve(BuildSafetensors(tensors));
  std::string mnt = MountFile(url, {"-o", "block_size=1M"});
  ASSERT_FALSE(mnt.empty());
  int err = 0;
  EXPECT_EQ(PreadFile(mnt + "/a/data", &err), tensors[0].bytes);
  std::vector<TestTensor> other = {{"a", DType::U8, {2 * kMiB}, ""},
                                   {"b", DType::U8, {6 * kMiB}, ""}};
  std::string tmp = WriteSource(BuildSafetensors(other), "model.safetensors.new");
  timespec times[2] = {{0, UTIME_OMIT}, {time(nullptr) + 3600, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, tmp.c_str(), times, 0), 0);
  ASSERT_EQ(std::rename(tmp.c_str(), (dir_.path() + "/model.safetensors").c_str()), 0);
  PreadFile(mnt + "/b/data", &err, 4 * kMiB, 4096);
  EXPECT_EQ(err, ESTALE) << std::strerror(err);
  EXPECT_TRUE(IsMounted(mnt));
  EXPECT_EQ(PreadFile(mnt + "/a/data", &err), tensors[0].bytes);  // cached: the first version
  EXPECT_TRUE(Stats(mnt)["source"]["stale"].get<bool>());
}

TEST_F(RemoteMount, HubLocationUsesEndpointAndToken) {
  std::vector<TestTensor> tensors = {{"w", DType::F32, {300, 1000}, ""}};
  Serve(BuildSafetensors(tensors), "model.safetensors");
  setenv("HF_ENDPOINT", nginx_->Url("/hub").c_str(), 1);
  setenv("HF_TOKEN", "hf_mounttoken", 1);
  std::string mnt = MountFile("hf://org/repo/model.safetensors@main");
  unsetenv("HF_ENDPOINT");
  unsetenv("HF_TOKEN");
  ASSERT_FALSE(mnt.empty());
  ExpectTensorServed(mnt, tensors[0]);
  std::vector<LoggedRequest> log = Logged();
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log[0].uri, "/hub/org/repo/resolve/main/model.safetensors");
  for (const LoggedRequest& r : log) EXPECT_EQ(r.authorization, "Bearer hf_mounttoken") << r.uri;
}

TEST_F(RemoteMount, StatsFileReportsWhatWasFetched) {
  std::vector<TestTensor> tensors = {{"x", DType::U8, {6 * kMiB}, ""},
                                     {"y", DType::U8, {10 * kMiB}, ""}};
  std::string url = Serve(BuildSafetensors(tensors));
  std::string mnt = MountFile(url, {"-o", "block_size=1M"});
  ASSERT_FALSE(mnt.empty());
  int err = 0;
  ASSERT_EQ(PreadFile(mnt + "/x/data", &err), tensors[0].bytes);
  nlohmann::json s = Stats(mnt);
  ASSERT_TRUE(s.is_object());
  ASSERT_TRUE(s["source"].is_object()) << s.dump();
  const nlohmann::json& src = s["source"];
  EXPECT_EQ(src["type"], "http");
  EXPECT_EQ(src["url"], url);
  EXPECT_GE(src["bytes_fetched"].get<uint64_t>(), 6 * kMiB);
  // Reading x must not pull in y: at most x's blocks (+1 shared at the edge).
  EXPECT_LE(src["bytes_fetched"].get<uint64_t>(), 8 * kMiB);
  EXPECT_GT(src["requests"].get<uint64_t>(), 1u);
  EXPECT_EQ(src["stale"], false);
  uint64_t fetched = 0;
  for (const LoggedRequest& r : Logged()) fetched += r.bytes;
  EXPECT_EQ(fetched, src["bytes_fetched"].get<uint64_t>());
}

TEST_F(RemoteMount, InspectOfAServerThatNeverAnswersEndsWithOneLine) {
  Serve(FileWithTensorSizes({kMiB}));
  ASSERT_NO_FATAL_FAILURE(StartProxy());
  proxy_->Set("fault=hang&seconds=60");
  ExpectOneLineFailureWithinTheDeadline(
      {"inspect", proxy_->Url("/model.safetensors"), "-o", "timeout=2s,min_speed=0"});
}

TEST_F(RemoteMount, MountOfAServerThatNeverAnswersFailsWithOneLine) {
  Serve(FileWithTensorSizes({kMiB}));
  ASSERT_NO_FATAL_FAILURE(StartProxy());
  proxy_->Set("fault=hang&seconds=60");
  std::string mnt = NewMountpoint();
  ExpectOneLineFailureWithinTheDeadline(
      {proxy_->Url("/model.safetensors"), mnt, "-o", "timeout=2s,min_speed=0"});
  EXPECT_FALSE(IsMounted(mnt));
}

TEST_F(RemoteMount, TrickleInsideAMountIsEioWithinTheDeadlineAndTheMountStaysUp) {
  std::vector<TestTensor> tensors = {{"a", DType::U8, {2 * kMiB}, ""},
                                     {"b", DType::U8, {3 * kMiB}, ""}};
  Serve(BuildSafetensors(tensors));
  ASSERT_NO_FATAL_FAILURE(StartProxy());
  std::string mnt = MountFile(proxy_->Url("/model.safetensors"),
                              {"-o", "timeout=3s,min_speed=0,block_size=1M,readahead=0"});
  ASSERT_FALSE(mnt.empty());
  proxy_->Set("fault=trickle");
  int err = 0;
  auto start = std::chrono::steady_clock::now();
  PreadFile(mnt + "/b/data", &err, 2 * kMiB, 4096);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(err, EIO) << std::strerror(err);
  EXPECT_LT(seconds, 12.0);
  EXPECT_TRUE(IsMounted(mnt));
  proxy_->Set("fault=none");
  EXPECT_EQ(PreadFile(mnt + "/b/data", &err), tensors[1].bytes);
  EXPECT_EQ(err, 0);
}

TEST_F(RemoteMount, UnreachableServerIsRefusedWithOneLine) {
  std::string url = nginx_->Url("/missing.safetensors");
  std::string mnt = NewMountpoint();
  CommandResult r = RunStfs({url, mnt});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("404"), std::string::npos) << r.err;
  EXPECT_FALSE(IsMounted(mnt));
}

}  // namespace
}  // namespace stfs::testing
