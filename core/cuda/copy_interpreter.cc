// The copy-program interpreter (see copy_interpreter.h).
#include "core/cuda/copy_interpreter.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace stfs::gpu {
namespace {

std::string Hex(uintptr_t p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(p));
  return buf;
}

std::string Describe(const StagedCopy& c) {
  return "copy of request " + std::to_string(c.request) + " (" + std::to_string(c.height) + " x " +
         std::to_string(c.width) + " bytes to " + Hex(c.dst) + ", dst pitch " + std::to_string(c.dst_pitch) + ")";
}

}  // namespace

StatusOr<CopyInterpreter> CopyInterpreter::Create(uintptr_t base, uint64_t size,
                                                  std::vector<Destination> destinations) {
  std::sort(destinations.begin(), destinations.end(),
            [](const Destination& a, const Destination& b) { return a.address < b.address; });
  // Empty destinations own no bytes (and may share an address).
  std::erase_if(destinations, [](const Destination& d) { return d.capacity == 0; });
  for (size_t i = 0; i < destinations.size(); ++i) {
    const Destination& d = destinations[i];
    if (d.result_bytes > d.capacity) return Status::InvalidArgument("a destination smaller than its result");
    if (d.address < base || d.address - base + d.capacity > size) {
      return Status::InvalidArgument("destination of request " + std::to_string(d.request) +
                                     " lies outside the simulated memory");
    }
    if (i > 0 && destinations[i - 1].address + destinations[i - 1].capacity > d.address) {
      return Status::InvalidArgument("destinations of requests " + std::to_string(destinations[i - 1].request) +
                                     " and " + std::to_string(d.request) + " overlap");
    }
  }
  CopyInterpreter in;
  in.base_ = base;
  in.memory_.assign(size, '\xa5');
  in.destinations_ = std::move(destinations);
  in.writer_.assign(size, -1);
  in.writes_.assign(size, 0);
  return in;
}

const Destination* CopyInterpreter::Owner(uintptr_t address, uint64_t length) const {
  auto it = std::upper_bound(destinations_.begin(), destinations_.end(), address,
                             [](uintptr_t a, const Destination& d) { return a < d.address; });
  if (it == destinations_.begin()) return nullptr;
  --it;
  if (address - it->address + length > it->capacity) return nullptr;
  return &*it;
}

std::string_view CopyInterpreter::Bytes(uintptr_t address, uint64_t length) const {
  if (address < base_ || address - base_ + length > memory_.size()) return {};
  return std::string_view(memory_).substr(address - base_, length);
}

Status CopyInterpreter::Run(const StagingFill& fill, std::string_view file, uint64_t capacity) {
  std::string staging(capacity, '\xee');
  std::vector<bool> filled(capacity, false);
  for (const StagedRead& r : fill.reads) {
    if (r.staging_offset > capacity || r.length > capacity - r.staging_offset) {
      return Status::Internal("a read of " + std::to_string(r.length) + " bytes at staging offset " +
                              std::to_string(r.staging_offset) + " passes the " + std::to_string(capacity) +
                              "-byte buffer");
    }
    if (r.required > r.length || r.file_offset > file.size() || r.required > file.size() - r.file_offset) {
      return Status::Internal("a read requires bytes past the end of the file (at " +
                              std::to_string(r.file_offset) + ")");
    }
    const uint64_t avail = std::min<uint64_t>(r.length, file.size() - r.file_offset);
    std::memcpy(&staging[r.staging_offset], file.data() + r.file_offset, avail);
    std::fill(filled.begin() + static_cast<std::ptrdiff_t>(r.staging_offset),
              filled.begin() + static_cast<std::ptrdiff_t>(r.staging_offset + r.required), true);
  }
  for (const StagedCopy& c : fill.copies) {
    if (c.height == 0 || c.width == 0) return Status::Internal("an empty " + Describe(c));
    if (c.height > 1 && (c.src_pitch < c.width || c.dst_pitch < c.width)) {
      return Status::Internal("overlapping rows in " + Describe(c));
    }
    for (uint64_t row = 0; row < c.height; ++row) {
      const uint64_t s = c.staging_offset + row * c.src_pitch;
      const uintptr_t d = c.dst + row * c.dst_pitch;
      if (s > capacity || c.width > capacity - s) return Status::Internal(Describe(c) + " reads past the buffer");
      for (uint64_t i = 0; i < c.width; ++i) {
        if (!filled[s + i]) return Status::Internal(Describe(c) + " reads staging bytes no read filled");
      }
      const Destination* owner = Owner(d, c.width);
      if (owner == nullptr || owner->request != c.request) {
        const Destination* hit = Owner(d, 1);
        std::string problem = " lies outside every destination";
        if (hit != nullptr && hit->request == c.request) problem = " runs past the end of its own destination";
        if (hit != nullptr && hit->request != c.request) {
          problem = " lands in the destination of request " + std::to_string(hit->request);
        }
        return Status::Internal(Describe(c) + ": row " + std::to_string(row) + " at " + Hex(d) + problem);
      }
      const uint64_t at = d - base_;
      std::memcpy(&memory_[at], &staging[s], c.width);
      for (uint64_t i = 0; i < c.width; ++i) {
        writer_[at + i] = c.request;
        ++writes_[at + i];
      }
      bytes_written_ += c.width;
    }
  }
  return Status::OK();
}

Status CopyInterpreter::CheckComplete() const {
  uint64_t expected = 0;
  for (const Destination& d : destinations_) {
    const uint64_t at = d.address - base_;
    for (uint64_t i = 0; i < d.result_bytes; ++i) {
      if (writes_[at + i] != 1 || writer_[at + i] != static_cast<int64_t>(d.request)) {
        return Status::Internal("byte " + std::to_string(i) + " of request " + std::to_string(d.request) +
                                "'s destination was written " + std::to_string(writes_[at + i]) + " times");
      }
    }
    expected += d.result_bytes;
  }
  if (bytes_written_ != expected) {
    return Status::Internal(std::to_string(bytes_written_) + " bytes written, " + std::to_string(expected) +
                            " expected (some landed past a result, inside its capacity)");
  }
  return Status::OK();
}

}  // namespace stfs::gpu
