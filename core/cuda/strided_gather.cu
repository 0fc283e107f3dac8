// The strided gather kernel (see strided_gather.h). Each thread moves one
// word; the word is the widest of 16, 8, 4 or 1 bytes that divides the
// width, both pitches and both addresses, so rows stay coalesced.
#include "core/cuda/strided_gather.h"

#include <cstdint>

namespace stfs::gpu {
namespace {

template <typename Word>
__global__ void StridedGatherKernel(const unsigned char* src, size_t src_pitch, unsigned char* dst,
                                    size_t dst_pitch, size_t words_per_row, size_t total_words) {
  const size_t step = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total_words; i += step) {
    const size_t row = i / words_per_row;
    const size_t col = i - row * words_per_row;
    const Word* s = reinterpret_cast<const Word*>(src + row * src_pitch) + col;
    Word* d = reinterpret_cast<Word*>(dst + row * dst_pitch) + col;
    *d = *s;
  }
}

template <typename Word>
cudaError_t Launch(const void* src, size_t src_pitch, void* dst, size_t dst_pitch, size_t width,
                   size_t height, cudaStream_t stream) {
  const size_t words_per_row = width / sizeof(Word);
  const size_t total = words_per_row * height;
  constexpr unsigned kThreads = 256;
  size_t blocks = (total + kThreads - 1) / kThreads;
  if (blocks > 4096) blocks = 4096;  // grid-stride beyond this
  StridedGatherKernel<Word><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<const unsigned char*>(src), src_pitch, static_cast<unsigned char*>(dst), dst_pitch,
      words_per_row, total);
  return cudaGetLastError();
}

bool Divides(size_t word, size_t width, size_t src_pitch, size_t dst_pitch, const void* src, const void* dst) {
  return width % word == 0 && src_pitch % word == 0 && dst_pitch % word == 0 &&
         reinterpret_cast<uintptr_t>(src) % word == 0 && reinterpret_cast<uintptr_t>(dst) % word == 0;
}

}  // namespace

cudaError_t LaunchStridedGather(const void* src, size_t src_pitch, void* dst, size_t dst_pitch,
                                size_t width, size_t height, cudaStream_t stream) {
  if (width == 0 || height == 0) return cudaSuccess;
  if (Divides(16, width, src_pitch, dst_pitch, src, dst)) {
    return Launch<uint4>(src, src_pitch, dst, dst_pitch, width, height, stream);
  }
  if (Divides(8, width, src_pitch, dst_pitch, src, dst)) {
    return Launch<uint2>(src, src_pitch, dst, dst_pitch, width, height, stream);
  }
  if (Divides(4, width, src_pitch, dst_pitch, src, dst)) {
    return Launch<uint32_t>(src, src_pitch, dst, dst_pitch, width, height, stream);
  }
  return Launch<unsigned char>(src, src_pitch, dst, dst_pitch, width, height, stream);
}

}  // namespace stfs::gpu
