// Fuzz entry point: group file preamble + JSON header (outside input: files in the cache
// directory). Any input must give a header whose shape accounts for the file's size exactly, or a
// std::runtime_error, never a crash, a hang or another exception.
//
// A mutated header almost never matches its XXH3, which would stop the fuzzer at the checksum; so
// each input is also parsed a second time with the checksum recomputed, to reach the JSON and
// field checks behind it.
#include "core/store/group_file.h"

#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <vector>

namespace {

void parse_and_check(std::span<const std::byte> bytes) {
    try {
        size_t payload_offset = 0;
        const cc::GroupMeta h = cc::parse_group_header(bytes, bytes.size(), "fuzz.kv", &payload_offset);
        const size_t payload = cc::group_payload_bytes(h);
        if (payload_offset % cc::kGroupFilePayloadAlign != 0) __builtin_trap();
        if (payload_offset + payload + 8 * static_cast<size_t>(h.n_layers) != bytes.size()) __builtin_trap();
        // empty boundaries mean "not known" (file-formats.md); otherwise one per tool
        if (!h.tool_token_boundaries.empty() && h.tool_token_boundaries.size() != h.tool_names.size()) __builtin_trap();
        if (!h.tool_texts.empty() && h.tool_texts.size() != h.tool_names.size()) __builtin_trap();
        for (const int b : h.tool_token_boundaries)
            if (b < 0 || static_cast<size_t>(b) > h.n_tokens()) __builtin_trap();
    } catch (const std::runtime_error&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
    parse_and_check(bytes);

    if (size < cc::kGroupFilePreambleBytes) return 0;
    uint64_t header_bytes;
    std::memcpy(&header_bytes, data + 16, 8);
    if (header_bytes > size - cc::kGroupFilePreambleBytes) return 0;
    std::vector<std::byte> fixed(bytes.begin(), bytes.end());
    const uint64_t sum = XXH3_64bits(data + cc::kGroupFilePreambleBytes, header_bytes);
    std::memcpy(fixed.data() + 24, &sum, 8);
    parse_and_check(fixed);
    return 0;
}
