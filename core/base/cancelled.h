// The exception every long step throws when cancel() was called (any thread sets an atomic flag;
// the step checks it between layers, tokens or chunks).
#pragma once

#include <stdexcept>

namespace cc {

struct Cancelled : std::runtime_error {
    Cancelled() : std::runtime_error("cancelled") {}
};

}  // namespace cc
