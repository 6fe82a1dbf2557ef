// libcontextcache-cuda.so's two exported symbols (core/backend/registry.h, "backends built as
// plugins"): app/backends.cpp opens this plugin only where the NVIDIA driver is installed.
#include "cuda/cuda_backend.h"

#include <string>

#define CC_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))

CC_PLUGIN_EXPORT const char* contextcache_backend_plugin_abi() {
    static const std::string abi = cc::backend_plugin_abi();
    return abi.c_str();
}

CC_PLUGIN_EXPORT void contextcache_backend_plugin_entry(const cc::BackendPluginHost* host, cc::BackendEntry* out) {
    *out = cc::cuda::cuda_backend_entry(host ? host->load_model : nullptr);
}
