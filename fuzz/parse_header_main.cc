// stfs-parse-header: reads the header of each FILE with ReadHeader and prints
// how long it took, what it found and the process's peak RSS, one line per
// file. The parse tool of scripts/bench-local.sh's header section; it prints
// no per-tensor output so the figure is the parse alone.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "core/header.h"

namespace {

// Returns the process's peak resident set (VmHWM) in KiB, or 0.
long PeakRssKib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: stfs-parse-header FILE...\n");
    return 2;
  }
  int failures = 0;
  for (int i = 1; i < argc; ++i) {
    const auto start = std::chrono::steady_clock::now();
    auto source = stfs::OpenLocalFile(argv[i]);
    stfs::StatusOr<stfs::Header> header =
        source.ok() ? stfs::ReadHeader(**source) : stfs::StatusOr<stfs::Header>(source.status());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (header.ok()) {
      std::printf("%s: ok %.3f s, %zu tensors, %zu metadata keys, header %llu bytes, peak RSS %ld KiB\n", argv[i],
                  seconds, header->tensors.size(), header->metadata.size(),
                  static_cast<unsigned long long>(header->header_size), PeakRssKib());
    } else {
      ++failures;
      std::printf("%s: refused %.3f s, peak RSS %ld KiB: %s\n", argv[i], seconds, PeakRssKib(),
                  header.status().message().c_str());
    }
  }
  return failures ? 1 : 0;
}
