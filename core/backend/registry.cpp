#include "core/backend/registry.h"

#include <stdexcept>

namespace cc {

void BackendRegistry::add(BackendEntry entry) {
    if (entry.name.empty()) throw std::invalid_argument("backend registry: an entry has no name");
    if (!entry.numerics_id || !entry.make)
        throw std::invalid_argument("backend registry: entry \"" + entry.name + "\" lacks numerics_id or make");
    if (find(entry.name)) throw std::invalid_argument("backend registry: \"" + entry.name + "\" is registered twice");
    entries_.push_back(std::move(entry));
}

const BackendEntry* BackendRegistry::find(std::string_view name) const {
    for (const auto& e : entries_)
        if (e.name == name) return &e;
    return nullptr;
}

std::vector<std::string> BackendRegistry::names() const {
    std::vector<std::string> out;
    for (const auto& e : entries_) out.push_back(e.name);
    return out;
}

CudaProbeSummary BackendRegistry::probe_gpu() const {
    const BackendEntry* cuda = find("cuda");
    if (!cuda || !cuda->probe) {
        CudaProbeSummary s;
        s.message = "built without the CUDA backend";
        return s;
    }
    return cuda->probe();
}

std::string backend_plugin_abi() {
    return std::string("contextcache-backend-plugin/1 build=") + CC_BACKEND_PLUGIN_BUILD_ID + " compiler=" + __VERSION__;
}

}  // namespace cc
