#include "core/backend_select.h"

#include "core/builtin_model.h"
#include "core/cpu/cpu_backend.h"
#include "core/model_spec.h"
#include "core/run_info.h"

#ifdef CC_HAVE_CUDA
// cc_core links cc_cuda in a CUDA build (top-level CMakeLists.txt), which also defines
// CC_HAVE_CUDA for cc_core's sources. The header holds plain C++ types only.
#include "cuda/cuda_backend.h"
#endif

#include <stdexcept>

namespace cc {

namespace {

CpuBackendOptions cpu_options(const EngineOptions& options) {
    CpuBackendOptions cpu;
    cpu.n_threads = options.n_threads;
    cpu.kv_dtype = options.kv_dtype;
    return cpu;
}

#ifdef CC_HAVE_CUDA
cuda::CudaBackendOptions cuda_options(const EngineOptions& options) {
    cuda::CudaBackendOptions o;
    o.device = 0;
    o.kv_dtype = options.kv_dtype;
    return o;
}
#endif

}  // namespace

CudaProbeSummary probe_cuda_summary() {
    CudaProbeSummary s;
#ifdef CC_HAVE_CUDA
    s.compiled = true;
    try {
        const cuda::Probe p = cuda::probe();
        s.available = p.available && !p.devices.empty();
        s.message = p.message;
        if (!p.devices.empty()) {
            const auto& d = p.devices.front();
            s.device_name = d.name;
            s.compute_major = d.compute_major;
            s.compute_minor = d.compute_minor;
        }
        if (s.available) {
            try {
                s.free_bytes = cuda::device_free_bytes(0);
            } catch (const std::exception& e) {
                s.free_bytes_error = e.what();
            }
        }
    } catch (const std::exception& e) {  // probe() promises not to throw; be safe anyway
        s.available = false;
        s.message = std::string("CUDA probe failed: ") + e.what();
    }
#else
    s.message = "built without the CUDA backend";
#endif
    return s;
}

ModelConfig planned_model_config(const std::string& model_spec) {
    const ModelSource source = resolve_model(model_spec);
    if (source.builtin) {
        const auto recipe = find_builtin(source.builtin_name);
        if (!recipe) throw std::runtime_error(model_spec + ": unknown built-in model");
        return recipe->config;
    }
    return ModelConfig::from_json(source.config, (source.dir / "config.json").string());
}

PlannedBackend plan_backend(const EngineOptions& options, const ModelConfig& config) {
    BackendChoiceInputs in;
    in.requested = options.backend;
    if (options.backend != "cpu") {  // "cpu" never touches the driver (fast, and works in any sandbox)
        in.cuda = probe_cuda_summary();
#ifdef CC_HAVE_CUDA
        if (in.cuda.available) {
            try {
                // Plus the KV of one 4,096-token context (cuda_required_bytes counts no KV): a
                // model that only just fits would fail at its first long query.
                constexpr size_t kKvHeadroomTokens = 4096;
                const size_t kv_per_token = size_t(config.n_layers) * 2 * size_t(config.n_kv_heads) *
                                            size_t(config.head_dim) * (options.kv_dtype == KvDType::f32 ? 4 : 2);
                in.required_bytes = cuda::cuda_required_bytes(config, cuda_options(options)) + kv_per_token * kKvHeadroomTokens;
            } catch (const std::exception& e) {
                in.required_bytes_error = e.what();
            }
        }
#else
        (void)config;
#endif
    }
    PlannedBackend plan;
    plan.choice = choose_backend(in);
    if (plan.choice.backend == "cpu") {
        plan.numerics = cpu_numerics_id(cpu_options(options));
        plan.device = machine_info().cpu;
        return plan;
    }
#ifdef CC_HAVE_CUDA
    cuda::DeviceInfo device;
    device.name = in.cuda.device_name;
    device.compute_major = in.cuda.compute_major;
    device.compute_minor = in.cuda.compute_minor;
    plan.numerics = cuda::cuda_numerics_id(device, cuda_options(options));
    plan.device = in.cuda.device_name;
    return plan;
#else
    throw std::logic_error("choose_backend picked cuda in a build without CUDA");
#endif
}

std::unique_ptr<Backend> make_planned_backend(const PlannedBackend& plan, const ModelWeights& weights,
                                              const EngineOptions& options) {
    if (plan.choice.backend == "cpu") return make_cpu_backend(weights, cpu_options(options));
#ifdef CC_HAVE_CUDA
    return cuda::make_cuda_backend(weights, cuda_options(options));
#else
    throw std::logic_error("a CUDA backend was planned in a build without CUDA");
#endif
}

}  // namespace cc
