// Group files (DESIGN §7): one compiled prefix per file, groups/<group_key>.kv, immutable once
// renamed into place.
//
// Layout (all integers little-endian; the preamble is kGroupFilePreambleBytes = 48 bytes):
//   offset 0   magic            8 bytes  "CCKVGRP1"
//   offset 8   format_version   u32      kGroupFileVersion
//   offset 12  reserved         u32      0
//   offset 16  header_bytes     u64      length of the JSON header (at most kMaxGroupHeaderBytes)
//   offset 24  header_xxh3      u64      XXH3_64bits of the JSON header bytes
//   offset 32  payload_offset   u64      where the KV starts: (48 + header_bytes) rounded up to 4096
//   offset 40  payload_bytes    u64      n_layers * 2 * n_kv_heads * n_tokens * head_dim * dtype bytes
//   offset 48  JSON header      header_bytes (UTF-8), then zero padding to payload_offset
//   payload    per layer: K then V, each [n_kv_heads, n_tokens, head_dim] in kv_dtype (canonical layout)
//   trailer    n_layers * u64: XXH3_64bits of each layer's K and V bytes (in that order)
// The file size must be exactly payload_offset + payload_bytes + 8 * n_layers.
//
// The JSON header is one object with the fields of GroupMeta (group_meta.h), under the same
// names, in this order: group_key, model_fingerprint, chat_format, backend_numerics, tools_hash,
// tool_names, system_prompt_sha256, n_layers, n_kv_heads, head_dim, kv_dtype, n_tokens (the
// length of prefix_ids), prefix_ids, tool_token_boundaries, created_unix_ms. group_key,
// model_fingerprint, tools_hash and system_prompt_sha256 are 64 lowercase hex digits; kv_dtype is
// "f32" or "bf16"; n_layers, n_kv_heads, head_dim > 0; n_tokens >= 0 and equal to prefix_ids'
// length; tool_token_boundaries is empty (not known) or has one entry per tool name,
// non-decreasing, each in [0, n_tokens].
// One optional field follows them: tool_texts, the canonical text of each tool (canonical order,
// one per tool name), so that `why` can tell which field of which tool a new set changed. A file
// without it reads as empty ("not recorded"); it is written only when known. A reader that does
// not know the field refuses a file that has it (unknown field), as it would any newer header.
#pragma once

#include "core/base/mapped_file.h"
#include "core/store/group_meta.h"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace cc {

inline constexpr uint32_t kGroupFileVersion = 1;
inline constexpr char kGroupFileMagic[8] = {'C', 'C', 'K', 'V', 'G', 'R', 'P', '1'};
inline constexpr size_t kGroupFilePreambleBytes = 48;
inline constexpr size_t kGroupFilePayloadAlign = 4096;
// The header of a 1M-token prefix is ~7 MB of JSON (the ids); anything larger is not a group file.
inline constexpr uint64_t kMaxGroupHeaderBytes = 64ull << 20;

size_t kv_dtype_bytes(KvDType kv_dtype);
// Canonical KV bytes. Throws std::runtime_error for an unknown dtype, a negative dimension or a
// size that overflows.
size_t group_payload_bytes(const GroupMeta& header);
// Bytes of one layer (K and V); group_payload_bytes == n_layers * group_layer_bytes.
size_t group_layer_bytes(const GroupMeta& header);

struct GroupFileWriteOptions {
    // Called after each chunk reaches the file, with the bytes written so far (preamble included).
    // A test hook: it may throw (treated as a failed write: the temp file is removed) or block.
    std::function<void(size_t bytes_written)> on_progress;
    // Bytes per write(2) call for the payload; large, so a 50 MB group is a handful of syscalls.
    size_t chunk_bytes = size_t(8) << 20;
};

// Writes the file atomically: a temp file ".<name>.tmp-<pid>-<random>" in the same directory,
// held under an exclusive flock from its creation until it is renamed (so that
// remove_stale_temp_files can tell a live writer's temp from a dead one's), fsync, rename to
// `path`, fsync of the directory. `payload` is the canonical KV
// (group_payload_bytes(header) bytes); the header is validated as a reader would. Throws
// std::runtime_error "<path>: <problem>" (e.g. disk full, read-only directory) after removing the
// temp file; never leaves a partial file at `path`. An exception thrown by options.on_progress
// that is not a std::system_error propagates unchanged (after the same clean-up).
void write_group_file(const std::filesystem::path& path, const GroupMeta& header,
                      std::span<const std::byte> payload, const GroupFileWriteOptions& options = {});
// The same file from the canonical KV one layer at a time, so the caller never holds a second copy
// of the whole payload: `layers(l, out)` fills layer l's group_layer_bytes(header) bytes.
using GroupLayerSource = std::function<void(int layer, std::span<std::byte> out)>;
void write_group_file(const std::filesystem::path& path, const GroupMeta& header, const GroupLayerSource& layers,
                      const GroupFileWriteOptions& options = {});

// Removes the temp files in `dir` that a writer which died before its rename left behind (SIGKILL,
// power cut): those whose flock nobody holds. A live writer's temp is never touched: it holds the
// lock until its rename. Returns the names removed.
std::vector<std::string> remove_stale_temp_files(const std::filesystem::path& dir);

// The same atomic write for a whole group file's bytes as they came from elsewhere (the remote
// tier): the preamble, header and size are checked first (the checksums are the caller's:
// verify_group_bytes). Throws as write_group_file.
void write_group_file_bytes(const std::filesystem::path& path, std::span<const std::byte> file_bytes);

// The bytes write_group_file would write (what the remote tier stores when there is no file to
// read them from). Throws std::runtime_error for a header that does not validate.
std::vector<std::byte> encode_group_file(const GroupMeta& header, std::span<const std::byte> payload);

// A whole group file held in memory, checked as map_group_file checks a file (preamble, header,
// size, every layer's XXH3). `payload` points into the bytes given. Throws std::runtime_error
// "<source>: <problem>".
struct VerifiedGroupBytes {
    GroupMeta header;
    std::span<const std::byte> payload;
};
VerifiedGroupBytes verify_group_bytes(std::span<const std::byte> file_bytes, const std::string& source);

// Reads and checks the preamble and header only (cheap; used to rebuild the index). Throws
// std::runtime_error "<file>: <problem>" for a bad magic, version, header checksum, JSON, field or
// file size.
GroupMeta read_group_header(const std::filesystem::path& path);

// Parses the preamble + header from bytes (the fuzz entry point's target). `bytes` holds at least
// the preamble and the JSON header (it may be the whole file); `file_size` is the whole file's
// size. Returns the header and the payload offset.
GroupMeta parse_group_header(std::span<const std::byte> bytes, size_t file_size, const std::string& source,
                                   size_t* payload_offset = nullptr);

// Reads the whole file, verifying the header and every layer's checksum in the same pass as the
// copy into `payload_out` (resized to the payload size; reuse it across calls to skip zeroing and
// page faults). Throws naming the file and the layer; `payload_out` is then unspecified.
GroupMeta read_group_file(const std::filesystem::path& path, std::vector<std::byte>& payload_out);

// A group file mapped read-only and checked in place: the same checks as read_group_file
// (preamble, header, file size, every layer's XXH3), hashing the mapping itself; nothing is copied.
// `payload` points into `file`; whoever keeps using it keeps `file` (shared ownership). The
// verification pass runs under MappedFile::read_guarded, so a file truncated underneath it is an
// error like any other damage, never a crash.
struct MappedGroupFile {
    std::shared_ptr<const MappedFile> file;
    GroupMeta header;
    std::span<const std::byte> payload;   // group_payload_bytes(header) bytes of canonical KV
};
// Throws std::runtime_error "<file>: <problem>", as read_group_file.
MappedGroupFile map_group_file(const std::filesystem::path& path);

}  // namespace cc
