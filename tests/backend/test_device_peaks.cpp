// The GPU peak table and the DRAM bandwidth formula behind the benchmarks' fraction of peak.
#include "core/backend/device_peaks.h"

#include <gtest/gtest.h>

namespace {

TEST(DevicePeaks, KnownDevicesByTheNamesTheDriverReports) {
    EXPECT_EQ(cc::peak_bf16_tflops("NVIDIA H100 80GB HBM3"), 989.0);
    EXPECT_EQ(cc::peak_bf16_tflops("NVIDIA H100 PCIe"), 756.0);
    EXPECT_EQ(cc::peak_bf16_tflops("NVIDIA H100 NVL"), 835.0);
    EXPECT_EQ(cc::peak_bf16_tflops("NVIDIA H200"), 989.0);
    EXPECT_EQ(cc::peak_bf16_tflops("NVIDIA H200 NVL"), 835.0);
    EXPECT_EQ(cc::peak_bf16_tflops("NVIDIA GH200 480GB"), 989.0);
    EXPECT_EQ(cc::peak_bf16_tflops("NVIDIA A100-SXM4-80GB"), 312.0);
    EXPECT_EQ(cc::peak_bf16_tflops("NVIDIA A100 80GB PCIe"), 312.0);
    EXPECT_EQ(cc::peak_bf16_tflops("NVIDIA A100-PCIE-40GB"), 312.0);
    EXPECT_EQ(cc::peak_bf16_tflops("NVIDIA L40S"), 362.0);
    EXPECT_EQ(cc::peak_bf16_tflops("NVIDIA L4"), 121.0);
}

TEST(DevicePeaks, SimilarNamesDoNotMatchTheWrongRow) {
    EXPECT_EQ(cc::peak_bf16_tflops("NVIDIA A10"), 125.0);   // not the A100's 312
    EXPECT_EQ(cc::peak_bf16_tflops("NVIDIA L40"), 181.0);   // not the L40S's or the L4's
    EXPECT_EQ(cc::peak_bf16_tflops("NVIDIA A10G"), 0.0);    // not in the table: unknown, not guessed
    EXPECT_EQ(cc::peak_bf16_tflops("NVIDIA GeForce RTX 4090"), 0.0);
    EXPECT_EQ(cc::peak_bf16_tflops(""), 0.0);
}

TEST(DevicePeaks, DramBandwidthFromClockAndBusWidth) {
    // H100 SXM5: 2619 MHz HBM3 on a 5120-bit bus -> 3352 GB/s.
    EXPECT_NEAR(cc::peak_dram_gb_s(2619000, 5120), 3352.32, 1e-6);
    // A100 40GB: 1215 MHz HBM2 on 5120 bits -> 1555 GB/s.
    EXPECT_NEAR(cc::peak_dram_gb_s(1215000, 5120), 1555.2, 1e-6);
    EXPECT_EQ(cc::peak_dram_gb_s(0, 5120), 0.0);
    EXPECT_EQ(cc::peak_dram_gb_s(1215000, 0), 0.0);
}

}  // namespace
