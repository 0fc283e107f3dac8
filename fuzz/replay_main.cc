// A main() for fuzz targets built without libFuzzer: runs the target once on
// each file named (a directory: on each file in it). The plain and sanitizer
// builds replay the committed corpora (fuzz/corpus/<target>/) this way, so a
// crash once found stays a regression test on every compiler.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

int RunFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
    return 1;
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int failures = 0, runs = 0;
  for (int i = 1; i < argc; ++i) {
    std::filesystem::path path(argv[i]);
    if (std::filesystem::is_directory(path)) {
      for (const auto& entry : std::filesystem::directory_iterator(path)) {
        if (entry.is_regular_file()) { failures += RunFile(entry.path()); ++runs; }
      }
    } else {
      failures += RunFile(path);
      ++runs;
    }
  }
  std::printf("replay: %d inputs, %d unreadable\n", runs, failures);
  return failures == 0 && runs > 0 ? 0 : 1;
}
