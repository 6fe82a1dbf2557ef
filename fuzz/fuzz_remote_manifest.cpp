// Fuzz entry point: a group's manifest in the remote tier (core/store/remote_tier.h). It is read
// from a Redis that any replica, or anyone who can reach it, may have written. Any input must give
// a manifest whose chunks are non-empty, add up to file_bytes and are keyed by their own checksum,
// or a std::runtime_error: never a crash, a hang or another exception.
//
// The group key the replica asks for is fixed (64 'a'); the seeds and the dictionary carry it, so
// the fuzzer reaches the fields behind that check.
#include "core/store/remote_tier.h"

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::string key(64, 'a');
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    for (const std::string_view prefix : {"cc:", ""}) {
        try {
            const cc::RemoteManifest m = cc::parse_remote_manifest(text, key, prefix);
            uint64_t total = 0;
            for (const auto& c : m.chunks) {
                if (c.bytes == 0 || c.xxh128.size() != 32) __builtin_trap();
                if (c.key != cc::remote_chunk_key(prefix, c.xxh128)) __builtin_trap();
                total += c.bytes;
            }
            if (m.file_bytes == 0 || total != m.file_bytes || m.file_xxh128.size() != 32) __builtin_trap();
        } catch (const std::runtime_error&) {
        }
    }
    return 0;
}
