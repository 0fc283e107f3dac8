// Destination and stream rules of a loader bound to one device, as pure
// functions of facts the CUDA runtime reports, so they are tested on
// machines without a GPU (the CUDA engine gathers the facts with
// cudaPointerGetAttributes and cudaStreamGetDevice, then asks these).
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace stfs::gpu {

// What the runtime knows of a pointer (cudaMemoryType, and its device).
enum class PointerKind { kUnregistered, kHost, kDevice, kManaged };

struct PointerFacts {
  PointerKind kind = PointerKind::kUnregistered;
  int device = -1;  // the owning device for kDevice / kManaged (managed: may be -1)
  // The allocation holding the pointer, when the driver could say
  // (range_bytes 0: unknown).
  uintptr_t range_start = 0;
  uint64_t range_bytes = 0;
};

// "device memory", "pinned host memory", ... for messages.
std::string PointerKindName(PointerKind kind);

// OK when `bytes` at `dst` may be written by copies queued on `loader_device`:
// device memory of that device, or managed memory; and, when the allocation's
// extent is known, wholly inside it. Otherwise InvalidArgument naming the
// pointer, its kind and device, and the loader's device.
Status CheckDestinationFacts(const void* dst, uint64_t bytes, const PointerFacts& facts, int loader_device);

// OK when a stream of `stream_device` may order a load of `loader_device`;
// InvalidArgument otherwise.
Status CheckStreamDevice(int stream_device, int loader_device);

}  // namespace stfs::gpu
