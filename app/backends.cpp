#include "app/backends.h"

#include "core/cpu/cpu_backend.h"
#include "core/model/model_spec.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <system_error>

namespace cc::app {

namespace fs = std::filesystem;

namespace {

std::string dl_error() {
    const char* e = dlerror();
    return e ? e : "unknown dlopen error";
}

#ifdef CC_HAVE_CUDA

// Whether the NVIDIA driver's user-space library is installed: without it no CUDA device can be
// used, and the plugin (and with it cudart, cuBLAS, cuBLASLt) is not opened at all. The handle is
// kept: the CUDA runtime opens the same library.
std::optional<std::string> nvidia_driver_missing() {
    static const std::optional<std::string> why = []() -> std::optional<std::string> {
        if (dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) return std::nullopt;
        return "the NVIDIA driver is not installed (" + dl_error() + ")";  // dlerror names libcuda.so.1
    }();
    return why;
}

struct CudaPlugin {
    std::optional<BackendEntry> entry;
    std::string error;  // why there is none
};

// Opened once, on first use.
const CudaPlugin& cuda_plugin() {
    static const CudaPlugin plugin = [] {
        CudaPlugin p;
        std::string tried;
        for (const auto& path : cuda_plugin_candidates()) {
            std::error_code ec;
            if (!fs::exists(path, ec)) {
                tried += (tried.empty() ? "" : ", ") + path.string();
                continue;
            }
            try {
                p.entry = open_backend_plugin(path);
            } catch (const std::exception& e) {
                p.error = e.what();
            }
            return p;
        }
        p.error = "the CUDA backend plugin " CC_CUDA_PLUGIN_NAME " was not found (looked for " + tried + ")";
        return p;
    }();
    return plugin;
}

const BackendEntry& cuda_plugin_or_throw() {
    const CudaPlugin& p = cuda_plugin();
    if (!p.entry) throw std::runtime_error(p.error);
    return *p.entry;
}

// The registry's "cuda" entry: the probe opens nothing where the driver is missing; everything
// else opens the plugin on first use.
BackendEntry cuda_entry() {
    BackendEntry e;
    e.name = "cuda";
    e.probe = [] {
        if (const auto why = nvidia_driver_missing()) {
            CudaProbeSummary s;
            s.compiled = true;
            s.message = "no CUDA device: " + *why;
            return s;
        }
        const CudaPlugin& p = cuda_plugin();
        if (!p.entry) {
            CudaProbeSummary s;
            s.compiled = true;
            s.message = "CUDA backend unavailable: " + p.error;
            return s;
        }
        return p.entry->probe();
    };
    e.numerics_id = [](const BackendOptions& o, const CudaProbeSummary& probe) { return cuda_plugin_or_throw().numerics_id(o, probe); };
    e.required_bytes = [](const ModelConfig& config, const BackendOptions& o) { return cuda_plugin_or_throw().required_bytes(config, o); };
    e.make = [](const ModelWeights& w, const BackendOptions& o) { return cuda_plugin_or_throw().make(w, o); };
    e.selftest = [](bool quick, const std::string& model_spec) { return cuda_plugin_or_throw().selftest(quick, model_spec); };
    return e;
}

#endif  // CC_HAVE_CUDA

}  // namespace

std::vector<fs::path> cuda_plugin_candidates() {
#ifdef CC_HAVE_CUDA
    if (const char* env = std::getenv("CONTEXTCACHE_CUDA_PLUGIN"); env && *env) return {fs::path(env)};
    std::vector<fs::path> out;
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) out.push_back(exe.parent_path() / CC_CUDA_PLUGIN_NAME);
    if (fs::path built = CC_CUDA_PLUGIN_BUILD_PATH; out.empty() || built != out.front()) out.push_back(std::move(built));
    return out;
#else
    return {};
#endif
}

BackendEntry open_backend_plugin(const fs::path& path) {
    // dlopen and dlerror share per-thread state; two threads opening plugins at once is harmless,
    // but one lock keeps each error message with its call.
    static std::mutex mutex;
    const std::lock_guard lock(mutex);
    const std::string where = "backend plugin " + path.string() + ": ";
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) throw std::runtime_error(where + dl_error());
    auto abi = reinterpret_cast<BackendPluginAbiFn>(dlsym(handle, kBackendPluginAbiSymbol));
    auto entry = reinterpret_cast<BackendPluginEntryFn>(dlsym(handle, kBackendPluginEntrySymbol));
    if (!abi || !entry) {
        dlclose(handle);
        throw std::runtime_error(where + "not a ContextCache backend plugin (no " + kBackendPluginAbiSymbol + " / " +
                                 kBackendPluginEntrySymbol + ")");
    }
    const std::string theirs = abi(), ours = backend_plugin_abi();
    if (theirs != ours) {
        dlclose(handle);
        throw std::runtime_error(where + "built for another program (plugin ABI \"" + theirs + "\", this program's \"" + ours +
                                 "\"); use the plugin built with this program");
    }
    BackendPluginHost host;
    host.load_model = [](const std::string& spec) { return load_model_weights(spec); };
    BackendEntry out;
    entry(&host, &out);
    if (out.name.empty() || !out.numerics_id || !out.make) throw std::runtime_error(where + "returned an incomplete entry");
    return out;  // the handle stays open: `out` holds the plugin's code
}

std::shared_ptr<const BackendRegistry> available_backends() {
    auto r = std::make_shared<BackendRegistry>();
    r->add(cpu_backend_entry());
#ifdef CC_HAVE_CUDA
    r->add(cuda_entry());
#endif
    return r;
}

}  // namespace cc::app
