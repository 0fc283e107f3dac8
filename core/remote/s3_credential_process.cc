// credential_process runner (see s3_credential_process.h). posix_spawnp,
// not a shell: the AWS CLI runs the split command directly too, and no
// shell means no second round of quoting to get wrong.
#include "core/remote/s3_credential_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "core/remote/s3_credential_json.h"

extern char** environ;

namespace stfs {
namespace {

constexpr size_t kMaxOutputBytes = 64 << 10;

using Clock = std::chrono::steady_clock;

std::string Seconds(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + " s";
  return std::to_string(d.count()) + " ms";
}

// Waits for `pid` until `deadline`; returns its wait status, or -1 when it
// is still running then.
int WaitUntil(pid_t pid, Clock::time_point deadline) {
  for (;;) {
    int status = 0;
    pid_t got = ::waitpid(pid, &status, WNOHANG);
    if (got == pid) return status;
    if (got < 0 && errno != EINTR) return 0;  // already reaped elsewhere: nothing to report
    if (Clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void KillGroup(pid_t pid) {
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

StatusOr<std::vector<std::string>> SplitCommandLine(std::string_view command) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < command.size(); ++i) {
    char c = command[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else if (c == '\'') {
      size_t end = command.find('\'', i + 1);
      if (end == std::string_view::npos) return Status::InvalidArgument("unterminated ' quote");
      word.append(command.substr(i + 1, end - i - 1));
      i = end;
      in_word = true;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < command.size() && command[j] != '"'; ++j) {
        // Inside "...", a backslash escapes only these (POSIX shell rules).
        if (command[j] == '\\' && j + 1 < command.size() && std::strchr("\\\"$`\n", command[j + 1])) ++j;
        word.push_back(command[j]);
      }
      if (j >= command.size()) return Status::InvalidArgument("unterminated \" quote");
      i = j;
      in_word = true;
    } else if (c == '\\') {
      if (i + 1 < command.size()) word.push_back(command[++i]);
      in_word = true;
    } else {
      word.push_back(c);
      in_word = true;
    }
  }
  if (in_word) words.push_back(std::move(word));
  if (words.empty()) return Status::InvalidArgument("empty command");
  return words;
}

StatusOr<S3Credentials> RunCredentialProcess(const std::string& command, const std::string& origin,
                                             std::chrono::milliseconds timeout, const std::atomic<bool>* cancel) {
  StatusOr<std::vector<std::string>> argv = SplitCommandLine(command);
  if (!argv.ok()) return Status::InvalidArgument(origin + ": " + argv.status().message());
  std::vector<char*> args;
  for (std::string& a : *argv) args.push_back(a.data());
  args.push_back(nullptr);

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return Status::IOError(origin + ": pipe: " + std::strerror(errno));
  Fd out{pipe_fds[0]};
  Fd child_out{pipe_fds[1]};

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, child_out.fd, 1);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group (killed as a whole), default signals, nothing
  // blocked: the daemon's threads may block signals the helper relies on.
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int s : {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaddset(&defaults, s);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  int spawn_error = ::posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(child_out.fd);
  child_out.fd = -1;
  if (spawn_error != 0) {
    return Status::IOError(origin + ": cannot run '" + (*argv)[0] + "': " + std::strerror(spawn_error));
  }

  const Clock::time_point deadline = Clock::now() + timeout;
  std::string output;
  char buffer[4096];
  for (;;) {
    if (cancel && cancel->load()) {
      KillGroup(pid);
      return Status::IOError(origin + ": cancelled");
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      KillGroup(pid);
      return Status::IOError(origin + ": no answer within " + Seconds(timeout) + " (killed)");
    }
    pollfd p{out.fd, POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 100)));
    if (ready < 0 && errno != EINTR) {
      KillGroup(pid);
      return Status::IOError(origin + ": poll: " + std::strerror(errno));
    }
    if (ready <= 0) continue;
    ssize_t n = ::read(out.fd, buffer, sizeof buffer);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;  // EOF (or an error: judged by the exit status and JSON)
    if (output.size() + static_cast<size_t>(n) > kMaxOutputBytes) {
      KillGroup(pid);
      return Status::IOError(origin + ": more than 64 KiB of output (killed)");
    }
    output.append(buffer, static_cast<size_t>(n));
  }
  // Output closed: the command should be exiting; it still gets the deadline.
  int status = WaitUntil(pid, deadline);
  if (status == -1) {
    KillGroup(pid);
    return Status::IOError(origin + ": did not exit within " + Seconds(timeout) + " (killed)");
  }
  if (WIFSIGNALED(status)) {
    return Status::IOError(origin + ": killed by signal " + std::to_string(WTERMSIG(status)) +
                           " (its output is not shown)");
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    return Status::IOError(origin + ": exited with status " + std::to_string(WEXITSTATUS(status)) +
                           " (its output is not shown; run it yourself to see why)");
  }
  return ParseS3CredentialJson(output, S3CredentialJsonFormat::kProcess, origin);
}

}  // namespace stfs
