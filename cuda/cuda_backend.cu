#include "cuda/cuda_backend.h"

#include "core/device_peaks.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

namespace cc::cuda {

Probe probe() {
    Probe result;
    cudaRuntimeGetVersion(&result.runtime_version);
    cudaDriverGetVersion(&result.driver_version);
    int n_devices = 0;
    const cudaError_t err = cudaGetDeviceCount(&n_devices);
    if (err != cudaSuccess || n_devices == 0) {
        result.message = std::string("no CUDA device: ") +
                         (err != cudaSuccess ? cudaGetErrorString(err) : "the driver reports 0 devices");
        cudaGetLastError();  // clear the sticky error so later calls start clean
        return result;
    }
    for (int i = 0; i < n_devices; ++i) {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
        DeviceInfo d;
        d.index = i;
        d.name = prop.name;
        d.compute_major = prop.major;
        d.compute_minor = prop.minor;
        d.total_memory_bytes = prop.totalGlobalMem;
        d.sm_count = prop.multiProcessorCount;
        // Peaks for the benchmarks' fraction of peak (core/device_peaks.h); 0 = unknown.
        int memory_clock_khz = 0, bus_width_bits = 0;
        if (cudaDeviceGetAttribute(&memory_clock_khz, cudaDevAttrMemoryClockRate, i) != cudaSuccess) memory_clock_khz = 0;
        if (cudaDeviceGetAttribute(&bus_width_bits, cudaDevAttrGlobalMemoryBusWidth, i) != cudaSuccess) bus_width_bits = 0;
        cudaGetLastError();
        d.peak_bf16_tflops = cc::peak_bf16_tflops(d.name);
        d.peak_dram_gb_s = cc::peak_dram_gb_s(memory_clock_khz, bus_width_bits);
        result.devices.push_back(d);
    }
    // A device is only useful to us if cuBLAS can open a handle on it.
    cublasHandle_t handle = nullptr;
    if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) {
        result.message = "CUDA device found but cuBLAS could not be initialised";
        return result;
    }
    cublasDestroy(handle);
    result.available = !result.devices.empty();
    result.message = result.available ? result.devices.front().name + " (sm_" +
                                            std::to_string(result.devices.front().compute_major) +
                                            std::to_string(result.devices.front().compute_minor) + ")"
                                      : "no CUDA device: properties could not be read";
    return result;
}

std::string cuda_numerics_id(const DeviceInfo& device, const CudaBackendOptions& options) {
    return "cuda/sm" + std::to_string(device.compute_major) + std::to_string(device.compute_minor) + "/bf16/" +
           kv_dtype_name(options.kv_dtype);
}

size_t device_free_bytes(int device) {
    int previous = 0;
    cudaGetDevice(&previous);
    if (cudaSetDevice(device) != cudaSuccess) {
        cudaGetLastError();
        throw CudaError("cudaSetDevice(" + std::to_string(device) + ") failed: no such device");
    }
    size_t free_bytes = 0, total = 0;
    const cudaError_t err = cudaMemGetInfo(&free_bytes, &total);
    cudaSetDevice(previous);
    if (err != cudaSuccess) {
        cudaGetLastError();
        throw CudaError(std::string("cudaMemGetInfo failed: ") + cudaGetErrorName(err));
    }
    return free_bytes;
}

// Placeholders until the forward pass lands (issue 6): they refuse honestly.
size_t cuda_required_bytes(const ModelConfig&, const CudaBackendOptions&) {
    throw CudaError("the CUDA forward pass is not implemented yet");
}
std::unique_ptr<Backend> make_cuda_backend(const ModelWeights&, const CudaBackendOptions&) {
    throw CudaError("the CUDA forward pass is not implemented yet");
}
std::vector<SelftestRow> run_selftest(const SelftestOptions&) {
    throw CudaError("the CUDA forward pass is not implemented yet");
}

}  // namespace cc::cuda
