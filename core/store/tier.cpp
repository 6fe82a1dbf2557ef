#include "core/store/tier.h"

#include <ostream>
#include <stdexcept>
#include <string>

namespace cc {

const char* tier_name(Tier tier) {
    switch (tier) {
        case Tier::gpu: return "gpu";
        case Tier::memory: return "memory";
        case Tier::disk: return "disk";
        case Tier::remote: return "remote";
        case Tier::miss: return "miss";
    }
    return "?";
}

Tier parse_tier(std::string_view name) {
    for (const Tier t : {Tier::gpu, Tier::memory, Tier::disk, Tier::remote, Tier::miss})
        if (name == tier_name(t)) return t;
    throw std::invalid_argument("tier must be gpu, memory, disk, remote or miss, not \"" + std::string(name) + "\"");
}

std::ostream& operator<<(std::ostream& out, Tier tier) { return out << tier_name(tier); }

}  // namespace cc
