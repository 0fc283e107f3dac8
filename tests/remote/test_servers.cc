// NginxServer and FaultProxy (see test_servers.h).
#include "tests/remote/test_servers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace stfs::testing {

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

namespace {

// Splits a log line on spaces, keeping "..." quoted fields whole (quotes dropped).
std::vector<std::string> SplitLogLine(const std::string& line) {
  std::vector<std::string> fields;
  std::string cur;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') {
      quoted = !quoted;
    } else if (c == ' ' && !quoted) {
      fields.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  fields.push_back(cur);
  return fields;
}

}  // namespace

// Returns a port nothing listens on right now (the OS picks it).
int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

bool CanConnect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

pid_t Spawn(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  if (::posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ) != 0) return -1;
  return pid;
}

bool Exited(pid_t pid) {
  int status = 0;
  return ::waitpid(pid, &status, WNOHANG) == pid;
}

void Stop(pid_t pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGTERM);
  for (int i = 0; i < 200; ++i) {
    if (Exited(pid)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

std::string HttpGet(int port, const std::string& path_and_query) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return "";
  }
  std::string request = "GET " + path_and_query + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string response;
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    response.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

std::unique_ptr<NginxServer> NginxServer::Start(const std::string& root, std::string* error) {
  if (::access(kNginxBinary, X_OK) != 0) {
    *error = std::string(kNginxBinary) +
             " not found: run scripts/setup.sh (installs nginx-light) before the remote tests";
    return nullptr;
  }
  std::unique_ptr<NginxServer> server(new NginxServer());
  const std::string& dir = server->dir_.path();
  const std::string testdata = std::string(STFS_SOURCE_DIR) + "/tests/remote/testdata";
  for (int attempt = 0; attempt < 5; ++attempt) {
    int port = FreePort();
    int tls_port = FreePort();
    std::ofstream conf(dir + "/nginx.conf", std::ios::trunc);
    conf << "daemon off;\n"
            "master_process off;\n"
            "worker_processes 1;\n"
            "pid " << dir << "/nginx.pid;\n"
            "error_log " << dir << "/error.log warn;\n"
            "events { worker_connections 512; }\n"
            "http {\n"
            "  log_format stfs '$request_method \"$request_uri\" $status \"$http_range\" "
            "$body_bytes_sent \"$http_authorization\" \"$http_if_match\" \"$http_x_test\"';\n"
            "  access_log " << dir << "/access.log stfs;\n"
            "  client_body_temp_path " << dir << "/client_body;\n"
            "  proxy_temp_path " << dir << "/proxy;\n"
            "  fastcgi_temp_path " << dir << "/fastcgi;\n"
            "  uwsgi_temp_path " << dir << "/uwsgi;\n"
            "  scgi_temp_path " << dir << "/scgi;\n"
            "  default_type application/octet-stream;\n"
            "  sendfile on;\n"
            "  keepalive_requests 1000000;\n"
            "  keepalive_timeout 120s;\n"
            "  server {\n"
            "    listen 127.0.0.1:" << port << ";\n"
            "    listen 127.0.0.1:" << tls_port << " ssl;\n"
            "    ssl_certificate " << testdata << "/localhost.crt;\n"
            "    ssl_certificate_key " << testdata << "/localhost.key;\n"
            "    root " << root << ";\n"
            "    location /redirect/ { rewrite ^/redirect/(.*)$ /$1 redirect; }\n"
            "    location /loop/ { return 302 /loop/; }\n"
            "    location ~ ^/to_http/(.*)$ { return 302 http://127.0.0.1:" << port << "/$1; }\n"
            "    location /hub/ { rewrite ^/hub/[^/]+/[^/]+/resolve/[^/]+/(.*)$ /$1 redirect; }\n"
            "  }\n"
            "}\n";
    conf.close();
    pid_t pid = Spawn({kNginxBinary, "-e", dir + "/error.log", "-p", dir + "/", "-c",
                       dir + "/nginx.conf"});
    if (pid < 0) {
      *error = "could not start " + std::string(kNginxBinary);
      return nullptr;
    }
    bool up = false;
    for (int i = 0; i < 500 && !up; ++i) {
      if (CanConnect(port)) {
        up = true;
      } else if (Exited(pid)) {
        pid = -1;
        break;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    if (up) {
      server->pid_ = pid;
      server->port_ = port;
      server->tls_port_ = tls_port;
      return server;
    }
    Stop(pid);
    *error = "nginx did not start: " + ReadText(dir + "/error.log");
  }
  return nullptr;
}

NginxServer::~NginxServer() { Stop(pid_); }

std::string NginxServer::Url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + path;
}

std::string NginxServer::TlsUrl(const std::string& path) const {
  return "https://127.0.0.1:" + std::to_string(tls_port_) + path;
}

std::string TestCertificate() {
  return std::string(STFS_SOURCE_DIR) + "/tests/remote/testdata/localhost.crt";
}

std::vector<LoggedRequest> NginxServer::Requests() const {
  std::vector<LoggedRequest> out;
  std::istringstream lines(ReadText(dir_.path() + "/access.log"));
  std::string line;
  while (std::getline(lines, line)) {
    std::vector<std::string> f = SplitLogLine(line);
    if (f.size() < 8) continue;
    LoggedRequest r;
    r.method = f[0];
    r.uri = f[1];
    r.status = std::atoi(f[2].c_str());
    r.range = f[3];
    // nginx writes '"' inside logged values as \x22.
    for (std::string* v : {&f[5], &f[6], &f[7]}) {
      for (size_t at; (at = v->find("\\x22")) != std::string::npos;) v->replace(at, 4, "\"");
    }
    r.bytes = std::strtoull(f[4].c_str(), nullptr, 10);
    r.authorization = f[5];
    r.if_match = f[6];
    r.x_test = f[7];
    out.push_back(r);
  }
  return out;
}

void NginxServer::ClearLog() const {
  // nginx logs a request just after its last byte leaves: let it finish.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // nginx appends with O_APPEND, so truncating in place is safe.
  ::truncate((dir_.path() + "/access.log").c_str(), 0);
}

std::unique_ptr<FaultProxy> FaultProxy::Start(const std::string& upstream, std::string* error) {
  std::unique_ptr<FaultProxy> proxy(new FaultProxy());
  std::string port_file = proxy->dir_.path() + "/port";
  std::string script = std::string(STFS_SOURCE_DIR) + "/tests/remote/fault_proxy.py";
  pid_t pid = Spawn({"python3", script, upstream, port_file});
  if (pid < 0) {
    *error = "could not start python3 " + script;
    return nullptr;
  }
  proxy->pid_ = pid;
  for (int i = 0; i < 1000; ++i) {
    std::string text = ReadText(port_file);
    if (!text.empty()) {
      proxy->port_ = std::atoi(text.c_str());
      if (CanConnect(proxy->port_)) return proxy;
    }
    if (Exited(pid)) {
      proxy->pid_ = -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  *error = "the fault proxy (" + script + ") did not start";
  return nullptr;
}

FaultProxy::~FaultProxy() { Stop(pid_); }

std::string FaultProxy::Url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + path;
}

std::string FaultProxy::Control(const std::string& path_and_query) const {
  return HttpGet(port_, "/__control__/" + path_and_query);
}

void FaultProxy::Set(const std::string& query) const { Control("set?" + query); }

void FaultProxy::Bump() const { Control("bump"); }

std::string FaultProxy::StatsJson() const { return Control("stats"); }

int FaultProxy::Requests() const {
  std::string body = Control("stats");
  size_t at = body.find("\"requests\":");
  return at == std::string::npos ? -1 : std::atoi(body.c_str() + at + 11);
}

}  // namespace stfs::testing
