#include "core/cpu/cpu_backend.h"
#include "core/cpu/kernels.h"

namespace cc {

std::string cpu_numerics_id(const CpuBackendOptions& options) {
    std::string id = std::string("cpu/") + cpu::isa_name(cpu::resolve_isa(options.isa)) + "/" + kv_dtype_name(options.kv_dtype);
    if (options.weights != WeightDType::stored) id += std::string("/weights=") + weight_dtype_name(options.weights);
    if (options.weights == WeightDType::bf16dot) id += "-" + cpu::bf16dot::cpu_vendor();  // the CPU's VDPBF16PS rounding
    if (bf16_attention(options)) id += "/attention=bf16dot";
    return id;
}

bool bf16_attention(const CpuBackendOptions& options) {
    return options.weights == WeightDType::bf16dot && options.kv_dtype == KvDType::bf16;
}

}  // namespace cc
