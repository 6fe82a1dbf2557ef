// Fuzz entry point: tools files (outside input). Any input must give a ToolSet or a
// std::runtime_error, never a crash, a hang or another exception type.
#include "core/text/tool_set.h"

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        const auto set = cc::ToolSet::from_json_text(text, "fuzz.json");
        // Whatever parses must round-trip: its canonical export parses to the same hash.
        const auto again = cc::ToolSet::from_json_text(cc::py_json_dumps(set.to_json()), "export.json");
        if (again.tools_hash() != set.tools_hash()) __builtin_trap();
    } catch (const std::runtime_error&) {
    }
    return 0;
}
