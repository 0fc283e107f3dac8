// The device tests' skip rule: without a CUDA device they skip with the
// runtime's reason, unless STFS_GPU_REQUIRE_DEVICE=1 (scripts/gpu-check.sh
// sets it), where a missing device is a failure: a device check cannot pass
// without a device.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "core/cuda/loader.h"

namespace stfs::gpu::testing {

inline bool DeviceRequired() {
  const char* v = std::getenv("STFS_GPU_REQUIRE_DEVICE");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

}  // namespace stfs::gpu::testing

#define REQUIRE_GPU()                                                                          \
  do {                                                                                         \
    std::string stfs_reason_;                                                                  \
    if (::stfs::gpu::CudaDeviceCount(&stfs_reason_) == 0) {                                    \
      if (::stfs::gpu::testing::DeviceRequired()) {                                            \
        FAIL() << "STFS_GPU_REQUIRE_DEVICE=1 but there is no CUDA device: " << stfs_reason_;   \
      }                                                                                        \
      GTEST_SKIP() << "no CUDA device: " << stfs_reason_;                                      \
    }                                                                                          \
  } while (0)
