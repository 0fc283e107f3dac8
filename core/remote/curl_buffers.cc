// Curl receive buffer pool (see curl_buffers.h).
#include "core/remote/curl_buffers.h"

#include <curl/curl.h>
#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/remote/http_client.h"

namespace stfs {
namespace {

// A request of this size is a receive buffer: libcurl asks for
// CURLOPT_BUFFERSIZE bytes, plus one in some versions.
constexpr size_t kRequestSlack = 8;
bool IsBufferRequest(size_t size) {
  return size >= static_cast<size_t>(kCurlBufferBytes) &&
         size <= static_cast<size_t>(kCurlBufferBytes) + kRequestSlack;
}

// A freed block that can serve any such request, and is not much larger
// (malloc rounds up: a page when it maps the block, 16 bytes otherwise).
bool FitsBuffer(size_t usable) {
  return usable >= static_cast<size_t>(kCurlBufferBytes) + kRequestSlack &&
         usable <= static_cast<size_t>(kCurlBufferBytes) + (16 << 10);
}

struct Pool {
  std::mutex mu;
  void* spare[kPooledCurlBuffers] = {};
  int count = 0;
  std::atomic<uint64_t> reused{0};
};

Pool& ThePool() {
  static Pool* pool = new Pool;  // never destroyed: curl may free after exit handlers run
  return *pool;
}

void* PoolMalloc(size_t size) {
  if (!IsBufferRequest(size)) return std::malloc(size);
  {
    Pool& pool = ThePool();
    std::lock_guard<std::mutex> lock(pool.mu);
    if (pool.count > 0) {
      pool.reused.fetch_add(1, std::memory_order_relaxed);
      return pool.spare[--pool.count];
    }
  }
  // Always the largest size a buffer request may have, so the block fits
  // every later request once freed, whatever malloc rounds to (ASan's
  // malloc_usable_size is the exact size asked for).
  return std::malloc(static_cast<size_t>(kCurlBufferBytes) + kRequestSlack);
}

void PoolFree(void* p) {
  if (p != nullptr && FitsBuffer(malloc_usable_size(p))) {
    Pool& pool = ThePool();
    std::lock_guard<std::mutex> lock(pool.mu);
    if (pool.count < kPooledCurlBuffers) {
      pool.spare[pool.count++] = p;
      return;
    }
  }
  std::free(p);
}

void* PoolRealloc(void* p, size_t size) { return std::realloc(p, size); }
char* PoolStrdup(const char* s) { return ::strdup(s); }
void* PoolCalloc(size_t count, size_t size) { return std::calloc(count, size); }

}  // namespace

bool InitCurlWithBufferPool() {
  static const bool ok = curl_global_init_mem(CURL_GLOBAL_DEFAULT, PoolMalloc, PoolFree,
                                              PoolRealloc, PoolStrdup, PoolCalloc) == CURLE_OK;
  return ok;
}

uint64_t CurlBuffersReused() { return ThePool().reused.load(std::memory_order_relaxed); }

}  // namespace stfs
