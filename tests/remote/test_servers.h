// Real HTTP servers for the remote tests: Debian's nginx on 127.0.0.1 with a
// generated config in a temp dir, and the project's fault proxy in front of
// it (tests/remote/fault_proxy.py).
//
// nginx missing is a test failure that says to run scripts/setup.sh, never a
// silent skip: without it these tests would prove nothing.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tests/test_files.h"

namespace stfs::testing {

inline constexpr const char* kNginxBinary = "/usr/sbin/nginx";

// One request as nginx logged it.
struct LoggedRequest {
  std::string method;
  std::string uri;
  int status = 0;
  std::string range;          // Range header, "-" when absent
  uint64_t bytes = 0;         // body bytes sent
  std::string authorization;  // Authorization header, "-" when absent
  std::string if_match;       // If-Match header, "-" when absent
  std::string x_test;         // X-Test header, "-" when absent
};

class NginxServer {
 public:
  // Starts nginx serving `root` on a free port; on failure returns null and
  // sets `error`.
  static std::unique_ptr<NginxServer> Start(const std::string& root, std::string* error);
  ~NginxServer();
  NginxServer(const NginxServer&) = delete;
  NginxServer& operator=(const NginxServer&) = delete;

  int port() const { return port_; }
  // Returns http://127.0.0.1:PORT/path.
  std::string Url(const std::string& path) const;
  // Returns https://127.0.0.1:TLS_PORT/path, served with the self-signed
  // certificate TestCertificate() (tests/remote/testdata, test use only).
  std::string TlsUrl(const std::string& path) const;
  // Returns every request logged since the last ClearLog().
  std::vector<LoggedRequest> Requests() const;
  void ClearLog() const;

 private:
  NginxServer() = default;
  TempDir dir_;
  pid_t pid_ = -1;
  int port_ = 0;
  int tls_port_ = 0;
};

// The CA file that verifies NginxServer::TlsUrl.
std::string TestCertificate();

class FaultProxy {
 public:
  // Starts the proxy in front of `upstream` ("http://127.0.0.1:PORT").
  static std::unique_ptr<FaultProxy> Start(const std::string& upstream, std::string* error);
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  std::string Url(const std::string& path) const;
  // Sets a fault (see fault_proxy.py), e.g. "fault=status&status=503&every=2";
  // "fault=none" clears it. Resets the request counter.
  void Set(const std::string& query) const;
  // Makes earlier /signed/ redirect targets expire.
  void Bump() const;
  // Requests forwarded or answered since the last Set().
  int Requests() const;
  // The proxy's counters as JSON: requests, faulted, paths, statuses.
  std::string StatsJson() const;

 private:
  FaultProxy() = default;
  std::string Control(const std::string& path_and_query) const;
  TempDir dir_;
  pid_t pid_ = -1;
  int port_ = 0;
};

// Returns a port nothing listens on right now (the OS picks it), or 0.
int FreePort();
// True when something accepts connections on 127.0.0.1:port.
bool CanConnect(int port);
// Starts argv[0] (searched in PATH) with `argv`; returns its pid or -1.
pid_t Spawn(const std::vector<std::string>& argv);
// True when the child `pid` has exited (and reaps it).
bool Exited(pid_t pid);
// Ends the child `pid`: SIGTERM, then SIGKILL after 2 s; reaps it.
void Stop(pid_t pid);

// Returns the text of the file at `path` ("" when it cannot be read).
std::string ReadText(const std::string& path);

// Sends a GET to 127.0.0.1:port and returns the body ("" on failure).
std::string HttpGet(int port, const std::string& path_and_query);

}  // namespace stfs::testing
