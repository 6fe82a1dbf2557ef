#include "core/cpu/cpu_backend.h"
#include "core/cpu/kernels.h"

namespace cc {

std::string cpu_numerics_id(const CpuBackendOptions& options) {
    return std::string("cpu/") + cpu::isa_name(cpu::resolve_isa(options.isa)) + "/" + kv_dtype_name(options.kv_dtype);
}

}  // namespace cc
