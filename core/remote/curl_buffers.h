// Curl receive buffers, kept for the next transfer instead of freed.
//
// libcurl (7.x) allocates each transfer's receive buffer (CURLOPT_BUFFERSIZE)
// when the transfer starts and frees it when it ends. At 256 KiB that is
// above the daemon's fixed malloc mmap threshold (fs/main.cc), so every
// range request mapped 65 fresh pages and unmapped them again: about 17,000
// page faults per GiB fetched, each zeroing a page, in the kernel's copy
// from the socket. libcurl lets a program supply its allocator
// (curl_global_init_mem); ours hands the buffer of a finished transfer to
// the next one. At most kPooledCurlBuffers are kept (a fixed 2 MiB, enough
// for the default connections plus demand reads); memory beyond goes back
// to malloc as before.
#pragma once

#include <cstdint>

namespace stfs {

inline constexpr int kPooledCurlBuffers = 8;

// curl_global_init with the pooling allocator; once per process (later calls
// do nothing). Returns false when libcurl refused to initialize.
bool InitCurlWithBufferPool();

// Receive buffers handed out again instead of allocated (for tests and stats).
uint64_t CurlBuffersReused();

}  // namespace stfs
