// The one place that wires backends: the CPU always; the CUDA backend, in a build that has it, as
// a plugin opened at run time (libcontextcache-cuda.so) only where the NVIDIA driver is installed.
// The CLI and the GUI hand the result to the engine and the UI.
#pragma once

#include "core/backend/registry.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace cc::app {

std::shared_ptr<const BackendRegistry> available_backends();

// Opens the backend plugin at `path` (dlopen, every symbol bound now), checks that it was built
// in this build tree (backend_plugin_abi()) and returns its entry. The plugin stays open for the
// life of the process. Throws std::runtime_error naming the file and the reason.
BackendEntry open_backend_plugin(const std::filesystem::path& path);

// Where the CUDA plugin is looked for, in order: $CONTEXTCACHE_CUDA_PLUGIN when set (only
// there); next to the running program; where this build tree built it. Empty in a build without
// the CUDA backend.
std::vector<std::filesystem::path> cuda_plugin_candidates();

}  // namespace cc::app
