// Peak figures of a GPU for the benchmarks' "fraction of peak" (bench_prefill/bench_ttft --backend
// cuda). Pure functions, so they are unit-tested on any machine (tests/backend/test_device_peaks.cpp);
// cuda/cuda_backend.cu's probe() fills cc::cuda::DeviceInfo with them.
#pragma once

#include <string>

namespace cc {

// Dense tensor-core BF16 TFLOP/s with FP32 accumulate (no sparsity) from NVIDIA's datasheets, by
// the device name cudaGetDeviceProperties reports (e.g. "NVIDIA H100 80GB HBM3" = SXM, "NVIDIA H100
// PCIe", "NVIDIA A100-SXM4-80GB"). 0 when the device is not in the table (the fraction of peak is
// then not reported rather than guessed).
double peak_bf16_tflops(const std::string& device_name);

// DRAM bandwidth in GB/s (1e9 bytes) from the memory clock (kHz, cudaDevAttrMemoryClockRate) and
// the bus width (bits, cudaDevAttrGlobalMemoryBusWidth): clock x 2 (double data rate) x width / 8.
// 0 when either is unknown (0).
double peak_dram_gb_s(long long memory_clock_khz, int bus_width_bits);

}  // namespace cc
