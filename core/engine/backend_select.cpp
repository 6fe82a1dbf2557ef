#include "core/engine/backend_select.h"

#include "core/base/machine_info.h"
#include "core/cpu/cpu_backend.h"
#include "core/model/builtin_model.h"
#include "core/model/model_spec.h"

#include <stdexcept>

namespace cc {

namespace {

BackendOptions backend_options(const EngineOptions& options) {
    BackendOptions o;
    o.n_threads = options.n_threads;
    o.kv_dtype = options.kv_dtype;
    o.weights = options.weights;
    o.device = 0;
    o.kv_warm_bytes = options.kv_warm_bytes;
    o.kv_warm_fill = options.kv_warm_fill;
    return o;
}

const BackendEntry& entry(const BackendRegistry& backends, const std::string& name) {
    const BackendEntry* e = backends.find(name);
    if (!e) throw std::logic_error("backend \"" + name + "\" was chosen but is not registered");
    return *e;
}

}  // namespace

std::shared_ptr<const BackendRegistry> cpu_only_backends() {
    auto r = std::make_shared<BackendRegistry>();
    r->add(cpu_backend_entry());
    return r;
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

PlannedBackend plan_backend(const EngineOptions& options, const ModelConfig& config, const BackendRegistry& backends) {
    const BackendOptions bo = backend_options(options);
    BackendChoiceInputs in;
    in.requested = options.backend;
    if (options.backend != "cpu") {  // "cpu" never touches the driver (fast, and works in any sandbox)
        in.cuda = backends.probe_gpu();
        const BackendEntry* gpu = backends.find("cuda");
        if (in.cuda.available && gpu && gpu->required_bytes) {
            try {
                // Plus the KV of one 4,096-token context (required_bytes counts no KV): a model
                // that only just fits would fail at its first long query.
                constexpr size_t kKvHeadroomTokens = 4096;
                const size_t kv_per_token = size_t(config.n_layers) * 2 * size_t(config.n_kv_heads) *
                                            size_t(config.head_dim) * (options.kv_dtype == KvDType::f32 ? 4 : 2);
                in.required_bytes = gpu->required_bytes(config, bo) + kv_per_token * kKvHeadroomTokens;
            } catch (const std::exception& e) {
                in.required_bytes_error = e.what();
            }
        }
    }
    PlannedBackend plan;
    plan.choice = choose_backend(in);
    const BackendEntry& chosen = entry(backends, plan.choice.backend);
    plan.numerics = chosen.numerics_id(bo, in.cuda);
    plan.device = chosen.probe ? in.cuda.device_name : machine_info().cpu;
    return plan;
}

std::unique_ptr<Backend> make_planned_backend(const PlannedBackend& plan, const ModelWeights& weights,
                                              const EngineOptions& options, const BackendRegistry& backends) {
    return entry(backends, plan.choice.backend).make(weights, backend_options(options));
}

}  // namespace cc
