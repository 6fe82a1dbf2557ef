#include "core/cpu/cpu_backend.h"
#include "core/cpu/kernels.h"

namespace cc {

std::string cpu_numerics_id(const CpuBackendOptions& options) {
    std::string id = std::string("cpu/") + cpu::isa_name(cpu::resolve_isa(options.isa)) + "/" + kv_dtype_name(options.kv_dtype);
    if (options.weights != WeightDType::stored) id += std::string("/weights=") + weight_dtype_name(options.weights);
    if (options.weights == WeightDType::bf16dot) id += "-" + cpu::bf16dot::cpu_vendor();  // the CPU's VDPBF16PS rounding
    return id;
}

}  // namespace cc
