// The CUDA entry points of a build without a CUDA toolkit: no device, and
// the reason says so. The host loader and everything else work as usual.
#include "core/cuda/loader.h"

namespace stfs::gpu {

int CudaDeviceCount(std::string* reason) {
  if (reason != nullptr) *reason = "stfs-gpu was built without CUDA (no nvcc at build time)";
  return 0;
}

StatusOr<std::unique_ptr<Loader>> NewCudaLoader(const LoaderOptions&) {
  std::string reason;
  CudaDeviceCount(&reason);
  return Status::Unavailable("no CUDA device (" + reason + ")");
}

}  // namespace stfs::gpu
