// The CUDA kernels against the CPU reference, through the self-test's per-op checks (parity on
// seeded inputs, NaN/Inf, guard bytes, GEMM batch invariance, attention segment invariance and
// split == tiled). Skips without a device.
#include "cuda/cuda_backend.h"

#include <gtest/gtest.h>

namespace {

std::string describe(const cc::cuda::SelftestRow& r) {
    return r.check + " [" + r.shape + "]: error " + std::to_string(r.max_error) + " bound " + std::to_string(r.bound) +
           (r.note.empty() ? "" : " (" + r.note + ")");
}

TEST(CudaOps, SelftestOpsPass) {
    const auto p = cc::cuda::probe();
    if (!p.available) GTEST_SKIP() << "no CUDA device: " << p.message;
    cc::cuda::SelftestOptions o;
    o.quick = true;
    o.models = false;
    const auto rows = cc::cuda::run_selftest(o);
    ASSERT_GT(rows.size(), 20u);
    for (const auto& r : rows) EXPECT_TRUE(r.pass) << describe(r);
}

TEST(CudaOps, SelftestRefusesWithoutDevice) {
    const auto p = cc::cuda::probe();
    if (p.available) GTEST_SKIP() << "a CUDA device is present (" << p.message << "): covered by SelftestOpsPass";
    try {
        cc::cuda::run_selftest({});
        FAIL() << "run_selftest ran without a device";
    } catch (const cc::cuda::CudaError& e) {
        EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
    }
}

}  // namespace
