// Group files (core/store/group_file): round trips, the documented byte layout checked with an
// independent XXH3, and real faults: truncation, flipped bytes, wrong magic/version/size, invalid
// fields under a valid checksum, a writer killed with SIGKILL, a read-only directory and a full disk.
#include "core/store/group_file.h"

#include "tests/test_support.h"

#include <xxhash.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <string>
#include <system_error>
#include <vector>

namespace fs = std::filesystem;
using cc::GroupMeta;

namespace {

std::string hex_key(char c) {
    return std::string(64, c);
}

GroupMeta make_header(int n_layers, int n_kv_heads, int head_dim, int n_tokens, const std::string& dtype,
                            int n_tools = 2) {
    GroupMeta h;
    h.group_key = hex_key('a');
    h.model_fingerprint = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    h.chat_format = "qwen3";
    h.backend_numerics = "cpu/" + dtype;
    h.tools_hash = hex_key('b');
    h.system_prompt_sha256 = hex_key('c');
    h.n_layers = n_layers;
    h.n_kv_heads = n_kv_heads;
    h.head_dim = head_dim;
    h.kv_dtype = cc::parse_kv_dtype(dtype);
    for (int i = 0; i < n_tokens; ++i) h.prefix_ids.push_back(151644 - i * 7);
    for (int t = 0; t < n_tools; ++t) {
        h.tool_names.push_back("tool_" + std::to_string(t) + "_\xc3\xa9");  // non-ASCII survives
        h.tool_token_boundaries.push_back(n_tokens * t / std::max(n_tools, 1));
    }
    h.created_unix_ms = 1714000000123;
    return h;
}

std::vector<std::byte> make_payload(const GroupMeta& h, uint64_t seed = 42) {
    std::vector<std::byte> p(cc::group_payload_bytes(h));
    std::mt19937_64 rng(seed);
    for (auto& b : p) b = static_cast<std::byte>(rng());
    return p;
}

void expect_same_header(const GroupMeta& a, const GroupMeta& b) {
    EXPECT_EQ(a.group_key, b.group_key);
    EXPECT_EQ(a.model_fingerprint, b.model_fingerprint);
    EXPECT_EQ(a.chat_format, b.chat_format);
    EXPECT_EQ(a.backend_numerics, b.backend_numerics);
    EXPECT_EQ(a.tools_hash, b.tools_hash);
    EXPECT_EQ(a.tool_names, b.tool_names);
    EXPECT_EQ(a.system_prompt_sha256, b.system_prompt_sha256);
    EXPECT_EQ(a.n_layers, b.n_layers);
    EXPECT_EQ(a.n_kv_heads, b.n_kv_heads);
    EXPECT_EQ(a.head_dim, b.head_dim);
    EXPECT_EQ(a.kv_dtype, b.kv_dtype);
    EXPECT_EQ(a.n_tokens(), b.n_tokens());
    EXPECT_EQ(a.prefix_ids, b.prefix_ids);
    EXPECT_EQ(a.tool_token_boundaries, b.tool_token_boundaries);
    EXPECT_EQ(a.created_unix_ms, b.created_unix_ms);
    EXPECT_EQ(a.tool_texts, b.tool_texts);
}

std::string read_bytes(const fs::path& p) {
    return cc::test::read_file(p);
}
void write_bytes(const fs::path& p, const std::string& bytes) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(out.good()) << p;
}

uint64_t u64_at(const std::string& s, size_t off) {
    uint64_t v;
    std::memcpy(&v, s.data() + off, 8);
    return v;
}
void put_u64(std::string& s, size_t off, uint64_t v) {
    std::memcpy(s.data() + off, &v, 8);
}
void put_u32(std::string& s, size_t off, uint32_t v) {
    std::memcpy(s.data() + off, &v, 4);
}

// Builds a file by hand from the layout documented in group_file.h (not with the writer), with a
// correct header checksum, so the reader's field checks are tested on their own.
std::string build_file(const std::string& json, const std::vector<std::byte>& payload, int n_layers,
                       uint64_t payload_bytes_field) {
    const size_t payload_offset = (48 + json.size() + 4095) / 4096 * 4096;
    std::string f(payload_offset, '\0');
    std::memcpy(f.data(), "CCKVGRP1", 8);
    put_u32(f, 8, 1);
    put_u64(f, 16, json.size());
    put_u64(f, 24, XXH3_64bits(json.data(), json.size()));
    put_u64(f, 32, payload_offset);
    put_u64(f, 40, payload_bytes_field);
    std::memcpy(f.data() + 48, json.data(), json.size());
    f.append(reinterpret_cast<const char*>(payload.data()), payload.size());
    const size_t layer = n_layers > 0 ? payload.size() / static_cast<size_t>(n_layers) : 0;
    for (int l = 0; l < n_layers; ++l) {
        std::string sum(8, '\0');
        put_u64(sum, 0, XXH3_64bits(payload.data() + static_cast<size_t>(l) * layer, layer));
        f += sum;
    }
    return f;
}

// The JSON the writer produces for `h`, as a mutable object for hand-built headers.
nlohmann::ordered_json header_json(const GroupMeta& h) {
    return {{"group_key", h.group_key},
            {"model_fingerprint", h.model_fingerprint},
            {"chat_format", h.chat_format},
            {"backend_numerics", h.backend_numerics},
            {"tools_hash", h.tools_hash},
            {"tool_names", h.tool_names},
            {"system_prompt_sha256", h.system_prompt_sha256},
            {"n_layers", h.n_layers},
            {"n_kv_heads", h.n_kv_heads},
            {"head_dim", h.head_dim},
            {"kv_dtype", cc::kv_dtype_name(h.kv_dtype)},
            {"n_tokens", h.n_tokens()},
            {"prefix_ids", h.prefix_ids},
            {"tool_token_boundaries", h.tool_token_boundaries},
            {"created_unix_ms", h.created_unix_ms}};
}

// The message of the std::runtime_error `fn` throws ("" when it does not throw).
std::string error_of(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const std::runtime_error& e) {
        return e.what();
    }
    return "";
}

std::vector<std::string> dir_names(const fs::path& dir) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
    return names;
}

// What a directory listing that ignores dot-files (an index rebuild's scan) sees.
std::vector<std::string> visible_names(const fs::path& dir) {
    std::vector<std::string> out;
    for (auto& n : dir_names(dir))
        if (!n.starts_with(".")) out.push_back(n);
    return out;
}

// Runs `fn` in a forked child and returns the string it returns (or "exception: ..."), passed back
// through a pipe. Used where the test changes process-wide state (a mount namespace).
std::string run_in_child(const std::function<std::string()>& fn) {
    int fds[2];
    if (::pipe(fds) != 0) return "pipe failed";
    const pid_t pid = ::fork();
    if (pid < 0) {
        ::close(fds[0]);
        ::close(fds[1]);
        return "fork failed";
    }
    if (pid == 0) {
        ::close(fds[0]);
        std::string r;
        try {
            r = fn();
        } catch (const std::exception& e) {
            r = std::string("exception: ") + e.what();
        }
        [[maybe_unused]] const ssize_t w = ::write(fds[1], r.data(), r.size());
        ::_exit(0);
    }
    ::close(fds[1]);
    std::string out;
    char buf[512];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    return out;
}

// In a child: a private mount namespace with a tmpfs of `options` at `dir`. "" or why not.
std::string mount_private_tmpfs(const fs::path& dir, unsigned long flags, const char* options) {
    if (::unshare(CLONE_NEWNS) != 0) return std::string("unshare(CLONE_NEWNS): ") + std::strerror(errno);
    // Private propagation first, or the mount would appear in the parent's namespace too.
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
        return std::string("mount --make-rprivate /: ") + std::strerror(errno);
    if (::mount("none", dir.c_str(), "tmpfs", flags, options) != 0)
        return std::string("mount tmpfs: ") + std::strerror(errno);
    return "";
}

struct Shape {
    int n_layers, n_kv_heads, head_dim, n_tokens;
    const char* dtype;
};

class GroupFileRoundTrip : public ::testing::TestWithParam<Shape> {};

// tool_texts is optional: a header written before it existed reads as "not recorded", and a
// header with it round-trips through the writer and the reader.
TEST(GroupFile, ToolTextsAreOptionalAndRoundTrip) {
    cc::test::TempDir dir;
    auto h = make_header(1, 1, 4, 3, "f32");
    const auto payload = make_payload(h);
    const fs::path old_file = dir.path() / "old.kv";
    write_bytes(old_file, build_file(header_json(h).dump(), payload, 1, payload.size()));  // no tool_texts
    EXPECT_TRUE(cc::read_group_header(old_file).tool_texts.empty());

    h.tool_texts = {"{\"type\": \"function\", \"function\": {\"name\": \"tool_0\"}}",
                    "{\"type\": \"function\", \"function\": {\"name\": \"tool_1\"}}"};
    const fs::path p = dir.path() / "new.kv";
    cc::write_group_file(p, h, payload);
    const auto back = cc::read_group_header(p);
    EXPECT_EQ(back.tool_texts, h.tool_texts);
    expect_same_header(h, back);
    // written after the other fields, so an older header is a prefix of the newer one's fields
    const std::string bytes = read_bytes(p);
    EXPECT_LT(bytes.find("\"created_unix_ms\""), bytes.find("\"tool_texts\""));
}

}  // namespace

TEST_P(GroupFileRoundTrip, HeaderAndPayloadComeBackEqual) {
    const Shape s = GetParam();
    cc::test::TempDir dir;
    const GroupMeta h = make_header(s.n_layers, s.n_kv_heads, s.head_dim, s.n_tokens, s.dtype);
    const auto payload = make_payload(h);
    const fs::path path = dir.path() / (h.group_key + ".kv");
    // A small chunk size, so layers span several write calls.
    cc::write_group_file(path, h, payload, {.on_progress = nullptr, .chunk_bytes = 1000});

    expect_same_header(cc::read_group_header(path), h);
    std::vector<std::byte> back;
    expect_same_header(cc::read_group_file(path, back), h);
    ASSERT_EQ(back.size(), payload.size());
    EXPECT_TRUE(back == payload);
    EXPECT_EQ(dir_names(dir.path()), std::vector<std::string>{path.filename().string()}) << "temp file left behind";

    // Written a layer at a time (what a persist does from a KV block, with no second copy of the
    // payload): the very same bytes, each layer asked for once, in order.
    const fs::path by_layer = dir.path() / "by_layer.kv";
    const size_t layer_bytes = cc::group_layer_bytes(h);
    std::vector<int> asked;
    cc::write_group_file(by_layer, h, [&](int layer, std::span<std::byte> out) {
        asked.push_back(layer);
        ASSERT_EQ(out.size(), layer_bytes);
        if (layer_bytes > 0) std::memcpy(out.data(), payload.data() + size_t(layer) * layer_bytes, layer_bytes);
    });
    std::vector<int> in_order(size_t(h.n_layers));
    for (int l = 0; l < h.n_layers; ++l) in_order[size_t(l)] = l;
    EXPECT_EQ(asked, in_order);
    EXPECT_EQ(read_bytes(by_layer), read_bytes(path));
}

INSTANTIATE_TEST_SUITE_P(Shapes, GroupFileRoundTrip,
                         ::testing::Values(Shape{1, 1, 4, 0, "f32"}, Shape{3, 2, 8, 0, "bf16"},
                                           Shape{1, 1, 4, 1, "f32"}, Shape{2, 1, 4, 1, "bf16"},
                                           Shape{4, 2, 16, 37, "f32"}, Shape{5, 3, 64, 101, "bf16"},
                                           Shape{8, 4, 64, 300, "f32"}));

TEST(GroupFile, ReadReusesTheCallersBuffer) {
    cc::test::TempDir dir;
    const auto h = make_header(2, 2, 8, 10, "f32");
    const auto payload = make_payload(h, 7);
    cc::write_group_file(dir.path() / "g.kv", h, payload);
    std::vector<std::byte> back(5, std::byte{0xee});  // wrong size and contents: replaced
    cc::read_group_file(dir.path() / "g.kv", back);
    EXPECT_TRUE(back == payload);
}

TEST(GroupFile, BytesFollowTheDocumentedLayout) {
    cc::test::TempDir dir;
    const auto h = make_header(3, 2, 4, 5, "bf16");
    const auto payload = make_payload(h);
    const fs::path path = dir.path() / "g.kv";
    cc::write_group_file(path, h, payload);
    const std::string f = read_bytes(path);

    ASSERT_GE(f.size(), 48u);
    EXPECT_EQ(f.substr(0, 8), "CCKVGRP1");
    uint32_t version, reserved;
    std::memcpy(&version, f.data() + 8, 4);
    std::memcpy(&reserved, f.data() + 12, 4);
    EXPECT_EQ(version, 1u);
    EXPECT_EQ(reserved, 0u);
    const uint64_t header_bytes = u64_at(f, 16);
    const std::string json = f.substr(48, header_bytes);
    EXPECT_EQ(u64_at(f, 24), XXH3_64bits(json.data(), json.size()));
    const uint64_t payload_offset = u64_at(f, 32);
    EXPECT_EQ(payload_offset, (48 + header_bytes + 4095) / 4096 * 4096);
    EXPECT_EQ(u64_at(f, 40), payload.size());
    EXPECT_EQ(payload.size(), 3u * 2 * 2 * 5 * 4 * 2);  // n_layers * (K,V) * heads * tokens * head_dim * bf16
    EXPECT_EQ(f.size(), payload_offset + payload.size() + 8 * 3);
    EXPECT_EQ(f.find_first_not_of('\0', 48 + header_bytes), payload_offset) << "padding is not all zero";
    EXPECT_EQ(0, std::memcmp(f.data() + payload_offset, payload.data(), payload.size()));

    // The header is the fields of GroupMeta, in the order group_file.h gives.
    const auto j = nlohmann::ordered_json::parse(json);
    EXPECT_EQ(j, header_json(h));
    std::vector<std::string> keys;
    for (const auto& [k, v] : j.items()) keys.push_back(k);
    EXPECT_EQ(keys.front(), "group_key");
    EXPECT_EQ(keys.back(), "created_unix_ms");

    // One checksum per layer over its K and V bytes.
    const size_t layer = payload.size() / 3;
    for (size_t l = 0; l < 3; ++l)
        EXPECT_EQ(u64_at(f, payload_offset + payload.size() + 8 * l), XXH3_64bits(payload.data() + l * layer, layer))
            << "layer " << l;
}

TEST(GroupFile, TruncatedFileIsRefusedAtEveryCutPoint) {
    cc::test::TempDir dir;
    const auto h = make_header(3, 2, 8, 20, "f32");
    const auto payload = make_payload(h);
    const fs::path good = dir.path() / "good.kv";
    cc::write_group_file(good, h, payload);
    const std::string f = read_bytes(good);
    const uint64_t payload_offset = u64_at(f, 32);
    const struct {
        const char* where;
        size_t keep;
    } cuts[] = {{"empty", 0},
                {"inside the magic", 5},
                {"inside the preamble", 30},
                {"right after the preamble", 48},
                {"inside the header", 48 + u64_at(f, 16) / 2},
                {"inside the padding", payload_offset - 1},
                {"at the payload", payload_offset},
                {"inside the payload", payload_offset + payload.size() / 2},
                {"at the trailer", payload_offset + payload.size()},
                {"inside the trailer", f.size() - 3}};
    for (const auto& cut : cuts) {
        SCOPED_TRACE(cut.where);
        const fs::path p = dir.path() / "cut.kv";
        write_bytes(p, f.substr(0, cut.keep));
        std::vector<std::byte> out;
        const std::string e1 = error_of([&] { cc::read_group_header(p); });
        const std::string e2 = error_of([&] { cc::read_group_file(p, out); });
        const std::string e3 = error_of([&] { cc::map_group_file(p); });
        EXPECT_TRUE(e1.starts_with(p.string() + ": ")) << e1;
        EXPECT_NE(e1.find("truncated"), std::string::npos) << e1;
        EXPECT_EQ(e1, e2);
        EXPECT_EQ(e1, e3);
    }
}

TEST(GroupFile, FlippedPayloadByteNamesTheLayer) {
    cc::test::TempDir dir;
    const auto h = make_header(4, 2, 8, 20, "bf16");
    const auto payload = make_payload(h);
    const fs::path p = dir.path() / "g.kv";
    cc::write_group_file(p, h, payload);
    std::string f = read_bytes(p);
    const size_t layer = payload.size() / 4;
    f[u64_at(f, 32) + 2 * layer + layer / 2 + 3] ^= 0x10;  // inside layer 2's V
    write_bytes(p, f);

    EXPECT_NO_THROW(cc::read_group_header(p)) << "the header alone is still valid";
    std::vector<std::byte> out;
    const std::string e = error_of([&] { cc::read_group_file(p, out); });
    EXPECT_TRUE(e.starts_with(p.string() + ": layer 2 checksum mismatch (stored 0x")) << e;
    EXPECT_NE(e.find(", computed 0x"), std::string::npos) << e;
    EXPECT_EQ(error_of([&] { cc::map_group_file(p); }), e) << "verified in place, the same check";
}

TEST(GroupFile, FlippedHeaderByteFailsTheHeaderChecksum) {
    cc::test::TempDir dir;
    const auto h = make_header(2, 1, 8, 6, "f32");
    const fs::path p = dir.path() / "g.kv";
    cc::write_group_file(p, h, make_payload(h));
    std::string f = read_bytes(p);
    // A digit of n_tokens changes: still valid JSON, so only the checksum can catch it.
    const size_t pos = f.find("\"n_tokens\":6");
    ASSERT_NE(pos, std::string::npos);
    f[pos + 11] = '7';
    write_bytes(p, f);
    const std::string e = error_of([&] { cc::read_group_header(p); });
    EXPECT_TRUE(e.starts_with(p.string() + ": header checksum mismatch")) << e;
}

// A group file of n_layers whose trailer checksums of `damaged` layers have one bit flipped: the
// sequential read and the mapped check (layers hashed on several threads) both name the first.
static void expect_first_damaged_layer_named(int n_layers, std::initializer_list<int> damaged, int first) {
    cc::test::TempDir dir;
    const auto h = make_header(n_layers, 1, 8, 6, "f32");
    const fs::path p = dir.path() / "g.kv";
    cc::write_group_file(p, h, make_payload(h));
    std::string f = read_bytes(p);
    for (int l : damaged) f[f.size() - 8 * static_cast<size_t>(n_layers - l)] ^= 0x01;
    write_bytes(p, f);
    std::vector<std::byte> out;
    const std::string e = error_of([&] { cc::read_group_file(p, out); });
    EXPECT_TRUE(e.starts_with(p.string() + ": layer " + std::to_string(first) + " checksum mismatch")) << e;
    EXPECT_EQ(error_of([&] { cc::map_group_file(p); }), e);
}

TEST(GroupFile, FlippedTrailerByteIsAChecksumMismatch) { expect_first_damaged_layer_named(3, {2}, 2); }

TEST(GroupFile, TwoDamagedLayersNameTheFirst) { expect_first_damaged_layer_named(6, {1, 4}, 1); }

TEST(GroupFile, MappedFileIsVerifiedInPlaceAndOutlivesTheName) {
    cc::test::TempDir dir;
    const auto h = make_header(3, 2, 8, 21, "bf16");
    const auto payload = make_payload(h);
    const fs::path p = dir.path() / "g.kv";
    cc::write_group_file(p, h, payload);
    auto m = cc::map_group_file(p);
    expect_same_header(m.header, h);
    ASSERT_EQ(m.payload.size(), payload.size());
    EXPECT_EQ(std::memcmp(m.payload.data(), payload.data(), payload.size()), 0);
    EXPECT_GE(m.payload.data(), m.file->data());
    EXPECT_EQ(size_t(m.payload.data() - m.file->data()) % cc::kGroupFilePayloadAlign, 0u);
    // Replaced by rename and then unlinked (what the store and gc do): the mapping still reads
    // the old bytes.
    const auto h2 = make_header(2, 1, 8, 9, "f32");
    cc::write_group_file(p, h2, make_payload(h2));
    fs::remove(p);
    EXPECT_EQ(std::memcmp(m.payload.data(), payload.data(), payload.size()), 0);
}

// A file truncated in place underneath a mapping (an outside program; our files are only renamed
// or unlinked): inside a guarded pass it is an error naming the file; anywhere else the process
// exits with a line naming it, never silently computing with missing bytes.
TEST(GroupFile, TruncationUnderAMappingIsAnErrorOrAClearExit) {
    cc::test::TempDir dir;
    const fs::path p = dir.path() / "t.kv";
    write_bytes(p, std::string(size_t(64) << 10, 'x'));
    cc::MappedFile m(p);
    ASSERT_EQ(::truncate(p.c_str(), 0), 0);
    volatile unsigned sum = 0;
    const std::string e = error_of([&] {
        m.read_guarded("checksum verification", [&] {
            for (size_t i = 0; i < m.size(); i += 4096) sum = sum + unsigned(m.data()[i]);
        });
    });
    EXPECT_TRUE(e.starts_with(p.string() + ": checksum verification: the file was truncated")) << e;
    // the guard is gone once the pass ended: a plain read now ends the process, naming the file
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT({ sum = sum + unsigned(m.data()[8192]); }, ::testing::ExitedWithCode(128 + SIGBUS),
                "SIGBUS reading the memory-mapped file .*t\\.kv");
}

TEST(GroupFile, WrongMagicVersionOrSizeIsRefused) {
    cc::test::TempDir dir;
    const auto h = make_header(2, 1, 8, 6, "f32");
    const fs::path good = dir.path() / "good.kv";
    cc::write_group_file(good, h, make_payload(h));
    const std::string f = read_bytes(good);
    const fs::path p = dir.path() / "bad.kv";

    std::string bad = f;
    bad[3] = 'X';
    write_bytes(p, bad);
    EXPECT_EQ(error_of([&] { cc::read_group_header(p); }), p.string() + ": not a group file (bad magic)");

    bad = f;
    put_u32(bad, 8, 2);
    write_bytes(p, bad);
    EXPECT_EQ(error_of([&] { cc::read_group_header(p); }), p.string() + ": format version 2, expected 1");

    bad = f + '\0';
    write_bytes(p, bad);
    const std::string e = error_of([&] { cc::read_group_header(p); });
    EXPECT_EQ(e, p.string() + ": file size " + std::to_string(f.size() + 1) + ", expected " + std::to_string(f.size()) +
                     " (trailing bytes)");

    bad = f;
    put_u64(bad, 16, (64ull << 20) + 1);
    write_bytes(p, bad);
    EXPECT_NE(error_of([&] { cc::read_group_header(p); }).find("header length 67108865 exceeds"), std::string::npos);

    bad = f;
    put_u64(bad, 32, u64_at(f, 32) + 4096);
    write_bytes(p, bad);
    EXPECT_NE(error_of([&] { cc::read_group_header(p); }).find("payload offset"), std::string::npos);

    EXPECT_NE(error_of([&] { cc::read_group_header(dir.path() / "missing.kv"); }).find("cannot open"),
              std::string::npos);
}

// Each case: a header edited by hand under a correct checksum, and the problem the reader names.
TEST(GroupFile, InvalidFieldsUnderAValidChecksumAreRefused) {
    cc::test::TempDir dir;
    const auto h = make_header(2, 2, 4, 6, "f32");
    const auto payload = make_payload(h);
    using J = nlohmann::ordered_json;
    const struct {
        const char* name;
        std::function<void(J&)> edit;
        const char* problem;
    } cases[] = {
        {"prefix_ids shorter than n_tokens", [](J& j) { j["prefix_ids"].erase(0); },
         "prefix_ids has 5 ids, n_tokens is 6"},
        {"unknown dtype", [](J& j) { j["kv_dtype"] = "f16"; }, "kv_dtype \"f16\" is not supported"},
        {"uppercase hex key", [](J& j) { j["group_key"] = std::string(64, 'A'); },
         "\"group_key\" must be 64 lowercase hex"},
        {"short hex key", [](J& j) { j["tools_hash"] = "abc"; }, "\"tools_hash\" must be 64 lowercase hex"},
        {"boundaries decreasing",
         [](J& j) {
             j["tool_token_boundaries"] = {4, 2};
         },
         "is below the one before it"},
        {"boundary past n_tokens",
         [](J& j) {
             j["tool_token_boundaries"] = {0, 7};
         },
         "is outside [0, n_tokens = 6]"},
        {"boundary count != tools", [](J& j) { j["tool_token_boundaries"] = {0}; }, "1 entries for 2 tool names"},
        {"n_layers zero", [](J& j) { j["n_layers"] = 0; }, "\"n_layers\" must be an integer in [1,"},
        {"head_dim negative", [](J& j) { j["head_dim"] = -4; }, "\"head_dim\" must be an integer in [1,"},
        {"n_tokens a float", [](J& j) { j["n_tokens"] = 6.0; }, "\"n_tokens\" must be an integer"},
        {"n_tokens a string", [](J& j) { j["n_tokens"] = "6"; }, "\"n_tokens\" must be an integer"},
        {"negative token id", [](J& j) { j["prefix_ids"][3] = -1; }, "prefix_ids[3] must be an integer"},
        {"token id past int32", [](J& j) { j["prefix_ids"][3] = 1ll << 31; }, "prefix_ids[3] must be an integer"},
        {"tool name not a string", [](J& j) { j["tool_names"][1] = 5; }, "\"tool_names\" must be an array of strings"},
        {"missing field", [](J& j) { j.erase("created_unix_ms"); }, "header has no field \"created_unix_ms\""},
        {"unknown field", [](J& j) { j["extra"] = 1; }, "header has an unknown field \"extra\""},
        {"not an object",
         [](J& j) {
             j = J::array({1, 2});
         },
         "header is not a JSON object"},
        {"empty chat format", [](J& j) { j["chat_format"] = ""; }, "\"chat_format\" is empty"},
        {"tool_texts count != tools", [](J& j) { j["tool_texts"] = {"{}"}; }, "tool_texts has 1 entries for 2 tool names"},
        {"tool_texts not strings", [](J& j) { j["tool_texts"] = {1, 2}; }, "\"tool_texts\" must be an array of strings"},
    };
    const fs::path p = dir.path() / "hand.kv";
    // The unedited hand-built file is accepted: the cases below fail for their edit alone.
    write_bytes(p, build_file(header_json(h).dump(), payload, 2, payload.size()));
    std::vector<std::byte> out;
    EXPECT_NO_THROW(cc::read_group_file(p, out));
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        J j = header_json(h);
        c.edit(j);
        write_bytes(p, build_file(j.dump(), payload, 2, payload.size()));
        const std::string e = error_of([&] { cc::read_group_header(p); });
        EXPECT_TRUE(e.starts_with(p.string() + ": ")) << e;
        EXPECT_NE(e.find(c.problem), std::string::npos) << e;
    }

    // Text-level faults the JSON object cannot express.
    std::string dup = header_json(h).dump();
    dup.insert(dup.size() - 1, ",\"n_layers\":2");
    write_bytes(p, build_file(dup, payload, 2, payload.size()));
    EXPECT_NE(error_of([&] { cc::read_group_header(p); }).find("names a field twice"), std::string::npos);
    write_bytes(p, build_file("{\"group_key\": [[[1]]]}", payload, 2, payload.size()));
    EXPECT_NE(error_of([&] { cc::read_group_header(p); }).find("nesting deeper"), std::string::npos);
    write_bytes(p, build_file("{\"group_key\": ", payload, 2, payload.size()));
    EXPECT_NE(error_of([&] { cc::read_group_header(p); }).find("invalid JSON"), std::string::npos);

    // The preamble's payload length must match the header's shape.
    write_bytes(p, build_file(header_json(h).dump(), payload, 2, payload.size() - 8));
    EXPECT_NE(error_of([&] { cc::read_group_header(p); }).find("payload length"), std::string::npos);

    // A shape whose size overflows is refused, not wrapped around.
    J huge = header_json(h);
    huge["n_kv_heads"] = 2147483647;
    huge["head_dim"] = 2147483647;
    huge["n_layers"] = 2147483647;
    write_bytes(p, build_file(huge.dump(), payload, 2, payload.size()));
    EXPECT_NE(error_of([&] { cc::read_group_header(p); }).find("overflows"), std::string::npos);
}

TEST(GroupFile, WriterRefusesAnInvalidHeaderOrPayloadAndWritesNothing) {
    cc::test::TempDir dir;
    const fs::path p = dir.path() / "g.kv";
    auto h = make_header(2, 2, 4, 6, "f32");
    auto payload = make_payload(h);
    payload.pop_back();
    EXPECT_NE(error_of([&] { cc::write_group_file(p, h, payload); }).find("payload is"), std::string::npos);
    h.prefix_ids.pop_back();  // 5 tokens: a 6-token payload no longer fits the header
    EXPECT_NE(error_of([&] {
                  cc::write_group_file(p, h, make_payload(make_header(2, 2, 4, 6, "f32")));
              }).find("the header's shape needs"),
              std::string::npos);
    EXPECT_TRUE(dir_names(dir.path()).empty());
}

TEST(GroupFile, RewriteReplacesTheFileWhole) {
    cc::test::TempDir dir;
    const fs::path p = dir.path() / "g.kv";
    const auto h1 = make_header(2, 1, 4, 3, "f32");
    const auto h2 = make_header(2, 1, 4, 9, "bf16");
    cc::write_group_file(p, h1, make_payload(h1, 1));
    cc::write_group_file(p, h2, make_payload(h2, 2));
    std::vector<std::byte> out;
    EXPECT_EQ(cc::read_group_file(p, out).n_tokens(), 9u);
    EXPECT_TRUE(out == make_payload(h2, 2));
    EXPECT_EQ(dir_names(dir.path()).size(), 1u);
}

// A real crash: the writing process is killed with SIGKILL after its first chunk reached the file.
TEST(GroupFile, WriterKilledMidWriteLeavesNoFileAtTheFinalPath) {
    cc::test::TempDir dir;
    const fs::path p = dir.path() / "g.kv";
    const auto h = make_header(4, 2, 16, 200, "f32");
    const auto payload = make_payload(h);
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        ::close(fds[0]);
        cc::GroupFileWriteOptions opt;
        opt.chunk_bytes = 4096;
        opt.on_progress = [&](size_t) {
            [[maybe_unused]] const ssize_t w = ::write(fds[1], "x", 1);
            for (;;) ::pause();  // killed here
        };
        try {
            cc::write_group_file(p, h, payload, opt);
        } catch (...) {
        }
        ::_exit(1);
    }
    ::close(fds[1]);
    char c = 0;
    ASSERT_EQ(::read(fds[0], &c, 1), 1) << "the child did not reach its first chunk";
    ::close(fds[0]);
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    EXPECT_FALSE(fs::exists(p));
    const auto names = dir_names(dir.path());
    ASSERT_EQ(names.size(), 1u) << "the killed writer's temp file should be all that remains";
    EXPECT_TRUE(names[0].starts_with(".g.kv.tmp-" + std::to_string(pid) + "-")) << names[0];
    EXPECT_TRUE(visible_names(dir.path()).empty());
    // The temp holds the first chunk only, and is not mistaken for a group file.
    const fs::path temp = dir.path() / names[0];
    EXPECT_GT(fs::file_size(temp), 0u);
    EXPECT_NE(error_of([&] { cc::read_group_header(temp); }).find("truncated"), std::string::npos);
    // Its writer is dead, so nobody holds its lock: the cleaner removes it, and only it.
    EXPECT_EQ(cc::remove_stale_temp_files(dir.path()), std::vector<std::string>{names[0]});
    EXPECT_TRUE(dir_names(dir.path()).empty());
}

// A live writer holds its temp's lock until the rename: a cleaner running meanwhile (here from
// inside the writer's own progress hook) leaves it alone, and the write completes.
TEST(GroupFile, ALiveWritersTempFileIsNotRemovedByTheCleaner) {
    cc::test::TempDir dir;
    const fs::path p = dir.path() / "g.kv";
    const auto h = make_header(4, 2, 16, 200, "f32");
    const auto payload = make_payload(h);
    cc::GroupFileWriteOptions opt;
    opt.chunk_bytes = 4096;
    std::vector<std::string> seen, removed;
    opt.on_progress = [&](size_t) {
        if (!seen.empty()) return;
        seen = dir_names(dir.path());
        removed = cc::remove_stale_temp_files(dir.path());
    };
    cc::write_group_file(p, h, payload, opt);
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_TRUE(seen[0].starts_with(".g.kv.tmp-")) << seen[0];
    EXPECT_TRUE(removed.empty()) << removed[0];
    std::vector<std::byte> out;
    EXPECT_EQ(cc::read_group_file(p, out).n_tokens(), 200u);
    EXPECT_EQ(dir_names(dir.path()), std::vector<std::string>{"g.kv"});
    EXPECT_TRUE(cc::remove_stale_temp_files(dir.path()).empty());  // a group file is never a temp
}

// A directory the writer may not create files in. chmod 0500 does not stop root, so as root the
// same refusal is produced by a read-only tmpfs in a private mount namespace (EROFS), and, where
// that is not allowed either, by a path whose parent is a regular file (ENOTDIR).
TEST(GroupFile, UnwritableDirectoryIsAnErrorNamingTheFile) {
    cc::test::TempDir dir;
    const fs::path ro = dir.path() / "ro";
    fs::create_directory(ro);
    ::chmod(ro.c_str(), 0500);
    const bool chmod_stops_us = ::access(ro.c_str(), W_OK) != 0;
    const auto h = make_header(2, 1, 4, 3, "f32");
    const auto payload = make_payload(h);

    if (chmod_stops_us) {
        std::cout << "[ case ] chmod 0500 directory (EACCES)\n";
        const fs::path p = ro / "g.kv";
        const std::string e = error_of([&] { cc::write_group_file(p, h, payload); });
        EXPECT_TRUE(e.starts_with(p.string() + ": ")) << e;
        EXPECT_NE(e.find(std::strerror(EACCES)), std::string::npos) << e;
        EXPECT_TRUE(dir_names(ro).empty());
        ::chmod(ro.c_str(), 0700);
        return;
    }
    ::chmod(ro.c_str(), 0700);
    const std::string r = run_in_child([&]() -> std::string {
        if (auto why = mount_private_tmpfs(ro, MS_RDONLY, "size=1m"); !why.empty()) return "SKIP " + why;
        const fs::path p = ro / "g.kv";
        const std::string e = error_of([&] { cc::write_group_file(p, h, payload); });
        if (!e.starts_with(p.string() + ": ") || e.find(std::strerror(EROFS)) == std::string::npos)
            return "FAIL message: " + e;
        if (!dir_names(ro).empty()) return "FAIL something was left in the directory";
        return "OK";
    });
    if (r == "OK") {
        std::cout << "[ case ] running as root: read-only tmpfs in a private mount namespace (EROFS)\n";
        return;
    }
    ASSERT_TRUE(r.starts_with("SKIP")) << r;
    std::cout << "[ case ] running as root without mount rights (" << r
              << "): a path whose parent is a regular file (ENOTDIR)\n";
    write_bytes(dir.path() / "file", "x");
    const fs::path p = dir.path() / "file" / "g.kv";
    const std::string e = error_of([&] { cc::write_group_file(p, h, payload); });
    EXPECT_TRUE(e.starts_with(p.string() + ": ")) << e;
    EXPECT_NE(e.find(std::strerror(ENOTDIR)), std::string::npos) << e;
}

// A parent that is not a directory is refused on any system.
TEST(GroupFile, ParentThatIsARegularFileIsRefused) {
    cc::test::TempDir dir;
    write_bytes(dir.path() / "file", "x");
    const auto h = make_header(1, 1, 4, 2, "f32");
    const fs::path p = dir.path() / "file" / "g.kv";
    const std::string e = error_of([&] { cc::write_group_file(p, h, make_payload(h)); });
    EXPECT_TRUE(e.starts_with(p.string() + ": cannot create temp file")) << e;
    EXPECT_NE(e.find(std::strerror(ENOTDIR)), std::string::npos) << e;
}

// A real full disk: a 64 KiB tmpfs in a private mount namespace (needs CAP_SYS_ADMIN; skipped
// without it, where the injected failure below still runs).
TEST(GroupFile, FullDiskRemovesTheTempFile) {
    cc::test::TempDir dir;
    const fs::path small = dir.path() / "small";
    fs::create_directory(small);
    const auto h = make_header(4, 2, 64, 300, "f32");  // 1.2 MB: does not fit
    const auto payload = make_payload(h);
    const std::string r = run_in_child([&]() -> std::string {
        if (auto why = mount_private_tmpfs(small, 0, "size=64k"); !why.empty()) return "SKIP " + why;
        const fs::path p = small / "g.kv";
        const std::string e = error_of([&] { cc::write_group_file(p, h, payload); });
        if (!e.starts_with(p.string() + ": ") || e.find(std::strerror(ENOSPC)) == std::string::npos)
            return "FAIL message: " + e;
        if (!dir_names(small).empty()) return "FAIL left in the directory: " + dir_names(small)[0];
        return "OK";
    });
    if (r.starts_with("SKIP")) GTEST_SKIP() << "cannot mount a small tmpfs: " << r.substr(5);
    EXPECT_EQ(r, "OK");
}

// The same failure injected through the progress hook, midway through the payload.
TEST(GroupFile, InjectedWriteFailureRemovesTheTempFile) {
    cc::test::TempDir dir;
    const fs::path p = dir.path() / "g.kv";
    const auto h = make_header(4, 2, 16, 200, "f32");
    cc::GroupFileWriteOptions opt;
    opt.chunk_bytes = 8192;
    int calls = 0;
    opt.on_progress = [&](size_t) {
        if (++calls == 3) throw std::system_error(ENOSPC, std::generic_category(), "write");
    };
    const std::string e = error_of([&] { cc::write_group_file(p, h, make_payload(h), opt); });
    EXPECT_EQ(calls, 3);
    EXPECT_EQ(e, p.string() + ": cannot write group file: write: " + std::strerror(ENOSPC));
    EXPECT_TRUE(dir_names(dir.path()).empty());

    // Any other exception from the hook propagates as is, after the same clean-up.
    struct Stop {};
    opt.on_progress = [](size_t) { throw Stop{}; };
    EXPECT_THROW(cc::write_group_file(p, h, make_payload(h), opt), Stop);
    EXPECT_TRUE(dir_names(dir.path()).empty());
}

TEST(GroupFile, PayloadSizeArithmetic) {
    auto h = make_header(8, 4, 64, 2952, "f32");
    EXPECT_EQ(cc::group_layer_bytes(h), size_t(2) * 4 * 2952 * 64 * 4);
    EXPECT_EQ(cc::group_payload_bytes(h), size_t(8) * 2 * 4 * 2952 * 64 * 4);
    EXPECT_EQ(cc::kv_dtype_bytes(cc::KvDType::bf16), 2u);
    EXPECT_EQ(cc::kv_dtype_bytes(cc::KvDType::f32), 4u);
    h.n_layers = h.n_kv_heads = h.head_dim = 2147483647;
    EXPECT_THROW(cc::group_payload_bytes(h), std::runtime_error);
}

// Writes the seed corpus of fuzz/fuzz_group_header.cpp. Disabled: run once by hand with
//   test_group_file --gtest_also_run_disabled_tests --gtest_filter='*WriteFuzzSeeds'
TEST(GroupFile, DISABLED_WriteFuzzSeeds) {
    const fs::path out = cc::test::source_dir() / "fuzz" / "corpus" / "group_header";
    fs::create_directories(out);
    const struct {
        const char* name;
        GroupMeta h;
    } seeds[] = {{"f32_1layer_0tokens.kv", make_header(1, 1, 2, 0, "f32", 0)},
                 {"bf16_1layer_3tokens.kv", make_header(1, 1, 2, 3, "bf16", 1)},
                 {"f32_2layers_5tokens.kv", make_header(2, 1, 2, 5, "f32", 2)},
                 {"bf16_2layers_2heads_4tokens.kv", make_header(2, 2, 2, 4, "bf16", 3)}};
    for (const auto& s : seeds) cc::write_group_file(out / s.name, s.h, make_payload(s.h, 3));
}
