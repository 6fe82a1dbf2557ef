// The scalar kernels: any x86-64 (or other) CPU; also the easiest to read. Same algorithms with
// a vector width of 1: the FMA of the vector paths is a multiply then an add here.
#include "core/cpu/kernels.h"
#include "core/base/kernel_math.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <type_traits>

namespace cc::cpu::scalar {
namespace {

struct V {
    using reg = float;
    static constexpr int W = 1;
    static constexpr int n_regs = 16;
    static constexpr int gemm_mr = 4;
    static constexpr bool gemm_rows_whole_k = false;
    static constexpr int gemm_nrv = 4;
    static constexpr int gemm_tall_r2 = 0;
    static constexpr int qk_r = 4;
    static constexpr bool has_transpose16 = false;
    static constexpr int qk_tt = 1;
    static constexpr int pv_rows = 0;
    static constexpr int gemv_np = 2;

    static reg zero() { return 0.0f; }
    static reg set1(float f) { return f; }
    static reg load(const float* p) { return *p; }
    static reg load_n(const float* p, int n) { return n > 0 ? *p : 0.0f; }
    static reg load(const uint16_t* p) { return km::bf16_to_f32(*p); }
    static reg load_n(const uint16_t* p, int n) { return n > 0 ? km::bf16_to_f32(*p) : 0.0f; }
    static reg load(const int8_t* p) { return float(*p); }
    static reg load_f16(const uint16_t* p) { return km::f16_to_f32(*p); }
    static void store(float* p, reg v) { *p = v; }
    static void store_n(float* p, reg v, int n) {
        if (n > 0) *p = v;
    }
    static reg fma(reg a, reg b, reg c) { return a * b + c; }
    static reg add(reg a, reg b) { return a + b; }
    static reg sub(reg a, reg b) { return a - b; }
    static reg mul(reg a, reg b) { return a * b; }
    static reg div(reg a, reg b) { return a / b; }
    static reg max(reg a, reg b) { return a > b ? a : b; }
    static reg keep_lanes(reg v, int first, int n, float fill) { return first == 0 && n > 0 ? v : fill; }
    static float hsum(reg v) { return v; }
    static float hmax(reg v) { return v; }
    static reg exp(reg x) { return std::exp(x); }
    static void transpose_w(reg*) {}  // a 1 x 1 block
};

#include "core/cpu/kernels_impl.h"

}  // namespace

const Kernels& table() { return table_impl(Isa::scalar); }

}  // namespace cc::cpu::scalar
