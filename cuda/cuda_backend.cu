#include "cuda/cuda_backend.h"

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
        result.devices.push_back({i, prop.name, prop.major, prop.minor, prop.totalGlobalMem});
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

}  // namespace cc::cuda
