// A plugin of another build: it exports the two entry symbols, with an ABI string no host has.
// test_backend_plugin checks that the host refuses it before calling its entry.
#include <cstdlib>

namespace cc {
struct BackendPluginHost;
struct BackendEntry;
}  // namespace cc

extern "C" __attribute__((visibility("default"))) const char* contextcache_backend_plugin_abi() {
    return "contextcache-backend-plugin/1 build=another-tree compiler=another";
}

extern "C" __attribute__((visibility("default"))) void contextcache_backend_plugin_entry(const cc::BackendPluginHost*, cc::BackendEntry*) {
    std::abort();  // never reached: the host refuses the ABI first
}
