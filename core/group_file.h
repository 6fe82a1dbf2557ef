// Group files (DESIGN §7): one compiled prefix per file, groups/<group_key>.kv, immutable once
// renamed into place.
//
// Layout (all integers little-endian):
//   offset 0   magic            8 bytes  "CCKVGRP1"
//   offset 8   format_version   u32      kGroupFileVersion
//   offset 12  reserved         u32      0
//   offset 16  header_bytes     u64      length of the JSON header
//   offset 24  header_xxh3      u64      XXH3_64bits of the JSON header bytes
//   offset 32  payload_offset   u64      where the KV starts: (32 + header_bytes) rounded up to 4096
//   offset 40  payload_bytes    u64      n_layers * 2 * n_kv_heads * n_tokens * head_dim * dtype bytes
//   offset 48  JSON header      header_bytes (UTF-8), then zero padding to payload_offset
//   payload    per layer: K then V, each [n_kv_heads, n_tokens, head_dim] in kv_dtype (canonical layout)
//   trailer    n_layers * u64: XXH3_64bits of each layer's K and V bytes (in that order)
// The file size must be exactly payload_offset + payload_bytes + 8 * n_layers.
#pragma once

#include "core/tokenizer.h"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace cc {

inline constexpr uint32_t kGroupFileVersion = 1;
inline constexpr char kGroupFileMagic[8] = {'C', 'C', 'K', 'V', 'G', 'R', 'P', '1'};

struct GroupFileHeader {
    std::string group_key;
    std::string model_fingerprint;
    std::string chat_format;
    std::string backend_numerics;
    std::string tools_hash;
    std::vector<std::string> tool_names;
    std::string system_prompt_sha256;
    int n_layers = 0;
    int n_kv_heads = 0;
    int head_dim = 0;
    std::string kv_dtype;                     // "f32" | "bf16"
    int n_tokens = 0;
    std::vector<token_id> prefix_ids;         // n_tokens ids
    std::vector<int> tool_token_boundaries;   // token index where each tool's text starts (canonical order)
    int64_t created_unix_ms = 0;
};

size_t kv_dtype_bytes(const std::string& kv_dtype);          // throws on an unknown name
size_t group_payload_bytes(const GroupFileHeader& header);   // canonical KV bytes

// Writes the file atomically: a temp file in the same directory, fsync, rename to `path`, fsync
// of the directory. `payload` is the canonical KV (group_payload_bytes(header) bytes). Throws
// std::runtime_error naming the file (e.g. disk full, read-only directory); never leaves a partial
// file at `path`.
void write_group_file(const std::filesystem::path& path, const GroupFileHeader& header,
                      std::span<const std::byte> payload);

// Reads and checks the preamble and header only (cheap; used to rebuild the index). Throws
// std::runtime_error "<file>: <problem>" for a bad magic, version, header checksum, JSON, field or
// file size.
GroupFileHeader read_group_header(const std::filesystem::path& path);

// Parses the preamble + header from bytes (the fuzz entry point's target). `file_size` is the whole
// file's size. Returns the header and the payload offset.
GroupFileHeader parse_group_header(std::span<const std::byte> bytes, size_t file_size, const std::string& source,
                                   size_t* payload_offset = nullptr);

// Reads the whole file, verifying the header and every layer's checksum in the same pass as the
// copy into `payload_out` (resized to the payload size). Throws naming the file and the layer.
GroupFileHeader read_group_file(const std::filesystem::path& path, std::vector<std::byte>& payload_out);

}  // namespace cc
