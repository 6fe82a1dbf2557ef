// The CUDA backend's entry in the backend registry: plain C++ over cuda_backend.h, so app/ wires
// it without CUDA headers.
#include "cuda/cuda_backend.h"

#include <stdexcept>
#include <string>

namespace cc::cuda {

namespace {

CudaBackendOptions cuda_options(const BackendOptions& o) {
    // The device keeps the checkpoint's weights as uploaded (BF16 GEMMs through cuBLAS); the
    // converted formats are the CPU backend's.
    if (o.weights != WeightDType::stored)
        throw std::runtime_error(std::string("--weights ") + weight_dtype_name(o.weights) +
                                 " is a CPU backend format; the cuda backend takes the checkpoint's weights as stored "
                                 "(use --backend cpu, or --weights stored)");
    CudaBackendOptions c;
    c.device = o.device;
    c.kv_dtype = o.kv_dtype;
    c.mma_attention = mma_attention_from_env();
    c.stacked_batch = stacked_batch_from_env();
    c.graphs = graphs_from_env();
    c.graph_replay = graph_replay_from_env();
    c.own_gemm = own_gemm_from_env();
    c.upload_ring = upload_ring_from_env();
    c.device_greedy = device_greedy_from_env();
    c.fused_kernels = fused_kernels_from_env();
    return c;
}

CudaProbeSummary probe_summary() {
    CudaProbeSummary s;
    s.compiled = true;
    try {
        const Probe p = probe();
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
                s.free_bytes = device_free_bytes(0);
            } catch (const std::exception& e) {
                s.free_bytes_error = e.what();
            }
        }
    } catch (const std::exception& e) {  // probe() promises not to throw; be safe anyway
        s.available = false;
        s.message = std::string("CUDA probe failed: ") + e.what();
    }
    return s;
}

}  // namespace

BackendEntry cuda_backend_entry(std::function<ModelWeights(const std::string& spec)> load_model) {
    BackendEntry e;
    e.name = "cuda";
    e.probe = probe_summary;
    e.numerics_id = [](const BackendOptions& o, const CudaProbeSummary& probe) {
        DeviceInfo device;
        device.name = probe.device_name;
        device.compute_major = probe.compute_major;
        device.compute_minor = probe.compute_minor;
        return cuda_numerics_id(device, cuda_options(o));
    };
    e.required_bytes = [](const ModelConfig& config, const BackendOptions& o) { return cuda_required_bytes(config, cuda_options(o)); };
    e.make = [](const ModelWeights& w, const BackendOptions& o) { return make_cuda_backend(w, cuda_options(o)); };
    e.selftest = [load_model](bool quick, const std::string& model_spec) {
        SelftestOptions o;
        o.load_model = load_model;
        o.quick = quick;
        o.model_spec = model_spec;
        std::vector<cc::SelftestRow> rows;
        for (const auto& r : run_selftest(o)) rows.push_back(cc::SelftestRow{r.check, r.shape, r.max_error, r.bound, r.pass, r.note});
        return rows;
    };
    return e;
}

}  // namespace cc::cuda
