#include "core/cpu/kernels.h"

#include "core/base/big_buffer.h"

#include "core/base/kernel_math.h"

#include <algorithm>
#include <cmath>
#include <cpuid.h>
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

namespace {

// F16C (the half <-> float conversions the AVX2 kernels use), from CPUID leaf 1, ECX bit 29.
// Read with cpuid rather than __builtin_cpu_supports("f16c"): clang 14 (Debian 12) does not
// know that feature name and refuses to compile it.
bool cpu_has_f16c() {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
    return (ecx & (1u << 29)) != 0;
}

}  // namespace

bool isa_supported(Isa isa) {
    switch (isa) {
        case Isa::scalar: return true;
        case Isa::avx2:
            return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
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

void BigFree::operator()(void* p) const { big_free(p, bytes); }

float* Workspace::grow(Buffer& b, size_t n_floats) {
    if (n_floats > b.size) {
        const size_t bytes = ((n_floats + 64 + 15) / 16 * 16) * sizeof(float);  // + slack for padded reads
        auto* p = static_cast<float*>(big_alloc(bytes));
        std::memset(p, 0, bytes);
        b.data = std::unique_ptr<float[], BigFree>(p, BigFree{bytes});
        b.size = n_floats;
    }
    return b.data.get();
}

float* Workspace::shared(size_t n_floats) { return grow(shared_, n_floats); }

float* Workspace::per_thread(int thread, size_t n_floats) {
    if (size_t(thread) >= per_thread_.size()) throw std::logic_error("Workspace: thread index out of range");
    return grow(per_thread_[size_t(thread)], n_floats);
}

const char* wformat_name(WFormat f) {
    switch (f) {
        case WFormat::f32: return "f32";
        case WFormat::bf16: return "bf16";
        case WFormat::q8: return "q8";
        case WFormat::bf16dot: return "bf16dot";
    }
    return "?";
}


namespace {

size_t round_up_64(size_t n) { return (n + 63) / 64 * 64; }

// One q8 block of a feature: scale = f16(max |w| / 127), q = round(w / scale) in [-127, 127].
uint16_t quantise_block(const float* w, int n, int8_t* q, int stride) {
    float amax = 0.0f;
    for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(w[i]));
    const uint16_t scale_bits = km::f32_to_f16(amax / 127.0f);
    const float scale = km::f16_to_f32(scale_bits);
    for (int i = 0; i < n; ++i) {
        const float r = scale > 0.0f ? std::nearbyint(w[i] / scale) : 0.0f;
        q[size_t(i) * size_t(stride)] = int8_t(std::clamp(r, -127.0f, 127.0f));
    }
    return scale_bits;
}

}  // namespace

PackedMatrix pack_matrix(ThreadPool& pool, const Matrix& src, WFormat format, int nr) {
    return pack_matrix(pool, std::span<const Matrix>(&src, 1), format, nr);
}

PackedMatrix pack_matrix(ThreadPool& pool, std::span<const Matrix> parts, WFormat format, int nr) {
    if (parts.empty()) throw std::logic_error("pack_matrix: no matrix to pack");
    if (nr <= 0) throw std::logic_error("pack_matrix: the panel width must be positive");
    int64_t n = 0;
    const int64_t k = parts.front().cols;
    for (const Matrix& m : parts) {
        if (m.data == nullptr || m.panels != nullptr) throw std::logic_error("pack_matrix: the source must be a row-major matrix");
        if (m.cols != k) throw std::logic_error("pack_matrix: stacked matrices must have the same number of columns");
        n += m.rows;
    }
    const int64_t n_panels = (n + nr - 1) / nr;
    const int64_t n_kb = (k + kQ8Block - 1) / kQ8Block;
    const size_t elem = format == WFormat::f32 ? 4 : format == WFormat::bf16 || format == WFormat::bf16dot ? 2 : 1;
    const size_t panel_elems = size_t(format == WFormat::bf16dot ? (k + 1) / 2 * 2 : k) * size_t(nr);
    const size_t panels_bytes = round_up_64(size_t(n_panels) * panel_elems * elem);
    const size_t scale_elems = format == WFormat::q8 ? size_t(n_kb) * size_t(nr) : 0;  // per panel
    const size_t bytes = panels_bytes + round_up_64(size_t(n_panels) * scale_elems * 2) + 64;  // + slack for padded reads
    PackedMatrix out;
    out.storage = std::unique_ptr<std::byte[], BigFree>(static_cast<std::byte*>(big_alloc(bytes)), BigFree{bytes});
    std::memset(out.storage.get() + bytes - 64, 0, 64);
    out.bytes = bytes;
    std::byte* const base = out.storage.get();
    auto* const scales = reinterpret_cast<uint16_t*>(base + panels_bytes);
    pool.parallel_for(n_panels, [&](int64_t p, int) {
        std::vector<float> row(static_cast<size_t>(k));
        for (int c = 0; c < nr; ++c) {
            const int64_t f = p * nr + c;
            if (f < n) {
                int64_t r = f;
                size_t part = 0;
                while (r >= parts[part].rows) r -= parts[part++].rows;
                const Matrix& src = parts[part];
                const size_t off = size_t(r) * size_t(k);
                if (src.bf16) {
                    const auto* b = static_cast<const uint16_t*>(src.data) + off;
                    for (int64_t i = 0; i < k; ++i) row[size_t(i)] = km::bf16_to_f32(b[i]);
                } else {
                    std::memcpy(row.data(), static_cast<const float*>(src.data) + off, size_t(k) * sizeof(float));
                }
            } else {
                std::fill(row.begin(), row.end(), 0.0f);
            }
            const size_t first = size_t(p) * panel_elems + size_t(c);  // element (k = 0, column c) of panel p
            switch (format) {
                case WFormat::f32: {
                    auto* d = reinterpret_cast<float*>(base) + first;
                    for (int64_t i = 0; i < k; ++i) d[size_t(i) * size_t(nr)] = row[size_t(i)];
                    break;
                }
                case WFormat::bf16: {
                    auto* d = reinterpret_cast<uint16_t*>(base) + first;
                    for (int64_t i = 0; i < k; ++i) d[size_t(i) * size_t(nr)] = km::f32_to_bf16(row[size_t(i)]);
                    break;
                }
                case WFormat::bf16dot: {  // element i at pair i / 2, half i % 2; the odd tail's high half 0
                    auto* d = reinterpret_cast<uint16_t*>(base) + size_t(p) * panel_elems + 2 * size_t(c);
                    for (int64_t i = 0; i < k; ++i) d[size_t(i / 2) * 2 * size_t(nr) + size_t(i % 2)] = km::f32_to_bf16(row[size_t(i)]);
                    if (k % 2 != 0) d[size_t(k / 2) * 2 * size_t(nr) + 1] = 0;
                    break;
                }
                case WFormat::q8: {
                    auto* d = reinterpret_cast<int8_t*>(base) + first;
                    for (int64_t b = 0; b < n_kb; ++b) {
                        const int64_t k0 = b * kQ8Block;
                        const int len = int(std::min<int64_t>(kQ8Block, k - k0));
                        scales[size_t(p) * scale_elems + size_t(b) * size_t(nr) + size_t(c)] =
                            quantise_block(row.data() + k0, len, d + size_t(k0) * size_t(nr), nr);
                    }
                    break;
                }
            }
        }
    });
    out.view.rows = n;
    out.view.cols = k;
    out.view.panels = base;
    out.view.scales = format == WFormat::q8 ? scales : nullptr;
    out.view.format = format;
    out.view.nr = nr;
    return out;
}

bool holds_exactly(WFormat format, bool source_bf16) {
    switch (format) {
        case WFormat::f32:
            return true;
        case WFormat::bf16:
        case WFormat::bf16dot:
            return source_bf16;
        case WFormat::q8:
            return false;
    }
    return false;
}

void unpack_row(const Matrix& m, int64_t row, float* out) {
    if (m.panels == nullptr || row < 0 || row >= m.rows)
        throw std::logic_error("unpack_row: not a row of a packed matrix");
    const int64_t k = m.cols;
    const size_t nr = size_t(m.nr), p = size_t(row) / nr, c = size_t(row) % nr;
    switch (m.format) {
        case WFormat::f32: {  // element (i, c) of panel p at p * K * nr + i * nr + c (pack_matrix)
            const float* d = static_cast<const float*>(m.panels) + p * size_t(k) * nr + c;
            for (int64_t i = 0; i < k; ++i) out[i] = d[size_t(i) * nr];
            return;
        }
        case WFormat::bf16: {
            const auto* d = static_cast<const uint16_t*>(m.panels) + p * size_t(k) * nr + c;
            for (int64_t i = 0; i < k; ++i) out[i] = km::bf16_to_f32(d[size_t(i) * nr]);
            return;
        }
        case WFormat::bf16dot: {  // pairs along K: element i at pair i / 2, half i % 2
            const auto* d = static_cast<const uint16_t*>(m.panels) + p * size_t((k + 1) / 2 * 2) * nr + 2 * c;
            for (int64_t i = 0; i < k; ++i) out[i] = km::bf16_to_f32(d[size_t(i / 2) * 2 * nr + size_t(i % 2)]);
            return;
        }
        case WFormat::q8:
            break;
    }
    throw std::logic_error("unpack_row: q8 panels do not hold the source's values");
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
