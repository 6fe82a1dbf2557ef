// One CUDA context object (STYLE 7: no globals): the device, one stream, the cuBLASLt handle and
// its workspace, and pinned host staging for uploads and downloads. Internal to cuda/ (CUDA types
// appear here; cuda_backend.h stays plain C++).
//
// Every CUDA and cuBLAS call goes through CC_CUDA_CHECK / CC_CUBLAS_CHECK, which throw
// cc::cuda::CudaError naming the call text, file:line and the error name. Device allocations go
// through DeviceBuffer, whose out-of-memory message says how much was asked for, how much is free
// and what to do about it.
#pragma once

#include "core/cpu/thread_pool.h"
#include "cuda/cuda_backend.h"
#include "cuda/launch_geometry.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <utility>

namespace cc::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line);

inline void check_cuda(cudaError_t err, const char* call, const char* file, int line) {
    if (err != cudaSuccess) throw_cuda_error(err, call, file, line);
}
inline void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
    if (status != CUBLAS_STATUS_SUCCESS) throw_cublas_error(status, call, file, line);
}

#define CC_CUDA_CHECK(call) ::cc::cuda::check_cuda((call), #call, __FILE__, __LINE__)
#define CC_CUBLAS_CHECK(call) ::cc::cuda::check_cublas((call), #call, __FILE__, __LINE__)
// After a kernel launch: launch errors (bad geometry, too much shared memory) surface here.
#define CC_CUDA_CHECK_LAUNCH(name) ::cc::cuda::check_cuda(cudaGetLastError(), name " launch", __FILE__, __LINE__)

// "cudaMalloc of 1073741824 bytes (1024.0 MiB) for <what> failed: out of device memory (512.0 MiB
// free of 80.0 GiB). Use a smaller --max-batch or KV budget, or the CPU backend (--backend cpu)."
std::string out_of_memory_message(size_t bytes, const std::string& what, int device);

// Device memory, freed on destruction. Move-only.
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    DeviceBuffer(size_t bytes, const std::string& what, int device);
    ~DeviceBuffer();
    DeviceBuffer(DeviceBuffer&& o) noexcept
        : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    void* get() const { return ptr_; }
    template <class T>
    T* as() const {
        return static_cast<T*>(ptr_);
    }
    size_t bytes() const { return bytes_; }

private:
    void* ptr_ = nullptr;
    size_t bytes_ = 0;
};

// Page-locked host memory (cudaMallocHost): async copies from/to it overlap and run at full speed.
class PinnedBuffer {
public:
    PinnedBuffer() = default;
    explicit PinnedBuffer(size_t bytes);
    ~PinnedBuffer();
    PinnedBuffer(PinnedBuffer&& o) noexcept
        : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
    PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
    PinnedBuffer(const PinnedBuffer&) = delete;
    PinnedBuffer& operator=(const PinnedBuffer&) = delete;
    std::byte* get() const { return static_cast<std::byte*>(ptr_); }
    size_t bytes() const { return bytes_; }

private:
    void* ptr_ = nullptr;
    size_t bytes_ = 0;
};

// What we record of device `index`: name, compute capability, memory, SMs and the peaks for the
// benchmarks' fraction-of-peak figures (core/backend/device_peaks.h; 0 where unknown). Never throws.
DeviceInfo describe_device(int index, const cudaDeviceProp& prop);

class Context {
public:
    // Selects `device`, creates the stream, the cuBLASLt handle, `workspace_bytes` of workspace and
    // `staging_bytes` of pinned staging. Throws CudaError.
    Context(int device, size_t workspace_bytes, size_t staging_bytes);
    ~Context();
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;

    int device() const { return device_; }
    const DeviceInfo& info() const { return info_; }
    cudaStream_t stream() const { return stream_; }
    cublasLtHandle_t lt() const { return lt_; }
    void* workspace() const { return workspace_.get(); }
    size_t workspace_bytes() const { return workspace_.bytes(); }
    void sync() const;

    // Makes this context's device current on the calling thread (the engine may call from several).
    void make_current() const;

    DeviceBuffer alloc(size_t bytes, const std::string& what) const { return DeviceBuffer(bytes, what, device_); }

    // Host <-> device copies through the pinned staging buffer, in pieces of its size; they return
    // when the data has arrived. `convert` variants are not needed: callers fill staging directly.
    void upload(void* dst_device, const void* src_host, size_t bytes) const;
    void download(void* dst_host, const void* src_device, size_t bytes) const;
    // Many pieces (e.g. the KV heads of every layer) through the staging buffer, one stream
    // synchronisation per buffer-full; downloads always so. With set_upload_ring(true) (opt-in until
    // a device has run it: CudaBackendOptions::upload_ring), uploads use it as a ring of
    // kStagingSlices slices: while the DMA engine copies one slice to the device, the host fills
    // the next (a slice is refilled only when the event recorded after its copies has passed), so
    // host copies and PCIe transfers overlap instead of taking turns; and a slice of several MiB is
    // filled by up to kUploadThreads threads (one host thread copies at about half of what a PCIe
    // Gen5 link takes). The cutting into slices and shares is geom::plan_upload_slices.
    struct Piece {
        void* device;
        std::byte* host;
        size_t bytes;
    };
    void upload_pieces(std::span<const Piece> pieces) const;
    void download_pieces(std::span<const Piece> pieces) const;
    // The staging buffer itself, for callers that convert while copying (weights to BF16).
    std::byte* staging() const { return staging_.get(); }
    void set_upload_ring(bool on);
    size_t staging_bytes() const { return staging_.bytes(); }

    static constexpr int kStagingSlices = 4;
    static constexpr int kUploadThreads = 4;

private:
    void fill_slice(const geom::UploadSlice& slice, std::span<const Piece> pieces, std::byte* stage) const;

    int device_ = 0;
    DeviceInfo info_;
    cudaStream_t stream_ = nullptr;
    cudaEvent_t slice_done_[kStagingSlices] = {};
    bool upload_ring_ = false;
    std::unique_ptr<cpu::ThreadPool> copy_pool_;  // with the ring: the threads that fill a slice
    cublasLtHandle_t lt_ = nullptr;
    DeviceBuffer workspace_;
    PinnedBuffer staging_;
};

}  // namespace cc::cuda
