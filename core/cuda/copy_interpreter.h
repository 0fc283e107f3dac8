// CopyInterpreter: the executable specification of copy programs.
//
// Runs StagingFills on the CPU, with the meaning the engines give them
// (copy_engine.h): reads fill a staging buffer from the file, then each
// StagedCopy writes `height` rows of `width` bytes at `dst + r * dst_pitch`.
// Destination memory is simulated: an address range holding the requests'
// destinations. For every byte a copy writes, the interpreter checks that it
// lies in the destination of the request the copy belongs to, and records
// which request wrote it and how often, so a test can then demand that every
// destination byte was written exactly once, by its owner, with the right
// value, and that no byte outside a destination was touched. It also checks
// that copies only read staging bytes a read filled and that reads stay in
// the staging buffer. Nothing here knows CUDA; tests and the property test
// over random batches drive it (tests/cuda/copy_interpreter_test.cc).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/cuda/copy_program.h"
#include "core/status.h"

namespace stfs::gpu {

// One request's destination: `capacity` bytes at `address`, of which the
// first `result_bytes` must end up written.
struct Destination {
  uint32_t request = 0;
  uintptr_t address = 0;
  uint64_t capacity = 0;
  uint64_t result_bytes = 0;
};

class CopyInterpreter {
 public:
  // Simulated memory covers [base, base + size); every destination must lie
  // inside it and no two may overlap (InvalidArgument otherwise).
  static StatusOr<CopyInterpreter> Create(uintptr_t base, uint64_t size, std::vector<Destination> destinations);

  // Executes one fill against `file` with a staging buffer of `capacity`
  // bytes. Returns Internal naming the first violation (a write outside the
  // copy's own destination, a read of unfilled staging bytes, a read past
  // the buffer or past the end of the file); nothing after it is executed.
  Status Run(const StagingFill& fill, std::string_view file, uint64_t capacity);

  // Checks that each destination's first result_bytes were written exactly
  // once, by its own request, and that nothing else was ever written.
  Status CheckComplete() const;

  // The simulated memory: byte i is at address base + i. Unwritten bytes
  // keep `fill` (Create fills with 0xA5).
  const std::string& memory() const { return memory_; }
  std::string_view Bytes(uintptr_t address, uint64_t length) const;
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  CopyInterpreter() = default;
  // The destination holding [address, address + length), or nullptr.
  const Destination* Owner(uintptr_t address, uint64_t length) const;

  uintptr_t base_ = 0;
  std::string memory_;
  std::vector<Destination> destinations_;  // sorted by address
  std::vector<int64_t> writer_;            // request that last wrote each byte; -1 none
  std::vector<uint32_t> writes_;           // times each byte was written
  uint64_t bytes_written_ = 0;
};

}  // namespace stfs::gpu
