// The one place that wires backends: the CPU always, the CUDA backend when this build has it.
// The CLI and the GUI hand the result to the engine and the UI.
#pragma once

#include "core/backend/registry.h"

#include <memory>

namespace cc::app {

std::shared_ptr<const BackendRegistry> available_backends();

}  // namespace cc::app
