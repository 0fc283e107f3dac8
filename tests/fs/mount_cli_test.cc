// The stfs command around the mount: background readiness, foreground mode
// and its signals, two mounts of one file, `stfs inspect` (table and JSON),
// --help and --version.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "tests/fs/mount_harness.h"

namespace stfs::testing {
namespace {

using Mount = MountTest;

TEST_F(Mount, BackgroundModeReturnsOnlyOnceTheMountAnswers) {
  std::vector<TestTensor> tensors = {{"w", DType::F32, {4}, ""}};
  std::string mnt = MountFile(WriteSource(BuildSafetensors(tensors)));
  ASSERT_FALSE(mnt.empty());
  // No retry, no sleep: the mount must already serve when stfs returns.
  struct stat st;
  ASSERT_EQ(::stat(mnt.c_str(), &st), 0) << std::strerror(errno);
  EXPECT_EQ(st.st_ino, 1u);
  EXPECT_EQ(ReadWholeFile(mnt + "/w/data"), tensors[0].bytes);
  // The daemon outlives the command, alone (fusermount3's auto_unmount
  // helper waits beside it, outside our count).
  EXPECT_EQ(ProcessesWithArgument(mnt, "stfs").size(), 1u);
}

// Runs `stfs -f` and stops it with `signal`; it must exit 0 and unmount.
void ForegroundStopsCleanlyOn(MountTest* test, int signal) {
  std::vector<TestTensor> tensors = {{"w", DType::F32, {1024}, ""}};
  std::string src = test->WriteSource(BuildSafetensors(tensors));
  std::string mnt = test->NewMountpoint();
  std::string log = test->dir_.path() + "/foreground.log";
  int pid = Spawn({StfsBinary(), "-f", src, mnt}, log);
  ASSERT_GT(pid, 0);
  if (!WaitForMount(mnt, 10000)) {
    ::kill(pid, SIGKILL);
    WaitForExit(pid, 5000);
    FAIL() << "foreground stfs did not mount within 10 s: " << ReadWholeFile(log);
  }
  EXPECT_EQ(ReadWholeFile(mnt + "/w/data"), tensors[0].bytes);
  ASSERT_EQ(::kill(pid, signal), 0);
  int code = WaitForExit(pid, 10000);
  EXPECT_EQ(code, 0) << "stfs -f after signal " << signal << ": " << ReadWholeFile(log);
  EXPECT_FALSE(IsMounted(mnt)) << "stfs -f left its mount behind after signal " << signal;
}

TEST_F(Mount, ForegroundModeUnmountsCleanlyOnSigterm) { ForegroundStopsCleanlyOn(this, SIGTERM); }

TEST_F(Mount, ForegroundModeUnmountsCleanlyOnSigint) { ForegroundStopsCleanlyOn(this, SIGINT); }

TEST_F(Mount, DaemonExitsWhenUnmounted) {
  std::vector<TestTensor> tensors = {{"w", DType::U8, {4}, ""}};
  std::string mnt = MountFile(WriteSource(BuildSafetensors(tensors)));
  ASSERT_FALSE(mnt.empty());
  ASSERT_EQ(ProcessesWithArgument(mnt, "stfs").size(), 1u);
  ASSERT_TRUE(Unmount(mnt));
  for (int i = 0; i < 100 && !ProcessesWithArgument(mnt).empty(); ++i) ::usleep(50000);
  EXPECT_TRUE(ProcessesWithArgument(mnt).empty()) << "the daemon is still running after fusermount3 -u";
}

TEST_F(Mount, OneFileMountsTwiceIndependently) {
  std::vector<TestTensor> tensors = {{"w", DType::F32, {64}, ""}};
  std::string src = WriteSource(BuildSafetensors(tensors));
  std::string first = MountFile(src);
  std::string second = MountFile(src, {"-o", "read_reply=fd"});
  ASSERT_FALSE(first.empty());
  ASSERT_FALSE(second.empty());
  EXPECT_EQ(ReadWholeFile(first + "/w/data"), tensors[0].bytes);
  EXPECT_EQ(ReadWholeFile(second + "/w/data"), tensors[0].bytes);
  ASSERT_TRUE(Unmount(first));
  EXPECT_EQ(ReadWholeFile(second + "/w/data"), tensors[0].bytes);
}

TEST_F(Mount, MountingOverAnExistingMountIsRefusedOrStacksCleanly) {
  // A second stfs on a busy mount point must not hang; whatever it decides,
  // teardown must be able to remove everything.
  std::vector<TestTensor> tensors = {{"w", DType::U8, {4}, ""}};
  std::string src = WriteSource(BuildSafetensors(tensors));
  std::string mnt = MountFile(src);
  ASSERT_FALSE(mnt.empty());
  CommandResult again = RunStfs({src, mnt}, 20000);
  EXPECT_FALSE(again.timed_out);
  if (again.exit_code == 0) {  // stacked: remove the top one only
    EXPECT_EQ(RunCommand({"fusermount3", "-u", mnt}).exit_code, 0);
  }
  EXPECT_EQ(ReadWholeFile(mnt + "/w/data"), tensors[0].bytes);
}

// A file to inspect: a real fixture when present, else a generated one.
std::string InspectSubject(MountTest* test, std::vector<std::string>* names) {
  const std::string fixture = RealFixturesDir() + "/small_custom_metadata.safetensors";
  if (::access(fixture.c_str(), R_OK) == 0) {
    std::string bytes = ReadWholeFile(fixture);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
    const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
    for (const auto& [name, info] : header.items()) {
      if (name != "__metadata__") names->push_back(name);
    }
    return fixture;
  }
  std::vector<TestTensor> tensors = {{"emb", DType::F16, {10, 4}, ""}, {"a/b", DType::I8, {3}, ""}};
  for (const TestTensor& t : tensors) names->push_back(t.name);
  return test->WriteSource(BuildSafetensors(tensors, R"({"version":"1.0"})"));
}

TEST_F(Mount, InspectPrintsEveryTensorAndTotals) {
  std::vector<std::string> names;
  std::string src = InspectSubject(this, &names);
  CommandResult r = RunStfs({"inspect", src});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  for (const std::string& name : names) EXPECT_NE(r.out.find(name), std::string::npos) << name;
  EXPECT_NE(Lower(r.out).find("tensors"), std::string::npos) << r.out;
  EXPECT_NE(Lower(r.out).find("parameters"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(std::to_string(names.size())), std::string::npos) << r.out;
}

TEST_F(Mount, InspectJsonIsParseableAndMatchesTheHeader) {
  std::vector<std::string> names;
  std::string src = InspectSubject(this, &names);
  CommandResult r = RunStfs({"inspect", src, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string out_path = WriteSource(r.out, "inspect.json");
  CommandResult py = RunCommand({"python3", "-c", "import json,sys; json.load(open(sys.argv[1]))", out_path});
  EXPECT_EQ(py.exit_code, 0) << py.err;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  ASSERT_TRUE(j.is_object());
  ASSERT_TRUE(j.contains("tensors"));
  std::vector<std::string> listed;
  for (const auto& t : j["tensors"]) {
    listed.push_back(t["name"].get<std::string>());
    EXPECT_EQ(t["directory"].get<std::string>(), ExpectedDirName(t["name"].get<std::string>()));
  }
  std::sort(listed.begin(), listed.end());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(listed, names);
}

TEST_F(Mount, HelpAndVersionSucceed) {
  CommandResult help = RunStfs({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("usage"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("inspect"), std::string::npos) << help.out;
  CommandResult version = RunStfs({"--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out.rfind("stfs ", 0), 0u) << version.out;
}

}  // namespace
}  // namespace stfs::testing
