#include "core/store/group_file.h"

#include "core/base/json_text.h"

#include <xxhash.h>
#if defined(__x86_64__) && __has_include(<xxh_x86dispatch.h>)
// Debian's libxxhash exports runtime-dispatched (SSE2/AVX2/AVX-512) entry points; the plain ones
// are built for SSE2 only. Same hashes, 2-3x the speed on AVX2 machines.
#include <xxh_x86dispatch.h>
#endif

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace cc {
namespace {

static_assert(std::endian::native == std::endian::little, "group files are little-endian; add byte swaps");

// Hash a chunk, then copy it while it is still in L2: one pass over the source for both.
constexpr size_t kReadChunkBytes = size_t(256) << 10;

[[noreturn]] void fail(const std::string& source, const std::string& problem) {
    throw std::runtime_error(source + ": " + problem);
}

std::string hex64(uint64_t v) {
    char buf[19];
    std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
    return buf;
}

uint64_t load_u64(const std::byte* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}
uint32_t load_u32(const std::byte* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
void store_u64(std::byte* p, uint64_t v) {
    std::memcpy(p, &v, 8);
}
void store_u32(std::byte* p, uint32_t v) {
    std::memcpy(p, &v, 4);
}

// a * b, or fail when it does not fit in size_t.
size_t mul_checked(size_t a, size_t b, const char* what) {
    size_t r;
    if (__builtin_mul_overflow(a, b, &r)) throw std::runtime_error(std::string(what) + " overflows");
    return r;
}
size_t add_checked(size_t a, size_t b, const char* what) {
    size_t r;
    if (__builtin_add_overflow(a, b, &r)) throw std::runtime_error(std::string(what) + " overflows");
    return r;
}

size_t round_up(size_t n, size_t align) {
    return add_checked(n, align - 1, "payload offset") / align * align;
}

bool is_lower_hex64(const std::string& s) {
    return s.size() == 64 &&
           std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// ---- the JSON header ----------------------------------------------------------------------

// Every field, in the order they are written. A reader refuses a header missing any or with others.
constexpr const char* kFieldNames[] = {"group_key",
                                       "model_fingerprint",
                                       "chat_format",
                                       "backend_numerics",
                                       "tools_hash",
                                       "tool_names",
                                       "system_prompt_sha256",
                                       "n_layers",
                                       "n_kv_heads",
                                       "head_dim",
                                       "kv_dtype",
                                       "n_tokens",
                                       "prefix_ids",
                                       "tool_token_boundaries",
                                       "created_unix_ms"};
// Fields a header may leave out (older files): written after the others, only when known.
constexpr const char* kOptionalFieldNames[] = {"tool_texts"};

ordered_json header_to_json(const GroupMeta& h) {
    ordered_json j;
    j["group_key"] = h.group_key;
    j["model_fingerprint"] = h.model_fingerprint;
    j["chat_format"] = h.chat_format;
    j["backend_numerics"] = h.backend_numerics;
    j["tools_hash"] = h.tools_hash;
    j["tool_names"] = h.tool_names;
    j["system_prompt_sha256"] = h.system_prompt_sha256;
    j["n_layers"] = h.n_layers;
    j["n_kv_heads"] = h.n_kv_heads;
    j["head_dim"] = h.head_dim;
    j["kv_dtype"] = kv_dtype_name(h.kv_dtype);
    j["n_tokens"] = h.n_tokens();
    j["prefix_ids"] = h.prefix_ids;
    j["tool_token_boundaries"] = h.tool_token_boundaries;
    j["created_unix_ms"] = h.created_unix_ms;
    if (!h.tool_texts.empty()) j["tool_texts"] = h.tool_texts;
    return j;
}

const std::string& get_string(const ordered_json& j, const char* key, const std::string& source) {
    const auto& v = j.at(key);
    if (!v.is_string()) fail(source, std::string("header field \"") + key + "\" must be a string");
    return v.get_ref<const std::string&>();
}

// An integer in [lo, hi] (JSON floats such as 2.0 are refused).
bool as_int(const ordered_json& v, int64_t lo, int64_t hi, int64_t& out) {
    if (v.is_number_unsigned()) {
        const uint64_t u = v.get<uint64_t>();
        if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
        out = static_cast<int64_t>(u);
    } else if (v.is_number_integer()) {
        out = v.get<int64_t>();
    } else {
        return false;
    }
    return out >= lo && out <= hi;
}

[[noreturn]] void fail_range(const std::string& source, const std::string& what, int64_t lo, int64_t hi) {
    fail(source, what + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

int64_t get_int(const ordered_json& j, const char* key, int64_t lo, int64_t hi, const std::string& source) {
    int64_t x;
    if (!as_int(j.at(key), lo, hi, x)) fail_range(source, std::string("header field \"") + key + "\"", lo, hi);
    return x;
}

int get_int_field(const ordered_json& j, const char* key, int lo, const std::string& source) {
    return static_cast<int>(get_int(j, key, lo, std::numeric_limits<int>::max(), source));
}

template <typename T>
std::vector<T> get_int_array(const ordered_json& j, const char* key, const std::string& source) {
    const auto& v = j.at(key);
    if (!v.is_array()) fail(source, std::string("header field \"") + key + "\" must be an array of integers");
    constexpr int64_t hi = std::numeric_limits<T>::max();
    std::vector<T> out;
    out.reserve(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
        int64_t x;
        if (!as_int(v[i], 0, hi, x)) fail_range(source, std::string(key) + "[" + std::to_string(i) + "]", 0, hi);
        out.push_back(static_cast<T>(x));
    }
    return out;
}

// nlohmann keeps one of two equal keys silently; a header naming a field twice is ambiguous.
// Counts the top-level keys of the (already parsed, hence valid and shallow) text with a SAX pass,
// which builds nothing.
size_t count_top_level_keys(std::string_view text) {
    struct Counter : nlohmann::json_sax<nlohmann::json> {
        int depth = 0;
        size_t n_keys = 0;
        bool null() override { return true; }
        bool boolean(bool) override { return true; }
        bool number_integer(number_integer_t) override { return true; }
        bool number_unsigned(number_unsigned_t) override { return true; }
        bool number_float(number_float_t, const string_t&) override { return true; }
        bool string(string_t&) override { return true; }
        bool binary(binary_t&) override { return true; }
        bool start_object(std::size_t) override { return ++depth, true; }
        bool end_object() override { return --depth, true; }
        bool start_array(std::size_t) override { return ++depth, true; }
        bool end_array() override { return --depth, true; }
        bool key(string_t&) override {
            if (depth == 1) ++n_keys;
            return true;
        }
        bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
    } counter;
    nlohmann::json::sax_parse(text.begin(), text.end(), &counter);
    return counter.n_keys;
}

// The checks shared by the writer (before a byte is written) and the reader. Types are checked
// by the JSON decoding; this is every rule between fields. `n_tokens` is the header's own count
// of the prefix ids (the reader's field; the writer's is h.n_tokens()).
void validate_header(const GroupMeta& h, size_t n_tokens, const std::string& source) {
    const std::pair<const char*, const std::string*> hex_fields[] = {{"group_key", &h.group_key},
                                                                     {"model_fingerprint", &h.model_fingerprint},
                                                                     {"tools_hash", &h.tools_hash},
                                                                     {"system_prompt_sha256", &h.system_prompt_sha256}};
    for (const auto& [name, value] : hex_fields)
        if (!is_lower_hex64(*value))
            fail(source, std::string("header field \"") + name + "\" must be 64 lowercase hex digits");
    if (h.chat_format.empty()) fail(source, "header field \"chat_format\" is empty");
    if (h.backend_numerics.empty()) fail(source, "header field \"backend_numerics\" is empty");
    if (h.n_layers <= 0) fail(source, "n_layers " + std::to_string(h.n_layers) + " must be > 0");
    if (h.n_kv_heads <= 0) fail(source, "n_kv_heads " + std::to_string(h.n_kv_heads) + " must be > 0");
    if (h.head_dim <= 0) fail(source, "head_dim " + std::to_string(h.head_dim) + " must be > 0");
    if (h.prefix_ids.size() != n_tokens)
        fail(source, "prefix_ids has " + std::to_string(h.prefix_ids.size()) + " ids, n_tokens is " +
                         std::to_string(n_tokens));
    for (size_t i = 0; i < h.prefix_ids.size(); ++i)
        if (h.prefix_ids[i] < 0) fail(source, "prefix_ids[" + std::to_string(i) + "] is negative");
    // Empty means "not known" (the tokenizer's pieces did not map to bytes one to one).
    if (!h.tool_token_boundaries.empty() && h.tool_token_boundaries.size() != h.tool_names.size())
        fail(source, "tool_token_boundaries has " + std::to_string(h.tool_token_boundaries.size()) + " entries for " +
                         std::to_string(h.tool_names.size()) + " tool names");
    for (size_t i = 0; i < h.tool_token_boundaries.size(); ++i) {
        const int b = h.tool_token_boundaries[i];
        if (b < 0 || static_cast<size_t>(b) > n_tokens)
            fail(source, "tool_token_boundaries[" + std::to_string(i) + "] = " + std::to_string(b) +
                             " is outside [0, n_tokens = " + std::to_string(n_tokens) + "]");
        if (i > 0 && b < h.tool_token_boundaries[i - 1])
            fail(source, "tool_token_boundaries[" + std::to_string(i) + "] = " + std::to_string(b) +
                             " is below the one before it");
    }
    if (h.created_unix_ms < 0) fail(source, "created_unix_ms is negative");
    // Empty means "not recorded" (a file from before tool_texts).
    if (!h.tool_texts.empty() && h.tool_texts.size() != h.tool_names.size())
        fail(source, "tool_texts has " + std::to_string(h.tool_texts.size()) + " entries for " +
                         std::to_string(h.tool_names.size()) + " tool names");
    try {
        (void)group_payload_bytes(h);
    } catch (const std::runtime_error& e) {
        fail(source, e.what());
    }
}

GroupMeta header_from_json(std::string_view text, const std::string& source) {
    // Two levels: the object and its arrays.
    const ordered_json j = parse_json_text(text, source + ": header", 2);
    if (!j.is_object()) fail(source, "header is not a JSON object");
    for (const char* name : kFieldNames)
        if (!j.contains(name)) fail(source, std::string("header has no field \"") + name + "\"");
    for (const auto& item : j.items()) {
        const std::string& key = item.key();
        const auto is_key = [&](const char* n) { return key == n; };
        if (std::none_of(std::begin(kFieldNames), std::end(kFieldNames), is_key) &&
            std::none_of(std::begin(kOptionalFieldNames), std::end(kOptionalFieldNames), is_key))
            fail(source, "header has an unknown field \"" + key + "\"");
    }
    if (count_top_level_keys(text) != j.size()) fail(source, "header names a field twice");

    GroupMeta h;
    h.group_key = get_string(j, "group_key", source);
    h.model_fingerprint = get_string(j, "model_fingerprint", source);
    h.chat_format = get_string(j, "chat_format", source);
    h.backend_numerics = get_string(j, "backend_numerics", source);
    h.tools_hash = get_string(j, "tools_hash", source);
    const auto& names = j.at("tool_names");
    if (!names.is_array()) fail(source, "header field \"tool_names\" must be an array of strings");
    for (const auto& n : names) {
        if (!n.is_string()) fail(source, "header field \"tool_names\" must be an array of strings");
        h.tool_names.push_back(n.get<std::string>());
    }
    h.system_prompt_sha256 = get_string(j, "system_prompt_sha256", source);
    h.n_layers = get_int_field(j, "n_layers", 1, source);
    h.n_kv_heads = get_int_field(j, "n_kv_heads", 1, source);
    h.head_dim = get_int_field(j, "head_dim", 1, source);
    const std::string kv_dtype = get_string(j, "kv_dtype", source);
    try {
        h.kv_dtype = parse_kv_dtype(kv_dtype);
    } catch (const std::invalid_argument&) {
        fail(source, "kv_dtype \"" + kv_dtype + "\" is not supported (f32, bf16)");
    }
    const auto n_tokens = static_cast<size_t>(get_int_field(j, "n_tokens", 0, source));
    h.prefix_ids = get_int_array<token_id>(j, "prefix_ids", source);
    h.tool_token_boundaries = get_int_array<int>(j, "tool_token_boundaries", source);
    h.created_unix_ms = get_int(j, "created_unix_ms", 0, std::numeric_limits<int64_t>::max(), source);
    if (const auto texts = j.find("tool_texts"); texts != j.end()) {
        if (!texts->is_array()) fail(source, "header field \"tool_texts\" must be an array of strings");
        for (const auto& t : *texts) {
            if (!t.is_string()) fail(source, "header field \"tool_texts\" must be an array of strings");
            h.tool_texts.push_back(t.get<std::string>());
        }
    }
    validate_header(h, n_tokens, source);
    return h;
}

// ---- file IO ------------------------------------------------------------------------------

[[noreturn]] void throw_errno(const std::string& what) {
    throw std::system_error(errno, std::generic_category(), what);
}

// Owns a file descriptor.
class Fd {
public:
    explicit Fd(int fd = -1) : fd_(fd) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    ~Fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    Fd& operator=(Fd&& other) noexcept {
        if (this != &other) {
            if (fd_ >= 0) ::close(fd_);
            fd_ = other.release();
        }
        return *this;
    }
    int get() const { return fd_; }
    int release() {
        const int fd = fd_;
        fd_ = -1;
        return fd;
    }
    // close(2) can report a deferred write error (NFS); the writer checks it.
    int close() {
        const int r = ::close(fd_);
        fd_ = -1;
        return r;
    }

private:
    int fd_;
};

void write_all(int fd, const std::byte* p, size_t n) {
    while (n > 0) {
        const ssize_t w = ::write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            throw_errno("write");
        }
        if (w == 0) throw std::system_error(EIO, std::generic_category(), "write returned 0");
        p += w;
        n -= static_cast<size_t>(w);
    }
}

// Reads exactly n bytes at offset; false when the file ends first.
bool pread_all(int fd, std::byte* p, size_t n, uint64_t offset, const std::string& source) {
    while (n > 0) {
        const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
        if (r < 0) {
            if (errno == EINTR) continue;
            fail(source, std::string("read: ") + std::strerror(errno));
        }
        if (r == 0) return false;
        p += r;
        n -= static_cast<size_t>(r);
        offset += static_cast<uint64_t>(r);
    }
    return true;
}

struct OpenedHeader {
    GroupMeta header;
    size_t payload_offset = 0;
    size_t file_size = 0;
};

// Reads the preamble and the JSON header with pread and checks them against the file's size.
OpenedHeader read_header_fd(int fd, const std::string& source) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) fail(source, std::string("fstat: ") + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) fail(source, "not a regular file");
    OpenedHeader out;
    out.file_size = static_cast<size_t>(st.st_size);
    std::vector<std::byte> buf(std::min(kGroupFilePreambleBytes, out.file_size));
    if (!pread_all(fd, buf.data(), buf.size(), 0, source)) fail(source, "file shrank while being read");
    if (buf.size() == kGroupFilePreambleBytes) {
        // Only a header that the parser will accept the bounds of is read; otherwise the parser
        // reports the bad length from the preamble alone.
        const uint64_t header_bytes = load_u64(buf.data() + 16);
        if (header_bytes <= kMaxGroupHeaderBytes && header_bytes <= out.file_size - kGroupFilePreambleBytes) {
            buf.resize(kGroupFilePreambleBytes + header_bytes);
            if (!pread_all(fd, buf.data() + kGroupFilePreambleBytes, header_bytes, kGroupFilePreambleBytes, source))
                fail(source, "file shrank while being read");
        }
    }
    out.header = parse_group_header(buf, out.file_size, source, &out.payload_offset);
    return out;
}

using XxhState = std::unique_ptr<XXH3_state_t, XXH_errorcode (*)(XXH3_state_t*)>;
XxhState make_xxh3_state() {
    XXH3_state_t* state = XXH3_createState();
    if (!state) throw std::bad_alloc();
    return XxhState(state, XXH3_freeState);
}

Fd open_for_read(const std::filesystem::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(path.string(), std::string("cannot open: ") + std::strerror(errno));
    return Fd(fd);
}

std::string temp_name_for(const std::filesystem::path& path) {
    std::random_device rd;
    const uint64_t r = (uint64_t(rd()) << 32) ^ rd();
    char suffix[17];
    std::snprintf(suffix, sizeof suffix, "%016llx", static_cast<unsigned long long>(r));
    return "." + path.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" + suffix;
}

// Writes the whole file to an open temp file: preamble + header + padding as one chunk, then each
// layer in chunks (hashed just before each write, so the payload is read once), then the trailer.
// `layer_at(l)` gives layer l's group_layer_bytes(header) bytes (valid until the next call).
void write_contents(int fd, const GroupMeta& header, const std::string& json,
                    const std::function<const std::byte*(int layer)>& layer_at, const GroupFileWriteOptions& options) {
    const size_t payload_offset = round_up(kGroupFilePreambleBytes + json.size(), kGroupFilePayloadAlign);
    std::vector<std::byte> head(payload_offset);  // zero padding included
    std::memcpy(head.data(), kGroupFileMagic, 8);
    store_u32(head.data() + 8, kGroupFileVersion);
    store_u32(head.data() + 12, 0);
    store_u64(head.data() + 16, json.size());
    store_u64(head.data() + 24, XXH3_64bits(json.data(), json.size()));
    store_u64(head.data() + 32, payload_offset);
    store_u64(head.data() + 40, group_payload_bytes(header));
    std::memcpy(head.data() + kGroupFilePreambleBytes, json.data(), json.size());

    size_t written = 0;
    auto put = [&](const std::byte* p, size_t n) {
        write_all(fd, p, n);
        written += n;
        if (options.on_progress) options.on_progress(written);
    };
    put(head.data(), head.size());

    const size_t layer_bytes = group_layer_bytes(header);
    const size_t chunk = std::max<size_t>(options.chunk_bytes, 1);
    std::vector<std::byte> trailer(8 * static_cast<size_t>(header.n_layers));
    const XxhState owner = make_xxh3_state();
    XXH3_state_t* state = owner.get();
    for (int l = 0; l < header.n_layers; ++l) {
        XXH3_64bits_reset(state);
        const std::byte* layer = layer_at(l);
        for (size_t off = 0; off < layer_bytes; off += chunk) {
            const size_t n = std::min(chunk, layer_bytes - off);
            XXH3_64bits_update(state, layer + off, n);
            put(layer + off, n);
        }
        store_u64(trailer.data() + 8 * static_cast<size_t>(l), XXH3_64bits_digest(state));
    }
    put(trailer.data(), trailer.size());
}

}  // namespace

size_t kv_dtype_bytes(KvDType kv_dtype) { return kv_dtype == KvDType::bf16 ? 2 : 4; }

size_t group_layer_bytes(const GroupMeta& h) {
    if (h.n_kv_heads < 0 || h.head_dim < 0) throw std::runtime_error("negative KV dimension");
    size_t n = kv_dtype_bytes(h.kv_dtype);
    n = mul_checked(n, 2, "KV size");
    n = mul_checked(n, static_cast<size_t>(h.n_kv_heads), "KV size");
    n = mul_checked(n, h.n_tokens(), "KV size");
    return mul_checked(n, static_cast<size_t>(h.head_dim), "KV size");
}

size_t group_payload_bytes(const GroupMeta& h) {
    if (h.n_layers < 0) throw std::runtime_error("negative n_layers");
    return mul_checked(group_layer_bytes(h), static_cast<size_t>(h.n_layers), "KV size");
}

GroupMeta parse_group_header(std::span<const std::byte> bytes, size_t file_size, const std::string& source,
                                   size_t* payload_offset) {
    if (bytes.size() > file_size) fail(source, "more bytes given than the file size");
    if (file_size < kGroupFilePreambleBytes)
        fail(source, "truncated: " + std::to_string(file_size) + " bytes, the preamble alone is " +
                         std::to_string(kGroupFilePreambleBytes));
    if (bytes.size() < kGroupFilePreambleBytes) fail(source, "the preamble was not given");
    const std::byte* p = bytes.data();
    if (std::memcmp(p, kGroupFileMagic, 8) != 0) fail(source, "not a group file (bad magic)");
    const uint32_t version = load_u32(p + 8);
    if (version != kGroupFileVersion)
        fail(source, "format version " + std::to_string(version) + ", expected " + std::to_string(kGroupFileVersion));
    if (load_u32(p + 12) != 0) fail(source, "reserved preamble field is not 0");
    const uint64_t header_bytes = load_u64(p + 16);
    if (header_bytes > kMaxGroupHeaderBytes)
        fail(source,
             "header length " + std::to_string(header_bytes) + " exceeds " + std::to_string(kMaxGroupHeaderBytes));
    if (header_bytes > file_size - kGroupFilePreambleBytes)
        fail(source, "truncated: header length " + std::to_string(header_bytes) + " runs past the end of the file (" +
                         std::to_string(file_size) + " bytes)");
    if (bytes.size() < kGroupFilePreambleBytes + header_bytes) fail(source, "the header was not given in full");
    const std::byte* json = p + kGroupFilePreambleBytes;
    const uint64_t stored_xxh3 = load_u64(p + 24);
    const uint64_t header_xxh3 = XXH3_64bits(json, header_bytes);
    if (stored_xxh3 != header_xxh3)
        fail(source,
             "header checksum mismatch (stored " + hex64(stored_xxh3) + ", computed " + hex64(header_xxh3) + ")");
    const uint64_t offset = load_u64(p + 32);
    const size_t expected_offset = round_up(kGroupFilePreambleBytes + header_bytes, kGroupFilePayloadAlign);
    if (offset != expected_offset)
        fail(source, "payload offset " + std::to_string(offset) + ", expected " + std::to_string(expected_offset));
    const uint64_t payload_bytes = load_u64(p + 40);

    GroupMeta h = header_from_json(
        std::string_view(reinterpret_cast<const char*>(json), static_cast<size_t>(header_bytes)), source);
    const size_t expected_payload = group_payload_bytes(h);  // validated: does not overflow
    if (payload_bytes != expected_payload)
        fail(source, "payload length " + std::to_string(payload_bytes) + ", the header's shape needs " +
                         std::to_string(expected_payload));
    size_t expected_size;
    try {
        expected_size = add_checked(add_checked(expected_offset, expected_payload, "file size"),
                                    mul_checked(8, static_cast<size_t>(h.n_layers), "file size"), "file size");
    } catch (const std::runtime_error& e) {
        fail(source, e.what());
    }
    if (file_size != expected_size)
        fail(source, "file size " + std::to_string(file_size) + ", expected " + std::to_string(expected_size) +
                         (file_size < expected_size ? " (truncated)" : " (trailing bytes)"));
    if (payload_offset) *payload_offset = expected_offset;
    return h;
}

GroupMeta read_group_header(const std::filesystem::path& path) {
    const Fd fd = open_for_read(path);
    return read_header_fd(fd.get(), path.string()).header;
}

GroupMeta read_group_file(const std::filesystem::path& path, std::vector<std::byte>& payload_out) {
    const std::string source = path.string();
    const Fd fd = open_for_read(path);
    OpenedHeader opened = read_header_fd(fd.get(), source);
    const GroupMeta& h = opened.header;
    const size_t layer_bytes = group_layer_bytes(h);
    const size_t payload_bytes = layer_bytes * static_cast<size_t>(h.n_layers);
    payload_out.resize(payload_bytes);

    // pread straight into the destination in L2-sized chunks, each hashed right after it lands
    // while it is still in cache: the page cache is read once (the kernel's copy) and the hash
    // reads L2. (The group store's disk tier does not copy at all: map_group_file below. This
    // copying reader serves callers that want the bytes in their own buffer.)
    std::vector<std::byte> trailer(8 * static_cast<size_t>(h.n_layers));
    if (!pread_all(fd.get(), trailer.data(), trailer.size(), opened.payload_offset + payload_bytes, source))
        fail(source, "file shrank while being read");
    const XxhState owner = make_xxh3_state();
    XXH3_state_t* state = owner.get();
    for (int l = 0; l < h.n_layers; ++l) {
        const size_t base = static_cast<size_t>(l) * layer_bytes;
        XXH3_64bits_reset(state);
        for (size_t off = 0; off < layer_bytes; off += kReadChunkBytes) {
            const size_t n = std::min(kReadChunkBytes, layer_bytes - off);
            std::byte* dst = payload_out.data() + base + off;
            if (!pread_all(fd.get(), dst, n, opened.payload_offset + base + off, source))
                fail(source, "file shrank while being read");
            XXH3_64bits_update(state, dst, n);
        }
        const uint64_t computed = XXH3_64bits_digest(state);
        const uint64_t stored = load_u64(trailer.data() + 8 * static_cast<size_t>(l));
        if (computed != stored)
            fail(source, "layer " + std::to_string(l) + " checksum mismatch (stored " + hex64(stored) + ", computed " +
                             hex64(computed) + ")");
    }
    return std::move(opened.header);
}

namespace {

// Temp file in the same directory, `contents(fd)`, fsync, rename to `path`, fsync of the directory.
// The temp file is removed on any failure; a reader never sees a partial file at `path`.
void write_atomically(const std::filesystem::path& path, const std::string& source,
                      const std::function<void(int fd)>& contents) {
    if (path.filename().empty()) fail(source, "not a file name");
    const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
    std::filesystem::path temp;
    Fd fd;
    // The temp is locked from its creation until its rename, so that remove_stale_temp_files knows
    // it is alive. A cleaner may lock and remove it between our open and our flock: then our name
    // no longer points at our file (stat and fstat differ) and we start again under a new name.
    for (int attempt = 0;; ++attempt) {
        temp = dir / temp_name_for(path);
        const int raw = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (raw < 0) fail(source, "cannot create temp file " + temp.filename().string() + ": " + std::strerror(errno));
        Fd candidate(raw);
        int locked = ::flock(candidate.get(), LOCK_EX);
        while (locked != 0 && errno == EINTR) locked = ::flock(candidate.get(), LOCK_EX);
        // A file system without flock: unlocked, and then no cleaner can lock it either, so none
        // removes it (a dead writer's temp stays, as it did before there were cleaners).
        struct stat by_fd {}, by_name {};
        if (locked != 0 || (::fstat(candidate.get(), &by_fd) == 0 && ::stat(temp.c_str(), &by_name) == 0 &&
                            by_fd.st_dev == by_name.st_dev && by_fd.st_ino == by_name.st_ino)) {
            fd = Fd(candidate.release());
            break;
        }
        if (attempt == 8) fail(source, "temp file " + temp.filename().string() + " keeps being removed under the writer");
    }
    auto discard = [&] {
        if (fd.get() >= 0) fd.close();
        ::unlink(temp.c_str());
    };
    try {
        contents(fd.get());
        // The data must be durable before the name points at it, or a crash could leave a
        // complete-looking name over missing blocks.
        if (::fsync(fd.get()) != 0) throw_errno("fsync");
        // The flock belongs to the open file description: a duplicate keeps it held through the
        // rename after fd is closed (close's deferred error is checked before the name is given).
        const Fd lock_holder(::dup(fd.get()));
        if (lock_holder.get() < 0) throw_errno("dup");
        if (fd.close() != 0) throw_errno("close");
        if (::rename(temp.c_str(), path.c_str()) != 0) throw_errno("rename");
    } catch (const std::system_error& e) {
        discard();
        fail(source, std::string("cannot write group file: ") + e.what());
    } catch (...) {
        discard();
        throw;
    }
    // The rename is durable once the directory is; the file at `path` is complete either way.
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) fail(source, std::string("written, but cannot open its directory to fsync: ") + std::strerror(errno));
    const Fd dir_fd(dfd);
    if (::fsync(dir_fd.get()) != 0 && errno != EINVAL)
        fail(source, std::string("written, but fsync of its directory failed: ") + std::strerror(errno));
}

// The header as the file stores it, validated as a reader would.
std::string encoded_header(const GroupMeta& header, const std::string& source) {
    validate_header(header, header.n_tokens(), source);
    std::string json;
    try {
        json = header_to_json(header).dump();
    } catch (const nlohmann::json::exception& e) {  // e.g. a tool name that is not UTF-8
        fail(source, std::string("cannot encode the header: ") + e.what());
    }
    if (json.size() > kMaxGroupHeaderBytes)
        fail(source, "header is " + std::to_string(json.size()) + " bytes, over the limit");
    return json;
}

// ... and the payload's size checked against it.
std::string encoded_header(const GroupMeta& header, std::span<const std::byte> payload, const std::string& source) {
    std::string json = encoded_header(header, source);
    const size_t expected = group_payload_bytes(header);
    if (payload.size() != expected)
        fail(source, "payload is " + std::to_string(payload.size()) + " bytes, the header's shape needs " +
                         std::to_string(expected));
    return json;
}

}  // namespace

void write_group_file(const std::filesystem::path& path, const GroupMeta& header,
                      std::span<const std::byte> payload, const GroupFileWriteOptions& options) {
    const std::string source = path.string();
    const std::string json = encoded_header(header, payload, source);
    const size_t layer_bytes = group_layer_bytes(header);
    auto layer_at = [&](int l) { return payload.data() + static_cast<size_t>(l) * layer_bytes; };
    write_atomically(path, source, [&](int fd) { write_contents(fd, header, json, layer_at, options); });
}

void write_group_file(const std::filesystem::path& path, const GroupMeta& header, const GroupLayerSource& layers,
                      const GroupFileWriteOptions& options) {
    const std::string source = path.string();
    const std::string json = encoded_header(header, source);
    std::vector<std::byte> layer(group_layer_bytes(header));  // one layer at a time: never the whole payload
    auto layer_at = [&](int l) {
        layers(l, layer);
        return static_cast<const std::byte*>(layer.data());
    };
    write_atomically(path, source, [&](int fd) { write_contents(fd, header, json, layer_at, options); });
}

void write_group_file_bytes(const std::filesystem::path& path, std::span<const std::byte> file_bytes) {
    const std::string source = path.string();
    parse_group_header(file_bytes, file_bytes.size(), source);  // at least the preamble, header and size
    write_atomically(path, source, [&](int fd) { write_all(fd, file_bytes.data(), file_bytes.size()); });
}

std::vector<std::string> remove_stale_temp_files(const std::filesystem::path& dir) {
    std::vector<std::string> removed;
    std::error_code ec;
    std::vector<std::filesystem::path> temps;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.starts_with(".") && name.find(".tmp-") != std::string::npos) temps.push_back(entry.path());
    }
    for (const auto& temp : temps) {
        const int raw = ::open(temp.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (raw < 0) continue;  // renamed or removed meanwhile
        const Fd fd(raw);
        // Held: a writer is alive (or just created it and is about to lock it). Free: its writer died.
        if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;
        struct stat by_fd {}, by_name {};
        // Still the file we locked (a live writer renames its temp away while holding the lock).
        if (::fstat(fd.get(), &by_fd) != 0 || ::stat(temp.c_str(), &by_name) != 0 || by_fd.st_dev != by_name.st_dev ||
            by_fd.st_ino != by_name.st_ino)
            continue;
        if (::unlink(temp.c_str()) == 0) removed.push_back(temp.filename().string());
    }
    return removed;
}

std::vector<std::byte> encode_group_file(const GroupMeta& header, std::span<const std::byte> payload) {
    const std::string source = "group " + header.group_key.substr(0, 12);
    const std::string json = encoded_header(header, payload, source);
    const size_t payload_offset = round_up(kGroupFilePreambleBytes + json.size(), kGroupFilePayloadAlign);
    const size_t n_layers = static_cast<size_t>(header.n_layers);
    std::vector<std::byte> out(payload_offset + payload.size() + 8 * n_layers);  // zero padding included
    std::byte* p = out.data();
    std::memcpy(p, kGroupFileMagic, 8);
    store_u32(p + 8, kGroupFileVersion);
    store_u32(p + 12, 0);
    store_u64(p + 16, json.size());
    store_u64(p + 24, XXH3_64bits(json.data(), json.size()));
    store_u64(p + 32, payload_offset);
    store_u64(p + 40, payload.size());
    std::memcpy(p + kGroupFilePreambleBytes, json.data(), json.size());
    if (!payload.empty()) std::memcpy(p + payload_offset, payload.data(), payload.size());
    const size_t layer_bytes = group_layer_bytes(header);
    for (size_t l = 0; l < n_layers; ++l)
        store_u64(p + payload_offset + payload.size() + 8 * l, XXH3_64bits(payload.data() + l * layer_bytes, layer_bytes));
    return out;
}

VerifiedGroupBytes verify_group_bytes(std::span<const std::byte> file_bytes, const std::string& source) {
    size_t payload_offset = 0;
    VerifiedGroupBytes out;
    out.header = parse_group_header(file_bytes, file_bytes.size(), source, &payload_offset);
    const size_t layer_bytes = group_layer_bytes(out.header);
    const size_t payload_bytes = layer_bytes * static_cast<size_t>(out.header.n_layers);
    out.payload = file_bytes.subspan(payload_offset, payload_bytes);
    const std::byte* trailer = file_bytes.data() + payload_offset + payload_bytes;
    for (int l = 0; l < out.header.n_layers; ++l) {
        const uint64_t computed = XXH3_64bits(out.payload.data() + static_cast<size_t>(l) * layer_bytes, layer_bytes);
        const uint64_t stored = load_u64(trailer + 8 * static_cast<size_t>(l));
        if (computed != stored)
            fail(source, "layer " + std::to_string(l) + " checksum mismatch (stored " + hex64(stored) + ", computed " +
                             hex64(computed) + ")");
    }
    return out;
}

}  // namespace cc

namespace cc {

MappedGroupFile map_group_file(const std::filesystem::path& path) {
    const std::string source = path.string();
    // populated: the checksum pass reads every page at once, and attention reads them all again
    auto file = std::make_shared<const MappedFile>(path, /*populate=*/true);
    const std::span<const std::byte> bytes = file->bytes();
    // Preamble and header are copied out of the mapping (a few KB, under the guard) and parsed
    // from the copy: parsing allocates, which must not happen inside a guarded pass.
    std::vector<std::byte> head(std::min(bytes.size(), kGroupFilePreambleBytes));
    // An empty file maps to no bytes: data() is null there, and memcpy from null is undefined even
    // for 0 bytes (UBSan, GroupFile.TruncatedFileIsRefusedAtEveryCutPoint at cut 0).
    if (!head.empty())
        file->read_guarded("header", [&] { std::memcpy(head.data(), bytes.data(), head.size()); });
    if (head.size() == kGroupFilePreambleBytes) {
        const uint64_t header_bytes = std::min<uint64_t>(load_u64(head.data() + 16), kMaxGroupHeaderBytes);
        head.resize(std::min<size_t>(bytes.size(), kGroupFilePreambleBytes + static_cast<size_t>(header_bytes)));
        file->read_guarded("header", [&] {
            std::memcpy(head.data() + kGroupFilePreambleBytes, bytes.data() + kGroupFilePreambleBytes,
                        head.size() - kGroupFilePreambleBytes);
        });
    }
    size_t payload_offset = 0;
    MappedGroupFile out;
    out.header = parse_group_header(head, bytes.size(), source, &payload_offset);
    const GroupMeta& h = out.header;
    const size_t layer_bytes = group_layer_bytes(h);
    const size_t payload_bytes = layer_bytes * static_cast<size_t>(h.n_layers);
    out.payload = bytes.subspan(payload_offset, payload_bytes);
    const std::byte* trailer = bytes.data() + payload_offset + payload_bytes;

    // One pass over the mapping: hashing is the only work, and the hash reads the page cache's
    // pages where they are. The layers are split between up to 4 threads (each pass under its own
    // guard); the first damaged layer is the one reported.
    struct Part {
        int bad_layer = -1;
        uint64_t stored = 0, computed = 0;
        std::exception_ptr error;
    };
    const int n_parts = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, std::min(4, std::max(h.n_layers, 1)));
    std::vector<Part> parts(static_cast<size_t>(n_parts));
    const auto hash_part = [&](int part) {
        Part& p = parts[static_cast<size_t>(part)];
        try {
            file->read_guarded("checksum verification", [&] {
                for (int l = h.n_layers * part / n_parts; l < h.n_layers * (part + 1) / n_parts && p.bad_layer < 0; ++l) {
                    p.computed = XXH3_64bits(out.payload.data() + static_cast<size_t>(l) * layer_bytes, layer_bytes);
                    p.stored = load_u64(trailer + 8 * static_cast<size_t>(l));
                    if (p.computed != p.stored) p.bad_layer = l;
                }
            });
        } catch (...) {
            p.error = std::current_exception();
        }
    };
    std::vector<std::thread> helpers;
    for (int part = 1; part < n_parts; ++part) helpers.emplace_back(hash_part, part);
    hash_part(0);
    for (auto& t : helpers) t.join();
    for (const Part& p : parts) {
        if (p.error) std::rethrow_exception(p.error);
        if (p.bad_layer >= 0)
            fail(source, "layer " + std::to_string(p.bad_layer) + " checksum mismatch (stored " + hex64(p.stored) +
                             ", computed " + hex64(p.computed) + ")");
    }
    out.file = std::move(file);
    return out;
}

}  // namespace cc
