// S3rverServer and S3Request (see s3_server.h).
#include "tests/remote/s3_server.h"

#include <curl/curl.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "core/remote/s3_signing.h"
#include "tests/remote/test_servers.h"

namespace stfs::testing {
namespace {

// Runs scripts/s3-test-server.sh install; returns the s3rver path, or "" with
// `why` set.
std::string InstallS3rver(std::string* why) {
  std::string command = std::string(STFS_SOURCE_DIR) + "/scripts/s3-test-server.sh install 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    *why = "cannot run scripts/s3-test-server.sh";
    return "";
  }
  std::string output;
  char buf[512];
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) output += buf;
  int rc = ::pclose(pipe);
  while (!output.empty() && output.back() == '\n') output.pop_back();
  if (rc != 0) {
    *why = "s3rver unavailable: " + output;
    return "";
  }
  size_t last_line = output.rfind('\n');
  return last_line == std::string::npos ? output : output.substr(last_line + 1);
}

size_t AppendBody(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

size_t KeepHeader(char* data, size_t size, size_t count, void* out) {
  std::string line(data, size * count);
  auto* response = static_cast<S3TestResponse*>(out);
  size_t colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    std::string value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ')) value.erase(0, 1);
    while (!value.empty() && (value.back() == '\r' || value.back() == '\n')) value.pop_back();
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (name == "content-range") response->content_range = value;
    if (name == "etag") response->etag = value;
  }
  return size * count;
}

struct PutBody {
  const std::string* bytes;
  size_t offset = 0;
};

size_t ReadPutBody(char* buffer, size_t size, size_t count, void* in) {
  auto* body = static_cast<PutBody*>(in);
  size_t n = std::min(size * count, body->bytes->size() - body->offset);
  std::copy_n(body->bytes->data() + body->offset, n, buffer);
  body->offset += n;
  return n;
}

}  // namespace

std::unique_ptr<S3rverServer> S3rverServer::Start(std::string* skip_reason, std::string* error) {
  std::string why;
  std::string binary = InstallS3rver(&why);
  if (binary.empty()) {
    const char* require = std::getenv("STFS_REQUIRE_S3RVER");
    (require != nullptr && std::string(require) == "1" ? *error : *skip_reason) = why;
    return nullptr;
  }
  std::unique_ptr<S3rverServer> server(new S3rverServer());
  // s3rver makes continuation tokens with DES, which OpenSSL 3 keeps in its
  // legacy provider; without it every truncated listing is a 500.
  ::setenv("NODE_OPTIONS", "--openssl-legacy-provider", 1);
  server->port_ = FreePort();
  server->pid_ = Spawn({binary, "-d", server->dir_.path(), "-p", std::to_string(server->port_), "-a",
                        "127.0.0.1", "--silent"});
  if (server->pid_ < 0) {
    *error = "cannot start " + binary;
    return nullptr;
  }
  for (int i = 0; i < 300; ++i) {  // node takes a moment to start
    if (CanConnect(server->port_)) return server;
    if (Exited(server->pid_)) {
      server->pid_ = -1;
      *error = "s3rver exited at start";
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  *error = "s3rver did not listen within 15 s";
  return nullptr;
}

S3rverServer::~S3rverServer() { Stop(pid_); }

S3Endpoint S3rverServer::endpoint() const {
  return S3Endpoint{"http://127.0.0.1:" + std::to_string(port_), "", S3Addressing::kAuto};
}

S3Credentials S3rverServer::Credentials() { return S3Credentials::Keys("S3RVER", "S3RVER", "", "test"); }

void S3rverServer::CreateBucket(const std::string& bucket) const {
  StatusOr<std::string> url = S3ObjectUrl(endpoint(), bucket, "");
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  S3TestResponse r = S3Request("PUT", *url, endpoint(), Credentials());
  ASSERT_EQ(r.status, 200) << r.body;
}

void S3rverServer::Put(const std::string& bucket, const std::string& key, const std::string& bytes) const {
  StatusOr<std::string> url = S3ObjectUrl(endpoint(), bucket, key);
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  S3TestResponse r = S3Request("PUT", *url, endpoint(), Credentials(), "", bytes);
  ASSERT_EQ(r.status, 200) << key << ": " << r.body;
}

S3TestResponse S3Request(const std::string& method, const std::string& url, const S3Endpoint& endpoint,
                         const S3Credentials& credentials, const std::string& range,
                         const std::string& put_body) {
  S3TestResponse response;
  CURL* curl = curl_easy_init();
  EXPECT_NE(curl, nullptr);
  if (curl == nullptr) return response;
  curl_slist* headers = nullptr;
  for (const std::string& h : S3RequestHeaders(credentials)) headers = curl_slist_append(headers, h.c_str());
  Status signing = ConfigureS3Signing(curl, endpoint, credentials);
  EXPECT_TRUE(signing.ok()) << signing.ToString();
  PutBody put{&put_body};
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, AppendBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response.body);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, KeepHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &response);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 60L);
  if (!range.empty()) curl_easy_setopt(curl, CURLOPT_RANGE, range.c_str());
  if (method == "PUT") {
    curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(curl, CURLOPT_READFUNCTION, ReadPutBody);
    curl_easy_setopt(curl, CURLOPT_READDATA, &put);
    curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(put_body.size()));
  }
  CURLcode rc = curl_easy_perform(curl);
  EXPECT_EQ(rc, CURLE_OK) << curl_easy_strerror(rc) << " for " << url;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  return response;
}

}  // namespace stfs::testing
