// Fuzz entry point: a whole group file (outside input: files in the cache directory, and the bytes
// a replica fetches from the remote tier), through all three of its readers:
//   verify_group_bytes  the bytes in memory (what the remote tier checks before it keeps them);
//   read_group_file     the file read and checked in one pass (the memory tier's load);
//   map_group_file      the file mapped and checked in place (the disk tier's zero-copy hit);
// plus read_group_header (the index rebuild). Any input must give the same verdict from all three:
// either each throws std::runtime_error naming its source, or each returns the same header and the
// same payload bytes, of group_payload_bytes(header), every layer matching its checksum. Anything
// else (a crash, a hang, another exception, readers that disagree) is a finding.
//
// A mutated file almost never matches its checksums, which would stop the fuzzer at the first
// one; so each input whose preamble and header parse is checked a second time with the header's
// and every layer's XXH3 recomputed: that one must be accepted by every reader.
#include "core/store/group_file.h"

#include <unistd.h>
#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct Verdict {
    std::optional<cc::GroupMeta> header;  // empty: refused
    std::vector<std::byte> payload;
};

const std::filesystem::path& scratch_file() {
    static const std::filesystem::path p =
        std::filesystem::temp_directory_path() / ("cc-fuzz-group-file-" + std::to_string(::getpid()) + ".kv");
    return p;
}

// A refusal must be std::runtime_error and name what it read.
template <typename Read>
Verdict run(Read read, const std::string& source) {
    Verdict v;
    try {
        read(v);
    } catch (const std::runtime_error& e) {
        if (std::string(e.what()).find(source) == std::string::npos) __builtin_trap();
        v.header.reset();
        v.payload.clear();
    }
    return v;
}

// Returns whether the readers accepted the bytes.
bool check(std::span<const std::byte> bytes) {
    const Verdict memory = run(
        [&](Verdict& v) {
            const cc::VerifiedGroupBytes g = cc::verify_group_bytes(bytes, "fuzz-bytes");
            v.header = g.header;
            v.payload.assign(g.payload.begin(), g.payload.end());
        },
        "fuzz-bytes");

    const std::filesystem::path& path = scratch_file();
    {
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
        if (!out) __builtin_trap();
    }
    const Verdict read = run(
        [&](Verdict& v) { v.header = cc::read_group_file(path, v.payload); }, path.string());
    const Verdict mapped = run(
        [&](Verdict& v) {
            const cc::MappedGroupFile g = cc::map_group_file(path);
            v.header = g.header;
            v.payload.assign(g.payload.begin(), g.payload.end());
        },
        path.string());
    const Verdict header_only = run([&](Verdict& v) { v.header = cc::read_group_header(path); }, path.string());

    for (const Verdict* other : {&read, &mapped}) {
        if (other->header.has_value() != memory.header.has_value()) __builtin_trap();
        if (memory.header && (!(*other->header == *memory.header) || other->payload != memory.payload))
            __builtin_trap();
    }
    if (!memory.header) return false;
    // Accepted: the header reader agrees, and the payload is exactly what the header describes.
    if (!header_only.header || !(*header_only.header == *memory.header)) __builtin_trap();
    const size_t payload_bytes = cc::group_payload_bytes(*memory.header);
    if (memory.payload.size() != payload_bytes) __builtin_trap();
    if (payload_bytes != static_cast<size_t>(memory.header->n_layers) * cc::group_layer_bytes(*memory.header))
        __builtin_trap();
    return true;
}

// The same bytes with the header's and every layer's checksum recomputed; nullopt when the preamble
// or the header does not parse (the layout is then unknown).
std::optional<std::vector<std::byte>> with_checksums_fixed(std::span<const std::byte> bytes) {
    if (bytes.size() < cc::kGroupFilePreambleBytes) return std::nullopt;
    std::vector<std::byte> fixed(bytes.begin(), bytes.end());
    uint64_t header_bytes;
    std::memcpy(&header_bytes, fixed.data() + 16, 8);
    if (header_bytes > fixed.size() - cc::kGroupFilePreambleBytes) return std::nullopt;
    const uint64_t header_sum = XXH3_64bits(fixed.data() + cc::kGroupFilePreambleBytes, header_bytes);
    std::memcpy(fixed.data() + 24, &header_sum, 8);
    size_t payload_offset = 0;
    cc::GroupMeta h;
    try {
        h = cc::parse_group_header(fixed, fixed.size(), "fuzz-fixed", &payload_offset);
    } catch (const std::runtime_error&) {
        return std::nullopt;
    }
    const size_t layer_bytes = cc::group_layer_bytes(h);
    const size_t trailer = payload_offset + cc::group_payload_bytes(h);
    for (int l = 0; l < h.n_layers; ++l) {
        const uint64_t sum = XXH3_64bits(fixed.data() + payload_offset + static_cast<size_t>(l) * layer_bytes, layer_bytes);
        std::memcpy(fixed.data() + trailer + 8 * static_cast<size_t>(l), &sum, 8);
    }
    return fixed;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
    check(bytes);
    if (const auto fixed = with_checksums_fixed(bytes))
        if (!check(*fixed)) __builtin_trap();  // the header parsed and every checksum now matches
    return 0;
}
