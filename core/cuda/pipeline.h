// Pipeline: runs a stream of segments through the staging budget.
//
// Reader threads take the next StagingFill from one FillPlanner, wait until
// their staging buffer's previous copies are done (CopyEngine::WaitLane),
// pread the fill's reads into it and queue its copies on the buffer's lane;
// meanwhile other threads fill other buffers, so reading and copying
// overlap. Host memory is the staging buffers and nothing else: no thread
// ever holds more than one buffer, and buffers are allocated once. Every
// error waits for all the load's queued copies before it is returned.
// Internal to the loader; never blocks on a lane it does not own.
#pragma once

#include <memory>
#include <vector>

#include "core/cuda/copy_engine.h"
#include "core/cuda/copy_program.h"
#include "core/cuda/loader.h"
#include "core/cuda/tensor_source.h"
#include "core/status.h"

namespace stfs::gpu {

// Alignment of direct-I/O reads (offsets, lengths and buffer addresses).
inline constexpr uint64_t kDirectIoAlignment = 4096;

class Pipeline {
 public:
  // Allocates the staging buffers and the engine's lanes.
  static StatusOr<std::unique_ptr<Pipeline>> Create(CopyEngine* engine, const LoaderOptions& options);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Loads `segments` from `source`; adds what it did to `stats`.
  Status Run(const TensorSource& source, SegmentStream* segments, void* stream, LoadStats* stats);

 private:
  Pipeline(CopyEngine* engine, const LoaderOptions& options) : engine_(engine), options_(options) {}

  CopyEngine* const engine_;
  const LoaderOptions options_;
  std::vector<char*> staging_;
  int threads_ = 1;
};

}  // namespace stfs::gpu
