// core/model/model_spec: the model fingerprint and its memo (DESIGN §3): each file's SHA-256 is reused
// while its path, size and mtime are unchanged.
#include "core/model/model_spec.h"

#include "tests/safetensors_writer.h"
#include "tests/test_support.h"

namespace cc {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// A weights-only model directory: config.json + model.safetensors.
fs::path make_model(const fs::path& root) {
    const fs::path dir = root / "model";
    fs::create_directories(dir);
    test::write_bytes(dir / "config.json", test::tiny_config("llama").dump());
    test::write_bytes(dir / "model.safetensors", test::safetensors_bytes({{"a", "F32", {64}}}));
    return dir;
}

// Rewrites PATH with CONTENT of the same size, then restores its mtime: only a memo can tell.
void swap_content_keep_stamp(const fs::path& path, const std::string& content) {
    ASSERT_EQ(content.size(), fs::file_size(path));
    const auto mtime = fs::last_write_time(path);
    test::write_bytes(path, content);
    fs::last_write_time(path, mtime);
}

TEST(ModelFingerprint, MemoGivesTheSameFingerprint) {
    test::TempDir tmp;
    const auto src = resolve_model(make_model(tmp.path()).string());
    const fs::path cache = tmp.path() / "cache" / "nested";
    const std::string plain = model_fingerprint(src);
    EXPECT_EQ(model_fingerprint(src, cache), plain);
    ASSERT_TRUE(fs::exists(cache / "fingerprints.json"));
    const json memo = json::parse(test::read_file(cache / "fingerprints.json"));
    EXPECT_EQ(memo["version"], 1);
    EXPECT_EQ(memo["files"].size(), 2u);  // config.json and model.safetensors
    EXPECT_EQ(model_fingerprint(src, cache), plain);
}

TEST(ModelFingerprint, UnchangedFileIsNotRehashed) {
    test::TempDir tmp;
    const fs::path dir = make_model(tmp.path());
    const auto src = resolve_model(dir.string());
    const fs::path cache = tmp.path() / "cache";
    const std::string before = model_fingerprint(src, cache);

    std::string data = test::read_file(dir / "model.safetensors");
    data.back() = static_cast<char>(data.back() ^ 1);
    swap_content_keep_stamp(dir / "model.safetensors", data);
    EXPECT_NE(model_fingerprint(src), before);         // the content did change...
    EXPECT_EQ(model_fingerprint(src, cache), before);  // ...but same path, size and mtime: the memo's hash
}

TEST(ModelFingerprint, TouchedOrModifiedFileIsRehashed) {
    test::TempDir tmp;
    const fs::path dir = make_model(tmp.path());
    const auto src = resolve_model(dir.string());
    const fs::path cache = tmp.path() / "cache";
    const std::string before = model_fingerprint(src, cache);

    // Same content and size, another mtime: rehashed, same fingerprint.
    std::string data = test::read_file(dir / "model.safetensors");
    const auto mtime = fs::last_write_time(dir / "model.safetensors");
    data.back() = static_cast<char>(data.back() ^ 1);
    test::write_bytes(dir / "model.safetensors", data);
    fs::last_write_time(dir / "model.safetensors", mtime + std::chrono::seconds(5));
    const std::string after = model_fingerprint(src, cache);
    EXPECT_NE(after, before);
    EXPECT_EQ(after, model_fingerprint(src));

    // Another size (the memo entry is keyed by size too).
    fs::last_write_time(dir / "model.safetensors", mtime);
    test::write_bytes(dir / "config.json", test::tiny_config("mistral").dump());
    fs::last_write_time(dir / "config.json", mtime);
    EXPECT_EQ(model_fingerprint(src, cache), model_fingerprint(src));
}

TEST(ModelFingerprint, DamagedMemoIsIgnoredAndRewritten) {
    test::TempDir tmp;
    const auto src = resolve_model(make_model(tmp.path()).string());
    const fs::path cache = tmp.path() / "cache";
    fs::create_directories(cache);
    const std::string plain = model_fingerprint(src);
    for (const char* damaged : {"{\"version\": 1, \"files\": {", "[]", "{\"version\": 9, \"files\": {}}",
                                "{\"version\": 1, \"files\": {\"/x\": 3}}", ""}) {
        test::write_bytes(cache / "fingerprints.json", damaged);
        EXPECT_EQ(model_fingerprint(src, cache), plain) << damaged;
        const json memo = json::parse(test::read_file(cache / "fingerprints.json"));
        EXPECT_EQ(memo["version"], 1);
        EXPECT_GE(memo["files"].size(), 2u) << damaged;
    }
    // A wrong entry for a real file (bad hash) is not trusted.
    json memo = json::parse(test::read_file(cache / "fingerprints.json"));
    for (auto& [key, entry] : memo["files"].items()) entry["sha256"] = "not a hash";
    test::write_bytes(cache / "fingerprints.json", memo.dump());
    EXPECT_EQ(model_fingerprint(src, cache), plain);
    // No temp file is left behind.
    int n_files = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(cache)) ++n_files;
    EXPECT_EQ(n_files, 1);
}

TEST(ModelFingerprint, ForgetsFilesThatAreGone) {
    test::TempDir tmp;
    const fs::path cache = tmp.path() / "cache";
    const fs::path a = make_model(tmp.path() / "a");
    model_fingerprint(resolve_model(a.string()), cache);
    fs::remove_all(a);
    model_fingerprint(resolve_model(make_model(tmp.path() / "b").string()), cache);
    const json memo = json::parse(test::read_file(cache / "fingerprints.json"));
    EXPECT_EQ(memo["files"].size(), 2u);
}

TEST(ModelFingerprint, BuiltinIgnoresTheMemo) {
    test::TempDir tmp;
    const auto src = resolve_model(default_model_spec());
    EXPECT_EQ(model_fingerprint(src, tmp.path() / "cache"), model_fingerprint(src));
}

}  // namespace
}  // namespace cc
