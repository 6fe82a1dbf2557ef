#include "core/backend/backend_choice.h"

#include <cstdio>
#include <stdexcept>

namespace cc {

std::string human_bytes(size_t bytes) {
    char buf[64];
    const double b = static_cast<double>(bytes);
    if (b >= double(1ull << 30)) std::snprintf(buf, sizeof buf, "%.1f GiB", b / double(1ull << 30));
    else if (b >= double(1ull << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", b / double(1ull << 20));
    else if (b >= 1024.0) std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
    else std::snprintf(buf, sizeof buf, "%zu bytes", bytes);
    return buf;
}

namespace {

std::string device_label(const CudaProbeSummary& c) {
    return c.device_name + " (sm_" + std::to_string(c.compute_major) + std::to_string(c.compute_minor) + ")";
}

// Why CUDA cannot run this model, or "" when it can.
std::string cuda_obstacle(const BackendChoiceInputs& in) {
    const auto& c = in.cuda;
    if (!c.compiled) return "this build has no CUDA backend (configure with -DCONTEXTCACHE_CUDA=ON where nvcc is installed)";
    if (!c.available) return c.message.empty() ? std::string("no usable CUDA device") : c.message;
    if (!in.required_bytes)
        return "the device memory this model needs is unknown: " +
               (in.required_bytes_error.empty() ? std::string("not computed") : in.required_bytes_error);
    if (!c.free_bytes)
        return "the free memory of " + c.device_name + " could not be read: " +
               (c.free_bytes_error.empty() ? std::string("unknown error") : c.free_bytes_error);
    if (*in.required_bytes > *c.free_bytes)
        return "model needs " + human_bytes(*in.required_bytes) + ", " + c.device_name + " has " +
               human_bytes(*c.free_bytes) + " free";
    return "";
}

}  // namespace

BackendChoice choose_backend(const BackendChoiceInputs& in) {
    if (in.requested == "cpu") return {"cpu", "asked for (--backend cpu)"};
    if (in.requested != "auto" && in.requested != "cuda")
        throw std::invalid_argument("backend must be auto, cpu or cuda, not \"" + in.requested + "\"");
    const std::string obstacle = cuda_obstacle(in);
    if (in.requested == "cuda") {
        if (!obstacle.empty()) throw std::runtime_error("--backend cuda: " + obstacle + "; use --backend cpu or auto");
        return {"cuda", "asked for (--backend cuda): " + device_label(in.cuda)};
    }
    if (!obstacle.empty()) return {"cpu", "auto: " + obstacle};
    return {"cuda", "auto: CUDA device " + device_label(in.cuda)};
}

}  // namespace cc
