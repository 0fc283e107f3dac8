// stfs_gpu_bench: the measuring half of scripts/gpu-check.sh.
//
//   stfs_gpu_bench generate --out F --bytes N [--hidden H --ffn I --vocab V]
//       writes a llama-shaped BF16 safetensors file of about N bytes;
//   stfs_gpu_bench ceiling [--mib M --repeat R]
//       measures pinned host->device cudaMemcpyAsync (the link's ceiling),
//       every CUDA return code checked;
//   stfs_gpu_bench readfile --file F
//       reads the file sequentially with one thread (host baseline);
//   stfs_gpu_bench load --file F --mode whole|rows|cols [--world W --rank R]
//       [--engine cuda|host] [--staging-mib M --staging-count C --threads T]
//       [--gap B --gather W --direct --repeat R]
//       loads the file (whole) or rank R's 1/W row or column shard of every
//       2-D tensor into one destination allocation, timed end to end: from
//       nothing open to the bytes in place (source open, pinned staging and
//       device allocation included). Bytes are verified elsewhere, against
//       safetensors (end_to_end_bench.py), never against this planner.
// Each measurement prints a human line and a machine line
// "RESULT {json}" that gpu-check.sh turns into ratios. It never prints a
// figure it did not measure in this run.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>

#include "core/cuda/loader.h"

namespace stfs::gpu {
namespace {

using Clock = std::chrono::steady_clock;

std::map<std::string, std::string> ParseFlags(int argc, char** argv, int first) {
  std::map<std::string, std::string> flags;
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) {
      std::fprintf(stderr, "unexpected argument %s\n", a.c_str());
      std::exit(2);
    }
    a = a.substr(2);
    if (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) {
      flags[a] = argv[++i];
    } else {
      flags[a] = "1";
    }
  }
  return flags;
}

uint64_t Num(const std::map<std::string, std::string>& f, const std::string& key, uint64_t dflt) {
  auto it = f.find(key);
  return it == f.end() ? dflt : std::strtoull(it->second.c_str(), nullptr, 0);
}

std::string Str(const std::map<std::string, std::string>& f, const std::string& key, const std::string& dflt) {
  auto it = f.find(key);
  return it == f.end() ? dflt : it->second;
}

void Result(const std::string& name, uint64_t bytes, double seconds, const std::string& extra = "") {
  const double gbps = seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
  std::printf("%-28s %10.3f GiB in %8.4f s = %7.2f GB/s%s%s\n", name.c_str(),
              static_cast<double>(bytes) / (1 << 30), seconds, gbps, extra.empty() ? "" : "  ", extra.c_str());
  std::printf("RESULT {\"name\":\"%s\",\"bytes\":%llu,\"seconds\":%.6f,\"gbps\":%.4f}\n", name.c_str(),
              static_cast<unsigned long long>(bytes), seconds, gbps);
  std::fflush(stdout);
}

int Fail(const Status& s) {
  std::fprintf(stderr, "stfs_gpu_bench: %s\n", s.ToString().c_str());
  return 1;
}

// ---- generate ---------------------------------------------------------

struct GenTensor {
  std::string name;
  std::vector<uint64_t> shape;
  uint64_t bytes;
};

int Generate(const std::map<std::string, std::string>& f) {
  const std::string out = Str(f, "out", "");
  if (out.empty()) return Fail(Status::InvalidArgument("generate needs --out"));
  const uint64_t target = Num(f, "bytes", 8ull << 30);
  const uint64_t h = Num(f, "hidden", 4096), ffn = Num(f, "ffn", 11008), vocab = Num(f, "vocab", 32000);
  std::vector<GenTensor> tensors;
  auto add = [&](std::string name, std::vector<uint64_t> shape) {
    uint64_t n = 2;
    for (uint64_t d : shape) n *= d;
    tensors.push_back({std::move(name), std::move(shape), n});
  };
  add("model.embed_tokens.weight", {vocab, h});
  const uint64_t per_layer = 2 * (4 * h * h + 3 * h * ffn + 2 * h);
  const uint64_t fixed = 2 * (2 * vocab * h + h);
  const uint64_t layers = std::max<uint64_t>(1, target > fixed ? (target - fixed) / per_layer : 1);
  for (uint64_t l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {h});
    add(p + "self_attn.q_proj.weight", {h, h});
    add(p + "self_attn.k_proj.weight", {h, h});
    add(p + "self_attn.v_proj.weight", {h, h});
    add(p + "self_attn.o_proj.weight", {h, h});
    add(p + "post_attention_layernorm.weight", {h});
    add(p + "mlp.gate_proj.weight", {ffn, h});
    add(p + "mlp.up_proj.weight", {ffn, h});
    add(p + "mlp.down_proj.weight", {h, ffn});
  }
  add("model.norm.weight", {h});
  add("lm_head.weight", {vocab, h});

  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  uint64_t offset = 0;
  for (const GenTensor& t : tensors) {
    header += ",\"" + t.name + "\":{\"dtype\":\"BF16\",\"shape\":" + ShapeToString(t.shape) +
              ",\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + t.bytes) + "]}";
    offset += t.bytes;
  }
  header += "}";
  while ((8 + header.size()) % 8 != 0) header += ' ';
  const uint64_t data_start = 8 + header.size();
  const uint64_t total = data_start + offset;

  int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Fail(StatusFromErrno(errno, out));
  std::string prefix(8, '\0');
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  prefix += header;
  if (::pwrite(fd, prefix.data(), prefix.size(), 0) != static_cast<ssize_t>(prefix.size())) {
    return Fail(StatusFromErrno(errno, out));
  }
  // Fill the data with a fast generator, in parallel chunks.
  const unsigned threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  const uint64_t chunk = 64ull << 20;
  std::atomic<uint64_t> next{0};
  std::atomic<bool> failed{false};
  auto work = [&] {
    std::vector<uint64_t> buf(chunk / 8);
    for (uint64_t c; (c = next.fetch_add(1)) * chunk < offset;) {
      uint64_t x = 0x9E3779B97F4A7C15ull * (c + 1);
      for (uint64_t& w : buf) {  // splitmix64
        x += 0x9E3779B97F4A7C15ull;
        uint64_t z = x;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        w = z ^ (z >> 31);
      }
      const uint64_t len = std::min(chunk, offset - c * chunk);
      if (::pwrite(fd, buf.data(), len, static_cast<off_t>(data_start + c * chunk)) != static_cast<ssize_t>(len)) {
        failed = true;
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned i = 0; i < threads; ++i) pool.emplace_back(work);
  for (std::thread& t : pool) t.join();
  ::close(fd);
  if (failed) return Fail(Status::IOError(out + ": write failed (disk full?)"));
  std::printf("generated %s: %zu tensors, %llu layers, %.3f GiB\n", out.c_str(), tensors.size(),
              static_cast<unsigned long long>(layers), static_cast<double>(total) / (1 << 30));
  return 0;
}

// ---- ceiling -----------------------------------------------------------

// Fails with the call's text and CUDA's error when `err` is not success.
#define BENCH_CUDA(call)                                                                             \
  do {                                                                                               \
    cudaError_t bench_err_ = (call);                                                                 \
    if (bench_err_ != cudaSuccess) {                                                                 \
      return Fail(Status::Internal(std::string(#call) + ": " + cudaGetErrorName(bench_err_) + " (" + \
                                   cudaGetErrorString(bench_err_) + ")"));                           \
    }                                                                                                \
  } while (0)

// One pinned buffer copied to device memory with cudaMemcpyAsync, best of
// `repeat`: what the link can do. Every return code is checked.
int Ceiling(const std::map<std::string, std::string>& f) {
  std::string reason;
  if (CudaDeviceCount(&reason) == 0) return Fail(Status::Unavailable("no CUDA device (" + reason + ")"));
  const size_t bytes = Num(f, "mib", 1024) << 20;
  const int repeat = static_cast<int>(Num(f, "repeat", 5));
  void* host = nullptr;
  void* dev = nullptr;
  cudaStream_t s = nullptr;
  BENCH_CUDA(cudaHostAlloc(&host, bytes, cudaHostAllocPortable));
  BENCH_CUDA(cudaMalloc(&dev, bytes));
  std::memset(host, 1, bytes);
  BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  BENCH_CUDA(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, s));  // warm-up
  BENCH_CUDA(cudaStreamSynchronize(s));
  double best = 1e9;
  for (int i = 0; i < repeat; ++i) {
    auto t0 = Clock::now();
    BENCH_CUDA(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, s));
    BENCH_CUDA(cudaStreamSynchronize(s));
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  Result("pinned_h2d_ceiling", bytes, best, "(best of " + std::to_string(repeat) + ")");
  BENCH_CUDA(cudaStreamDestroy(s));
  BENCH_CUDA(cudaFree(dev));
  BENCH_CUDA(cudaFreeHost(host));
  return 0;
}

// ---- readfile ----------------------------------------------------------

// Reads the whole file with one thread of sequential 16 MiB preads into
// one buffer: the host-side baseline when no GPU is present.
int ReadFile(const std::map<std::string, std::string>& f) {
  const std::string file = Str(f, "file", "");
  auto source = OpenLocalFile(file);
  if (!source.ok()) return Fail(source.status());
  std::vector<char> buf(16 << 20);
  const int repeat = static_cast<int>(Num(f, "repeat", 3));
  double best = 1e9;
  for (int i = 0; i < repeat; ++i) {
    auto t0 = Clock::now();
    for (uint64_t off = 0; off < (*source)->Size(); off += buf.size()) {
      const size_t len = static_cast<size_t>(std::min<uint64_t>(buf.size(), (*source)->Size() - off));
      Status s = ReadExactly(**source, off, len, buf.data());
      if (!s.ok()) return Fail(s);
    }
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  Result("sequential_pread_1_thread", (*source)->Size(), best, "(best of " + std::to_string(repeat) + ")");
  return 0;
}

// ---- load --------------------------------------------------------------

int Load(const std::map<std::string, std::string>& f) {
  const std::string file = Str(f, "file", "");
  const std::string mode = Str(f, "mode", "whole");
  const std::string engine = Str(f, "engine", "cuda");
  const int world = static_cast<int>(Num(f, "world", 8));
  const int rank = static_cast<int>(Num(f, "rank", 0));
  const int repeat = static_cast<int>(Num(f, "repeat", 3));

  LoaderOptions o;
  o.staging_buffer_bytes = Num(f, "staging-mib", 16) << 20;
  o.staging_buffer_count = static_cast<int>(Num(f, "staging-count", 8));
  o.reader_threads = static_cast<int>(Num(f, "threads", 0));
  o.max_read_gap_bytes = Num(f, "gap", o.max_read_gap_bytes);
  o.gather_kernel_max_width = Num(f, "gather", 0);
  o.direct_io = f.count("direct") > 0;
  o.synchronize = true;

  // End to end, each run from nothing: open the source, make the loader
  // (its pinned staging), allocate the destination, load, synchronise.
  double best = 1e9, sum = 0;
  LoadStats stats;
  uint64_t payload = 0;
  for (int i = 0; i < repeat; ++i) {
    auto t0 = Clock::now();
    auto source = TensorSource::Open(file);
    if (!source.ok()) return Fail(source.status());
    auto loader = engine == "host" ? NewHostLoader(o) : NewCudaLoader(o);
    if (!loader.ok()) return Fail(loader.status());
    // Requests and their packed layout in one destination allocation.
    std::vector<LoadRequest> requests;
    std::vector<uint64_t> offsets;
    uint64_t total = 0;
    for (const TensorInfo& t : (*source)->tensors()) {
      std::vector<SliceItem> items;
      if (mode != "whole") {
        if (t.shape.size() != 2) continue;  // shards cover the 2-D tensors
        auto shard = ShardSlice(t.shape, mode == "rows" ? 0 : -1, rank, world);
        if (!shard.ok()) return Fail(shard.status());
        items = *shard;
      }
      auto plan = PlanTensorSlice(**source, t.name, items);
      if (!plan.ok()) return Fail(plan.status());
      total = (total + 255) / 256 * 256;
      offsets.push_back(total);
      requests.push_back({t.name, items, nullptr, static_cast<size_t>(plan->result_bytes)});
      total += plan->result_bytes;
    }
    auto dst = (*loader)->Allocate(static_cast<size_t>(std::max<uint64_t>(total, 1)));
    if (!dst.ok()) return Fail(dst.status());
    for (size_t k = 0; k < requests.size(); ++k) requests[k].dst = static_cast<char*>(dst->data()) + offsets[k];
    Status s = (*loader)->LoadBatchInto(**source, requests);  // synchronize: bytes in place on return
    if (!s.ok()) return Fail(s);
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::min(best, dt);
    sum += dt;
    stats = (*loader)->last_stats();
    payload = 0;
    for (const LoadRequest& r : requests) payload += r.capacity;
  }
  char extra[320];
  std::snprintf(extra, sizeof extra,
                "(end to end, best of %d, mean %.4f s; staging %llu MiB; read %.3f GiB in %llu fills, %llu reads, "
                "%llu 2-D copies)",
                repeat, sum / repeat,
                static_cast<unsigned long long>(o.staging_buffer_bytes * static_cast<uint64_t>(o.staging_buffer_count) >> 20),
                static_cast<double>(stats.bytes_read) / (1 << 30),
                static_cast<unsigned long long>(stats.fills), static_cast<unsigned long long>(stats.reads),
                static_cast<unsigned long long>(stats.copies_2d));
  Result(Str(f, "name", "stfs_" + engine + "_" + mode), payload, best, extra);
  return 0;
}

}  // namespace
}  // namespace stfs::gpu

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: stfs_gpu_bench generate|ceiling|readfile|load [--flags]\n");
    return 2;
  }
  const std::string cmd = argv[1];
  auto flags = stfs::gpu::ParseFlags(argc, argv, 2);
  if (cmd == "generate") return stfs::gpu::Generate(flags);
  if (cmd == "ceiling") return stfs::gpu::Ceiling(flags);
  if (cmd == "load") return stfs::gpu::Load(flags);
  if (cmd == "readfile") return stfs::gpu::ReadFile(flags);
  std::fprintf(stderr, "unknown command %s\n", cmd.c_str());
  return 2;
}
