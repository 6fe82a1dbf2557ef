#include "cuda/context.h"

#include "core/backend/device_peaks.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace cc::cuda {
namespace {

std::string mib(size_t bytes) {
    char buf[64];
    if (bytes >= (size_t(1) << 30))
        std::snprintf(buf, sizeof buf, "%.1f GiB", double(bytes) / double(size_t(1) << 30));
    else
        std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(size_t(1) << 20));
    return buf;
}

std::string where(const char* call, const char* file, int line) {
    return std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": ";
}

}  // namespace

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
    cudaGetLastError();  // clear a non-sticky error so the next call starts clean
    std::string msg = where(call, file, line) + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
    if (err == cudaErrorMemoryAllocation)
        msg += ". Use a smaller --max-batch or KV budget, or the CPU backend (--backend cpu)";
    throw CudaError(msg);
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
    std::string msg =
        where(call, file, line) + cublasGetStatusName(status) + " (" + cublasGetStatusString(status) + ")";
    if (status == CUBLAS_STATUS_ALLOC_FAILED)
        msg += ". Use a smaller --max-batch or KV budget, or the CPU backend (--backend cpu)";
    throw CudaError(msg);
}

std::string out_of_memory_message(size_t bytes, const std::string& what, int device) {
    size_t free_b = 0, total_b = 0;
    std::string free_text = "free memory unknown";
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
        free_text = mib(free_b) + " free of " + mib(total_b);
    else
        cudaGetLastError();
    return "cudaMalloc of " + std::to_string(bytes) + " bytes (" + mib(bytes) + ") for " + what + " on device " +
           std::to_string(device) + " failed: cudaErrorMemoryAllocation, out of device memory (" + free_text +
           "). Use a smaller --max-batch or KV budget, or the CPU backend (--backend cpu)";
}

// ---- buffers -------------------------------------------------------------------------------------

DeviceBuffer::DeviceBuffer(size_t bytes, const std::string& what, int device) : bytes_(bytes) {
    if (bytes == 0) return;
    const cudaError_t err = cudaMalloc(&ptr_, bytes);
    if (err == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        ptr_ = nullptr;
        throw CudaError(out_of_memory_message(bytes, what, device));
    }
    if (err != cudaSuccess) {
        ptr_ = nullptr;
        throw_cuda_error(err, ("cudaMalloc(" + std::to_string(bytes) + " bytes for " + what + ")").c_str(), __FILE__,
                         __LINE__);
    }
}

DeviceBuffer::~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);  // never throws from a destructor
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
        if (ptr_ != nullptr) cudaFree(ptr_);
        ptr_ = std::exchange(o.ptr_, nullptr);
        bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
}

PinnedBuffer::PinnedBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes == 0) return;
    const cudaError_t err = cudaMallocHost(&ptr_, bytes);
    if (err != cudaSuccess) {
        ptr_ = nullptr;
        cudaGetLastError();
        throw CudaError("cudaMallocHost of " + std::to_string(bytes) + " bytes (" + mib(bytes) +
                        ") for pinned staging failed: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
    }
}

PinnedBuffer::~PinnedBuffer() {
    if (ptr_ != nullptr) cudaFreeHost(ptr_);
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
    if (this != &o) {
        if (ptr_ != nullptr) cudaFreeHost(ptr_);
        ptr_ = std::exchange(o.ptr_, nullptr);
        bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
}

// ---- context -------------------------------------------------------------------------------------

DeviceInfo describe_device(int index, const cudaDeviceProp& prop) {
    DeviceInfo d;
    d.index = index;
    d.name = prop.name;
    d.compute_major = prop.major;
    d.compute_minor = prop.minor;
    d.total_memory_bytes = prop.totalGlobalMem;
    d.sm_count = prop.multiProcessorCount;
    int memory_clock_khz = 0, bus_width_bits = 0;
    if (cudaDeviceGetAttribute(&memory_clock_khz, cudaDevAttrMemoryClockRate, index) != cudaSuccess) memory_clock_khz = 0;
    if (cudaDeviceGetAttribute(&bus_width_bits, cudaDevAttrGlobalMemoryBusWidth, index) != cudaSuccess) bus_width_bits = 0;
    cudaGetLastError();  // an unsupported attribute leaves no sticky error behind
    d.peak_bf16_tflops = cc::peak_bf16_tflops(d.name);
    d.peak_dram_gb_s = cc::peak_dram_gb_s(memory_clock_khz, bus_width_bits);
    return d;
}

Context::Context(int device, size_t workspace_bytes, size_t staging_bytes) : device_(device) {
    int n_devices = 0;
    const cudaError_t count_err = cudaGetDeviceCount(&n_devices);
    if (count_err != cudaSuccess || n_devices == 0) {
        cudaGetLastError();
        throw CudaError(std::string("no CUDA device: ") +
                        (count_err != cudaSuccess ? cudaGetErrorString(count_err) : "the driver reports 0 devices"));
    }
    if (device < 0 || device >= n_devices)
        throw CudaError("CUDA device " + std::to_string(device) + " does not exist (" + std::to_string(n_devices) +
                        " device(s) found)");
    CC_CUDA_CHECK(cudaSetDevice(device));
    cudaDeviceProp prop{};
    CC_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    info_ = describe_device(device, prop);
    if (prop.major < 8)
        throw CudaError("CUDA device " + std::to_string(device) + " (" + info_.name + ", sm_" +
                        std::to_string(prop.major) + std::to_string(prop.minor) +
                        ") is older than sm_80: this build has kernels for sm_80 and sm_90 only");
    if (staging_bytes < size_t(kStagingSlices) * 4096)
        throw CudaError("Context: a staging buffer of " + std::to_string(staging_bytes) + " bytes is too small");
    CC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    try {
        CC_CUBLAS_CHECK(cublasLtCreate(&lt_));
        workspace_ = DeviceBuffer(workspace_bytes, "the cuBLASLt workspace", device);
        staging_ = PinnedBuffer(staging_bytes);
        for (cudaEvent_t& e : slice_done_) CC_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    } catch (...) {
        for (cudaEvent_t e : slice_done_)
            if (e != nullptr) cudaEventDestroy(e);
        if (lt_ != nullptr) cublasLtDestroy(lt_);
        cudaStreamDestroy(stream_);
        throw;
    }
}

Context::~Context() {
    cudaStreamSynchronize(stream_);
    for (cudaEvent_t e : slice_done_)
        if (e != nullptr) cudaEventDestroy(e);
    if (lt_ != nullptr) cublasLtDestroy(lt_);
    cudaStreamDestroy(stream_);
}

void Context::sync() const {
    CC_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void Context::make_current() const {
    CC_CUDA_CHECK(cudaSetDevice(device_));
}

void Context::set_upload_ring(bool on) {
    upload_ring_ = on;
    if (on && copy_pool_ == nullptr)
        copy_pool_ = std::make_unique<cpu::ThreadPool>(std::min(kUploadThreads, cpu::ThreadPool::available_cores()));
}

// Copies the slice's parts from the pieces' host bytes into `stage`, each thread its share.
void Context::fill_slice(const geom::UploadSlice& slice, std::span<const Piece> pieces, std::byte* stage) const {
    const int n = copy_pool_ != nullptr ? geom::upload_copy_threads(slice.bytes, copy_pool_->n_threads()) : 1;
    auto share = [&](int t) {
        geom::for_each_part_in(
            slice, geom::upload_share(slice.bytes, t, n), [&](const geom::UploadPart& p, size_t from, size_t bytes) {
                std::memcpy(stage + p.slice_offset + from, pieces[p.piece].host + p.piece_offset + from, bytes);
            });
    };
    if (n == 1) {
        share(0);
        return;
    }
    copy_pool_->parallel_for(n, [&](int64_t t, int) { share(int(t)); });
}

void Context::upload(void* dst_device, const void* src_host, size_t bytes) const {
    const Piece piece{dst_device, const_cast<std::byte*>(static_cast<const std::byte*>(src_host)), bytes};
    upload_pieces({&piece, 1});
}

void Context::download(void* dst_host, const void* src_device, size_t bytes) const {
    const auto* src = static_cast<const std::byte*>(src_device);
    auto* dst = static_cast<std::byte*>(dst_host);
    for (size_t done = 0; done < bytes;) {
        const size_t n = std::min(bytes - done, staging_.bytes());
        CC_CUDA_CHECK(cudaMemcpyAsync(staging_.get(), src + done, n, cudaMemcpyDeviceToHost, stream_));
        CC_CUDA_CHECK(cudaStreamSynchronize(stream_));
        std::memcpy(dst + done, staging_.get(), n);
        done += n;
    }
}

void Context::upload_pieces(std::span<const Piece> pieces) const {
    CC_CUDA_CHECK(cudaStreamSynchronize(stream_));  // nothing queued before still reads the staging buffer
    // Without the ring (the default until a device has run it): the whole buffer, then a wait.
    const int slots = upload_ring_ ? kStagingSlices : 1;
    const size_t slice_bytes = staging_.bytes() / size_t(slots);
    std::vector<size_t> sizes;
    sizes.reserve(pieces.size());
    for (const Piece& p : pieces) sizes.push_back(p.bytes);
    bool recorded[kStagingSlices] = {};
    int slot = 0;
    for (const geom::UploadSlice& slice : geom::plan_upload_slices(sizes, slice_bytes)) {
        if (recorded[slot]) CC_CUDA_CHECK(cudaEventSynchronize(slice_done_[slot]));  // its last copies have left it
        std::byte* stage = staging_.get() + size_t(slot) * slice_bytes;
        fill_slice(slice, pieces, stage);
        for (const geom::UploadPart& p : slice.parts)
            CC_CUDA_CHECK(cudaMemcpyAsync(static_cast<std::byte*>(pieces[p.piece].device) + p.piece_offset,
                                          stage + p.slice_offset, p.bytes, cudaMemcpyHostToDevice, stream_));
        CC_CUDA_CHECK(cudaEventRecord(slice_done_[slot], stream_));
        recorded[slot] = true;
        slot = (slot + 1) % slots;
    }
    CC_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void Context::download_pieces(std::span<const Piece> pieces) const {
    // Copies queued into staging, then (when it is full, and at the end) one wait and the host copies.
    struct Pending {
        std::byte* host;
        size_t offset, bytes;
    };
    std::vector<Pending> pending;
    size_t used = 0;
    auto flush = [&] {
        CC_CUDA_CHECK(cudaStreamSynchronize(stream_));
        for (const Pending& q : pending) std::memcpy(q.host, staging_.get() + q.offset, q.bytes);
        pending.clear();
        used = 0;
    };
    for (const Piece& p : pieces) {
        for (size_t done = 0; done < p.bytes;) {
            if (used == staging_.bytes()) flush();
            const size_t n = std::min(p.bytes - done, staging_.bytes() - used);
            CC_CUDA_CHECK(cudaMemcpyAsync(staging_.get() + used, static_cast<const std::byte*>(p.device) + done, n,
                                          cudaMemcpyDeviceToHost, stream_));
            pending.push_back({p.host + done, used, n});
            used += n;
            done += n;
        }
    }
    flush();
}

}  // namespace cc::cuda
