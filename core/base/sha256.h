// SHA-256 through OpenSSL's EVP interface.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace cc {

using Sha256Digest = std::array<uint8_t, 32>;

class Sha256 {
public:
    Sha256();
    ~Sha256();
    Sha256(const Sha256&) = delete;
    Sha256& operator=(const Sha256&) = delete;

    void update(const void* data, size_t n_bytes);
    void update(std::string_view text) { update(text.data(), text.size()); }
    Sha256Digest finish();  // the object can be reused after finish()

private:
    struct Ctx;
    std::unique_ptr<Ctx> ctx_;
};

std::string to_hex(const Sha256Digest& digest);
std::string sha256_hex(std::string_view data);
// 64 lowercase hex characters: a SHA-256 hex digest, the form of every group key (and of the
// cache's file names).
bool is_group_key(std::string_view text);
std::string sha256_file_hex(const std::filesystem::path& path);  // throws naming the file

}  // namespace cc
