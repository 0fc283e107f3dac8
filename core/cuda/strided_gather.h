// A small kernel that places narrow rows: row r of `width` bytes goes from
// src + r * src_pitch to dst + r * dst_pitch. `src` is a device-visible
// pointer to pinned (mapped) host memory, so the GPU reads only the bytes
// it needs over PCIe, in wide coalesced loads, where cudaMemcpy2DAsync would
// issue one DMA descriptor per row. The only device code in stfs-gpu; it
// must never be handed pageable host memory.
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

namespace stfs::gpu {

// Queues the gather on `stream`; returns the launch error, if any.
cudaError_t LaunchStridedGather(const void* src, size_t src_pitch, void* dst, size_t dst_pitch,
                                size_t width, size_t height, cudaStream_t stream);

}  // namespace stfs::gpu
