// HandleTable: the handles an open file or directory gives the kernel.
//
// A FUSE handle (fi->fh) lives from OPEN to RELEASE. When the session ends
// with files still open (SIGTERM, or an unmount while a reader holds a file)
// no RELEASE comes, so a handle owned only by the kernel's number leaked.
// This table owns every live handle: RELEASE removes one, and whatever is
// left goes with the table at the end of the session. One lock per open and
// release; reads use the number alone and never take it.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace stfs {

template <typename T>
class HandleTable {
 public:
  // Takes ownership of `handle`; returns the number to give the kernel.
  uint64_t Add(std::unique_ptr<T> handle) {
    T* raw = handle.get();
    std::lock_guard<std::mutex> lock(mu_);
    live_.emplace(raw, std::move(handle));
    return reinterpret_cast<uint64_t>(raw);
  }

  // Frees the handle numbered `fh` (0 or unknown: nothing).
  void Remove(uint64_t fh) {
    std::unique_ptr<T> gone;  // freed after the lock is dropped
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(reinterpret_cast<T*>(fh));
    if (it == live_.end()) return;
    gone = std::move(it->second);
    live_.erase(it);
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.size();
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<T*, std::unique_ptr<T>> live_;
};

}  // namespace stfs
