// Real mounts over nginx, rank parts: every rank of every world size along
// every dimension is byte-exact against verify_parts.py's numpy reference
// (gathered reads of many short runs, through the kernel), and reading a
// column part and a contiguous part of a 2-D tensor fetches about the part's
// bytes (bytes_fetched in __stats__), not its blocks, when requests cost
// nothing (-o request_cost=0); by default the column part's short runs come
// in whole blocks, about a request per block.
#include <nlohmann/json.hpp>

#include "tests/remote/nginx_mount_fixture.h"

namespace stfs::testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

class RemoteMountParts : public NginxMountTest {
 protected:
  uint64_t SourceStat(const std::string& mnt, const char* name) {
    nlohmann::json stats = nlohmann::json::parse(ReadWholeFile(mnt + "/__stats__"), nullptr, false);
    EXPECT_TRUE(stats.is_object());
    return stats.is_object() ? stats["source"][name].get<uint64_t>() : 0;
  }
  uint64_t Fetched(const std::string& mnt) { return SourceStat(mnt, "bytes_fetched"); }
};

TEST_F(RemoteMountParts, EveryRankIsByteExactAgainstNumpy) {
  std::vector<TestTensor> tensors = {{"w", DType::F32, {300, 1000}, ""},
                                     {"b", DType::BF16, {37, 5, 11}, ""},
                                     {"u", DType::U8, {13, 7}, ""},
                                     {"v", DType::I64, {9}, ""}};
  std::string src = WriteSource(BuildSafetensors(tensors), "p.safetensors");
  std::string mnt = MountFile(nginx_->Url("/p.safetensors"), {"-o", "block_size=256K,cache_size=4M"});
  ASSERT_FALSE(mnt.empty());
  CommandResult py = RunCommand({NumpyPython(), HelperScript("verify_parts.py"), src, mnt, "3"}, 240000);
  EXPECT_EQ(py.exit_code, 0) << py.out << py.err;
  EXPECT_EQ(py.out.rfind("ok ", 0), 0u) << py.out;
}

TEST_F(RemoteMountParts, PartsFetchAboutTheirOwnBytes) {
  // 32 MiB of F32 [2048, 4096]: parts/8/3@1 is 2048 runs of 2 KiB, 16 KiB apart.
  std::vector<TestTensor> tensors = {{"w", DType::F32, {2048, 4096}, ""}, {"after", DType::U8, {8 * kMiB}, ""}};
  std::string url = nginx_->Url("/" + std::string("big.safetensors"));
  WriteSource(BuildSafetensors(tensors), "big.safetensors");
  for (const char* part : {"3@1", "3", "3@1 by default"}) {
    SCOPED_TRACE(part);
    const bool by_default = std::string(part) == "3@1 by default";
    std::string mnt = MountFile(url, {"-o", by_default ? "block_size=4M,cache_size=64M"
                                                       : "block_size=4M,cache_size=64M,request_cost=0"});
    ASSERT_FALSE(mnt.empty());
    if (by_default) part = "3@1";
    const uint64_t before = Fetched(mnt);
    const uint64_t requests_before = SourceStat(mnt, "requests");
    std::string data = ReadWholeFile(mnt + "/w/parts/8/" + part + "/data");
    const uint64_t fetched = Fetched(mnt) - before;
    ASSERT_EQ(data.size(), 4 * kMiB);
    std::string expected;
    if (std::string(part) == "3") {
      expected = tensors[0].bytes.substr(3 * 4 * kMiB, 4 * kMiB);
    } else {
      for (uint64_t row = 0; row < 2048; ++row) expected += tensors[0].bytes.substr(row * 16384 + 3 * 2048, 2048);
    }
    EXPECT_TRUE(data == expected);
    const uint64_t requests = SourceStat(mnt, "requests") - requests_before;
    if (by_default) {
      // The 9 blocks the tensor spans, a request each, plus the few rows a
      // read has in a block before the next read fetches it whole (2048 exact).
      EXPECT_LE(fetched, 36 * kMiB);
      EXPECT_LE(requests, 3u * 9);
    } else {
      // The column part: <= 1.1x; the contiguous one: <= 1.1x and one block.
      const double allowed = std::string(part) == "3" ? 1.1 * 4 * kMiB + 4 * kMiB : 1.1 * 4 * kMiB;
      EXPECT_LE(static_cast<double>(fetched), allowed) << "fetched " << fetched;
    }
    std::printf("parts/8/%s%s of 32 MiB: %.3fx fetched, %llu requests\n", part, by_default ? " (default)" : "",
                fetched / double(4 * kMiB), static_cast<unsigned long long>(requests));
    EXPECT_TRUE(Unmount(mnt));
  }
}

}  // namespace
}  // namespace stfs::testing
