#include "core/cpu/kernels.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

namespace cc::cpu {

const char* isa_name(Isa isa) {
    switch (isa) {
        case Isa::scalar: return "scalar";
        case Isa::avx2: return "avx2";
        case Isa::avx512: return "avx512";
    }
    return "?";
}

Isa parse_isa(const std::string& name) {
    if (name == "scalar") return Isa::scalar;
    if (name == "avx2") return Isa::avx2;
    if (name == "avx512") return Isa::avx512;
    throw std::runtime_error("CPU instruction set \"" + name + "\" is unknown (expected scalar, avx2 or avx512)");
}

bool isa_supported(Isa isa) {
    switch (isa) {
        case Isa::scalar: return true;
        case Isa::avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        case Isa::avx512:
            return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                   __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                   __builtin_cpu_supports("fma");
    }
    return false;
}

Isa best_isa() {
    if (isa_supported(Isa::avx512)) return Isa::avx512;
    if (isa_supported(Isa::avx2)) return Isa::avx2;
    return Isa::scalar;
}

Isa resolve_isa(const std::string& requested) {
    std::string name = requested;
    std::string source = "CpuBackendOptions::isa";
    if (name.empty() || name == "auto") {
        const char* env = std::getenv("CC_CPU_ISA");
        if (env == nullptr || *env == '\0' || std::string(env) == "auto") return best_isa();
        name = env;
        source = "CC_CPU_ISA";
    }
    Isa isa;
    try {
        isa = parse_isa(name);
    } catch (const std::exception& e) {
        throw std::runtime_error(source + ": " + e.what());
    }
    if (!isa_supported(isa))
        throw std::runtime_error(source + ": this CPU does not support the \"" + name + "\" instruction set");
    return isa;
}

void Workspace::Free::operator()(float* p) const { std::free(p); }

float* Workspace::grow(Buffer& b, size_t n_floats) {
    if (n_floats > b.size) {
        const size_t bytes = ((n_floats + 64 + 15) / 16 * 16) * sizeof(float);  // a multiple of 64, as aligned_alloc wants
        auto* p = static_cast<float*>(std::aligned_alloc(64, bytes));
        if (p == nullptr) throw std::bad_alloc();
        std::memset(p, 0, bytes);
        b.data.reset(p);
        b.size = n_floats;
    }
    return b.data.get();
}

float* Workspace::shared(size_t n_floats) { return grow(shared_, n_floats); }

float* Workspace::per_thread(int thread, size_t n_floats) {
    if (size_t(thread) >= per_thread_.size()) throw std::logic_error("Workspace: thread index out of range");
    return grow(per_thread_[size_t(thread)], n_floats);
}

const Kernels& kernels_for(Isa isa) {
    switch (isa) {
        case Isa::scalar: return scalar::table();
        case Isa::avx2: return avx2::table();
        case Isa::avx512: return avx512::table();
    }
    throw std::logic_error("kernels_for: bad Isa");
}

}  // namespace cc::cpu
