// Destination and stream rules (see destination_check.h).
#include "core/cuda/destination_check.h"

#include <cstdio>

namespace stfs::gpu {
namespace {

std::string Hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

}  // namespace

std::string PointerKindName(PointerKind kind) {
  switch (kind) {
    case PointerKind::kUnregistered: return "host memory unknown to CUDA";
    case PointerKind::kHost: return "pinned host memory";
    case PointerKind::kDevice: return "device memory";
    case PointerKind::kManaged: return "managed memory";
  }
  return "memory of an unknown kind";
}

Status CheckDestinationFacts(const void* dst, uint64_t bytes, const PointerFacts& facts, int loader_device) {
  const std::string loader = "cuda:" + std::to_string(loader_device);
  std::string where = "destination " + Hex(dst) + " is " + PointerKindName(facts.kind);
  if (facts.device >= 0 && facts.kind != PointerKind::kUnregistered) {
    where += " of cuda:" + std::to_string(facts.device);
  }
  switch (facts.kind) {
    case PointerKind::kUnregistered:
    case PointerKind::kHost:
      return Status::InvalidArgument(where + "; the loader bound to " + loader + " writes only device memory of " +
                                     loader + " (or managed memory)");
    case PointerKind::kDevice:
      if (facts.device != loader_device) {
        return Status::InvalidArgument(where + "; the loader is bound to " + loader);
      }
      break;
    case PointerKind::kManaged:
      break;
  }
  if (facts.range_bytes > 0) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(dst);
    if (p < facts.range_start || p - facts.range_start > facts.range_bytes ||
        bytes > facts.range_bytes - (p - facts.range_start)) {
      return Status::InvalidArgument(where + ": " + std::to_string(bytes) + " bytes from it pass the end of its " +
                                     std::to_string(facts.range_bytes) + "-byte allocation");
    }
  }
  return Status::OK();
}

Status CheckStreamDevice(int stream_device, int loader_device) {
  if (stream_device == loader_device) return Status::OK();
  return Status::InvalidArgument("the stream belongs to cuda:" + std::to_string(stream_device) +
                                 " but the loader is bound to cuda:" + std::to_string(loader_device) +
                                 "; pass a stream of cuda:" + std::to_string(loader_device));
}

}  // namespace stfs::gpu
