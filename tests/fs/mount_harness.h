// Real-mount test harness: runs the built `stfs` binary on generated or
// fixture files in a fresh temp dir and checks what a user would see.
//
// Every mount a test makes is unmounted in TearDown (fusermount3 -u, retried
// while busy, lazily as a last resort) and the test fails if anything is
// still mounted or a daemon is still running afterwards. Nothing here links
// the filesystem code: expected directory names are computed from the rule
// text (ExpectedDirName), independently of fs/name_encoding.cc.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/test_files.h"

namespace stfs::testing {

struct CommandResult {
  int exit_code = -1;  // exit status; 128+N when killed by signal N; -1 when it could not run
  bool timed_out = false;
  std::string out;
  std::string err;
};

// Runs `argv` (no shell) with stdin from /dev/null, capturing stdout and
// stderr; kills it after `timeout_ms`.
CommandResult RunCommand(const std::vector<std::string>& argv, int timeout_ms = 30000);

// Paths the tests need: the stfs binary ($STFS_TEST_BINARY, else the one
// built with the tests), the python3 helpers next to the tests, and the
// shared real-world fixtures (may be absent).
std::string StfsBinary();
std::string HelperScript(const std::string& name);
std::string RealFixturesDir();
// The python3 that has numpy: /usr/bin/python3 (python3-numpy, installed by
// scripts/setup.sh) when it exists, else "python3" from PATH.
std::string NumpyPython();

// Returns the mount points listed in /proc/self/mountinfo (unescaped).
std::vector<std::string> MountPoints();
// Returns true when the directory `path` (resolved) is a mount point.
bool IsMounted(const std::string& path);
// Returns "MAJ:MIN" of the mount at `path`, or "" when none.
std::string MountDevice(const std::string& path);

// Unmounts `path`: fusermount3 -u, retried while busy, then -z; returns
// true when nothing is mounted there afterwards.
bool Unmount(const std::string& path);

// Returns the pids of processes whose command line has `arg` as an argument
// (and, when `program` is given, whose argv[0] has that base name).
std::vector<int> ProcessesWithArgument(const std::string& arg, const std::string& program = "");

// Lists a directory with opendir/readdir: names sorted, "." and ".." kept
// out unless `with_dots`.
std::vector<std::string> ListDir(const std::string& path, bool with_dots = false);

// Splits text into lines (without the newlines; a final partial line kept).
std::vector<std::string> Lines(const std::string& text);

// The directory name rule of the README, written from its text: in every
// name '%', '/', 0x00-0x1F, 0x7F become %XX, "." / ".." get %2E per dot,
// "" is "%", and over 255 bytes keeps at most 200 bytes (whole UTF-8
// sequences and escapes) + '~' + 16 hex digits of FNV-1a-64(name).
std::string ExpectedDirName(const std::string& tensor_name);
uint64_t Fnv1a64Reference(const std::string& bytes);

// Lowercases ASCII.
std::string Lower(std::string s);

// Renders a shape the way `shape` files hold it, without the newline: "[3,5]".
std::string ShapeJson(const std::vector<uint64_t>& shape);

// Checks that the root of `mnt` lists exactly one directory per tensor
// (named by ExpectedDirName) plus __metadata__ and __stats__, no duplicates.
void ExpectRootListing(const std::string& mnt, const std::vector<TestTensor>& tensors);

// Checks a tensor's directory: listing {data, dtype, shape}, their contents,
// and every byte and the st_size of `data`.
void ExpectTensorServed(const std::string& mnt, const TestTensor& tensor);

// Starts `argv` in the background with stdout and stderr appended to
// `output_path`; returns its pid (or -1).
int Spawn(const std::vector<std::string>& argv, const std::string& output_path);
// Waits up to `timeout_ms` for `pid` to exit; returns its exit code (128+N
// for signal N), or -1 on timeout (the process is then killed).
int WaitForExit(int pid, int timeout_ms);
// Waits up to `timeout_ms` until `mnt` is mounted and its root answers a stat.
bool WaitForMount(const std::string& mnt, int timeout_ms);

// Base fixture: a temp dir for sources and mount points, and teardown that
// leaves nothing mounted.
class MountTest : public ::testing::Test {
 protected:
  // Skips (with a message) only on a machine with no /dev/fuse at all.
  void SetUp() override;
  void TearDown() override;

 public:  // shared with helper functions in the tests

  // Writes `bytes` as a source file in the temp dir; returns its path.
  std::string WriteSource(const std::string& bytes, const std::string& name = "model.safetensors");
  // Makes a fresh empty directory for a mount and registers it for teardown.
  std::string NewMountpoint();
  // Runs `stfs ARGS...` (the mountpoint, if any, must come from NewMountpoint).
  CommandResult RunStfs(const std::vector<std::string>& args, int timeout_ms = 30000);
  // Mounts `source` with `options` (e.g. {"-o", "read_reply=fd"}); returns
  // the mount point, or "" after recording a failure.
  std::string MountFile(const std::string& source, const std::vector<std::string>& options = {});

  TempDir dir_;
  std::vector<std::string> mountpoints_;
  int mount_counter_ = 0;
};

}  // namespace stfs::testing
