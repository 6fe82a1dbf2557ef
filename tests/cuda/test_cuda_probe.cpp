// The CUDA backend compiles and links in every build with nvcc, and reports "no CUDA device"
// cleanly at run time. Tests that need a device skip (not pass) without one.
#include "cuda/cuda_backend.h"

#include <gtest/gtest.h>

namespace {

TEST(CudaProbe, ReportsDevicesOrSaysWhyNot) {
    const auto probe = cc::cuda::probe();
    EXPECT_FALSE(probe.message.empty());
    if (!probe.available) {
        EXPECT_EQ(probe.message.rfind("no CUDA device", 0), 0u) << probe.message;
        GTEST_SKIP() << "no CUDA device on this machine: " << probe.message;
    }
    ASSERT_FALSE(probe.devices.empty());
    EXPECT_GE(probe.devices.front().compute_major, 7);
    EXPECT_GT(probe.devices.front().total_memory_bytes, 0u);
}

TEST(CudaProbe, RepeatedProbesAgree) {
    const auto a = cc::cuda::probe();
    const auto b = cc::cuda::probe();
    EXPECT_EQ(a.available, b.available);
    EXPECT_EQ(a.devices.size(), b.devices.size());
    if (!a.available) GTEST_SKIP() << "no CUDA device: " << a.message;
}

}  // namespace
