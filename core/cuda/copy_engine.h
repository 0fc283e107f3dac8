// CopyEngine: where staged bytes go, behind one interface.
//
// The loader's pipeline reads source bytes into staging buffers and hands
// each filled buffer to an engine as a list of StagedCopy. The CUDA engine
// turns them into cudaMemcpyAsync / cudaMemcpy2DAsync on one stream per
// lane, with an event per lane; the host engine does the same copies with
// memcpy on a worker thread, so the whole pipeline (planning, threading,
// buffer reuse) runs and is tested on machines without a GPU.
//
// Lanes: the pipeline owns `lanes` staging buffers, one per lane. It calls
// WaitLane before refilling a buffer, so an engine must never let a copy
// read a staging buffer after WaitLane for its lane returned. Enqueue and
// WaitLane for different lanes may come from different threads at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/cuda/copy_program.h"
#include "core/status.h"

namespace stfs::gpu {

class CopyEngine {
 public:
  CopyEngine() = default;
  CopyEngine(const CopyEngine&) = delete;
  CopyEngine& operator=(const CopyEngine&) = delete;
  virtual ~CopyEngine() = default;

  // Names the engine and its device in messages ("cuda:0", "host").
  virtual const std::string& Describe() const = 0;
  // True when destinations are device memory.
  virtual bool IsDevice() const = 0;

  // Allocates a page-aligned staging buffer (pinned host memory for CUDA).
  virtual StatusOr<char*> AllocateStaging(size_t bytes) = 0;
  virtual void FreeStaging(char* buffer) = 0;

  // Allocates destination memory the library owns (device memory for CUDA).
  virtual StatusOr<void*> AllocateDestination(size_t bytes) = 0;
  virtual void FreeDestination(void* buffer) = 0;

  // Creates the per-lane queues (streams and events). Called once.
  virtual Status SetLanes(int lanes) = 0;
  // Starts a load: later copies are ordered after work already queued on
  // `stream` (a cudaStream_t; nullptr is the default stream).
  virtual Status Begin(void* stream) = 0;
  // Queues `copies` from `staging` on `lane`.
  virtual Status Enqueue(int lane, const char* staging, const StagedCopy* copies, size_t count) = 0;
  // Blocks until every copy queued on `lane` has read its staging bytes.
  virtual Status WaitLane(int lane) = 0;
  // Ends a load: makes `stream` wait for every lane; with `synchronize`,
  // also blocks until all copies are done. Called even after an error.
  virtual Status Finish(void* stream, bool synchronize) = 0;

  // Copies `bytes` from destination memory back to host memory (tests,
  // verification); blocks.
  virtual Status CopyToHost(const void* src, size_t bytes, void* dst) = 0;
};

struct HostEngineOptions {
  // Sleeps this long before each batch of copies: widens the window in
  // which a pipeline that reused a buffer too early would corrupt bytes.
  std::chrono::microseconds copy_delay{0};
};

// Returns an engine whose "device" is host memory.
std::unique_ptr<CopyEngine> NewHostCopyEngine(const HostEngineOptions& options = {});

// Counts staging and destination buffers a host engine has allocated and not
// yet freed, across all host engines (leak tests).
int64_t HostEngineLiveAllocations();

}  // namespace stfs::gpu
