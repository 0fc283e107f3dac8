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
//
// Devices: an engine is bound to one device. Every call that touches CUDA
// makes that device current for its own duration and restores the calling
// thread's device before returning, so callers never see their current
// device change.
//
// Errors drain: Finish(stream, /*synchronize=*/true) returns only once no
// copy queued on any lane can still run (even copies of an Enqueue that
// failed half-way); the pipeline calls it so after any error, and Drain
// before it frees its staging buffers.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/cuda/copy_program.h"
#include "core/cuda/destination_check.h"
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

  // OK when copies may write `bytes` at `dst` (CUDA: device memory of the
  // engine's device, or managed memory); InvalidArgument naming the
  // pointer's kind and device otherwise. Called before anything is written.
  virtual Status CheckDestination(const void* dst, uint64_t bytes) = 0;
  // OK when loads may be ordered on `stream` (CUDA: a stream of the engine's
  // device, or nullptr for the device's default stream).
  virtual Status CheckStream(void* stream) = 0;

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
  // also blocks until all copies are done, and does so even when it then
  // reports an error. Called after every Begin, with synchronize after an
  // error.
  virtual Status Finish(void* stream, bool synchronize) = 0;
  // Blocks until no copy queued on any lane can still run, whatever fails
  // on the way (a failed event wait falls back to draining the lane's
  // queue). Staging buffers are freed only after this.
  virtual void Drain() = 0;

  // Copies `bytes` from destination memory back to host memory (tests,
  // verification); blocks.
  virtual Status CopyToHost(const void* src, size_t bytes, void* dst) = 0;
};

// Faults a host engine injects (tests): the n-th call (0-based) of a kind
// fails; -1 never.
struct HostEngineFaults {
  int64_t fail_enqueue = -1;  // queues the first half of its copies, then fails
  int64_t fail_wait = -1;     // fails at once, without waiting for the lane
  int64_t fail_finish = -1;   // waits as asked, then fails
  // While this holds true, every WaitLane fails at once (a test flips it,
  // e.g. between a load and the loader's teardown).
  std::shared_ptr<std::atomic<bool>> waits_fail;
};

// What a host engine lets a test observe, shared with it.
class HostEngineProbe {
 public:
  // True when `p` lies in a staging buffer that queued copies still read.
  bool StagingBusy(const void* p) const;
  // Batches of copies executed so far.
  int64_t batches_done() const;
  // Staging buffers freed while copies queued from them had not yet run.
  int64_t freed_while_busy() const;

  // Used by the engine.
  void AddStaging(const char* buffer, size_t bytes);
  void RemoveStaging(const char* buffer);
  void MarkBusy(const char* buffer, int delta);
  void BatchDone();

 private:
  struct Buffer {
    const char* begin;
    size_t bytes;
    int busy;
  };
  mutable std::mutex mu_;
  std::vector<Buffer> buffers_;
  int64_t batches_done_ = 0;
  int64_t freed_while_busy_ = 0;
};

struct HostEngineOptions {
  // Sleeps this long before each batch of copies: widens the window in
  // which a pipeline that reused a buffer too early would corrupt bytes.
  std::chrono::microseconds copy_delay{0};
  // Finish without `synchronize` returns at once while copies go on, as
  // on a CUDA stream (tests of the pipeline's draining); otherwise the host
  // engine always finishes its copies before Finish returns.
  bool asynchronous_finish = false;
  HostEngineFaults faults;
  std::shared_ptr<HostEngineProbe> probe;
  // When set, the engine plays a CUDA device of this ordinal for the
  // destination and stream rules: pointer_facts says what each destination
  // is, and a non-null stream is taken to belong to stream_device.
  int simulated_device = -1;
  std::function<PointerFacts(const void*)> pointer_facts;
  int stream_device = 0;
};

// Returns an engine whose "device" is host memory.
std::unique_ptr<CopyEngine> NewHostCopyEngine(const HostEngineOptions& options = {});

// Counts staging and destination buffers a host engine has allocated and not
// yet freed, across all host engines (leak tests).
int64_t HostEngineLiveAllocations();

}  // namespace stfs::gpu
