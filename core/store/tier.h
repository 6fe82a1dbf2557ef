// Where a prefix's K/V came from (DESIGN §7): a tier of the cache, fastest first, or none of them.
// Results carry the enum; its name is written only where they are shown (JSON, text, the app).
#pragma once

#include <iosfwd>
#include <string_view>

namespace cc {

enum class Tier {
    gpu,     // device memory (a backend that keeps KV on the device)
    memory,  // host RAM
    disk,    // a group file (mapped and verified when linked)
    remote,  // the shared remote tier (Redis, remote_tier.h): fetched, verified, promoted to disk and memory
    miss     // in no tier: computed now (or, before a lookup, not cached)
};
const char* tier_name(Tier tier);        // "gpu" | "memory" | "disk" | "remote" | "miss"
Tier parse_tier(std::string_view name);  // throws std::invalid_argument naming the value
std::ostream& operator<<(std::ostream& out, Tier tier);  // writes tier_name(tier)
// No implicit JSON: nlohmann would write the enum as a number. Output writes tier_name(tier).
template <class Json>
void to_json(Json&, Tier) = delete;

}  // namespace cc
