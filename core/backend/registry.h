// The backends a program offers. Each backend's own folder provides an entry (core/cpu:
// cpu_backend_entry(), cuda/: cuda_backend_entry()); app/ builds the registry and hands it to the
// engine and the UI, so nothing in core/ or ui/ names a device library. The choice among the
// entries stays the pure choose_backend() (backend_choice.h).
#pragma once

#include "core/backend/backend.h"
#include "core/backend/backend_choice.h"
#include "core/model/model_config.h"
#include "core/model/weights.h"

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cc {

// What every backend is built from.
struct BackendOptions {
    int n_threads = 0;                 // CPU threads (0 = all cores); the CUDA backend's host side ignores it
    KvDType kv_dtype = KvDType::f32;
    WeightDType weights = WeightDType::stored;  // the CPU converts; the CUDA backend takes stored only
    int device = 0;                    // device index (CUDA)
    size_t kv_warm_bytes = 0;          // the CPU backend's warm KV pool (CpuBackendOptions::kv_warm_bytes)
    WarmFill kv_warm_fill = WarmFill::on_demand;  // how it fills (CpuBackendOptions::kv_warm_fill)
};

// One row of a backend's self-test on the user's own device: an op or the whole model against
// the CPU reference.
struct SelftestRow {
    std::string check;
    std::string shape;
    double max_error = 0;
    double bound = 0;
    bool pass = false;
    std::string note;
};

struct BackendEntry {
    std::string name;  // "cpu", "cuda": the --backend value
    // Finds the device this backend would use. Never throws. Empty for a backend that needs no
    // device (the CPU), which is always available.
    std::function<CudaProbeSummary()> probe;
    // The numerics id the backend will report (it enters the group_key), for the probed device.
    std::function<std::string(const BackendOptions&, const CudaProbeSummary&)> numerics_id;
    // Device bytes the model needs besides its KV (weights as uploaded, activations, workspace).
    // Empty for a backend that runs from host memory. May throw (the backend refuses the model).
    std::function<size_t(const ModelConfig&, const BackendOptions&)> required_bytes;
    // Builds the backend over `weights` (which must outlive it).
    std::function<std::unique_ptr<Backend>(const ModelWeights&, const BackendOptions&)> make;
    // Optional: a self-test of this backend's ops and of a model (model_spec "" = its default
    // test model) against the CPU reference (`contextcache-cli selftest --backend NAME`).
    std::function<std::vector<SelftestRow>(bool quick, const std::string& model_spec)> selftest;
};

class BackendRegistry {
public:
    // Throws std::invalid_argument for an entry without a name, numerics_id or make, or a name
    // already registered.
    void add(BackendEntry entry);
    const BackendEntry* find(std::string_view name) const;  // nullptr when not registered
    std::vector<std::string> names() const;
    // The GPU device's probe ("cuda" entry), or "built without the CUDA backend" when this
    // program registered none. The one probe the engine, the CLI and the UI all ask.
    CudaProbeSummary probe_gpu() const;

private:
    std::vector<BackendEntry> entries_;
};

// ---- backends built as plugins ------------------------------------------------------------------
// The CUDA backend is a shared object (libcontextcache-cuda.so, cuda/plugin_entry.cpp) that app/
// opens with dlopen only when the NVIDIA driver is installed, so a program on a machine without
// one never maps the CUDA libraries. A plugin exports two C symbols:
//   const char* contextcache_backend_plugin_abi();   // backend_plugin_abi() as the plugin was built
//   void contextcache_backend_plugin_entry(const BackendPluginHost*, BackendEntry*);
// C++ types cross (BackendEntry, std::function, ModelWeights), so the host opens a plugin only
// when the two ABI strings are equal: built by the same compiler in the same build tree.
inline constexpr const char* kBackendPluginAbiSymbol = "contextcache_backend_plugin_abi";
inline constexpr const char* kBackendPluginEntrySymbol = "contextcache_backend_plugin_entry";

// What the host lends a plugin.
struct BackendPluginHost {
    // Loads a --model SPEC with the program's own built-in models (the embedded toolcaller is
    // the program's, not the plugin's): the self-test's models.
    std::function<ModelWeights(const std::string& spec)> load_model;
};

using BackendPluginAbiFn = const char* (*)();
using BackendPluginEntryFn = void (*)(const BackendPluginHost*, BackendEntry*);

// "contextcache-backend-plugin/1 build=<id of the build tree> compiler=<__VERSION__>".
std::string backend_plugin_abi();

}  // namespace cc
