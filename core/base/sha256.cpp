#include "core/base/sha256.h"

#include <algorithm>

#include <openssl/evp.h>

#include <fstream>
#include <stdexcept>
#include <vector>

namespace cc {

struct Sha256::Ctx {
    EVP_MD_CTX* md = nullptr;
};

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) {
    ctx_->md = EVP_MD_CTX_new();
    if (!ctx_->md || EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) != 1)
        throw std::runtime_error("OpenSSL: cannot initialise SHA-256");
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_->md); }

void Sha256::update(const void* data, size_t n_bytes) {
    if (n_bytes && EVP_DigestUpdate(ctx_->md, data, n_bytes) != 1) throw std::runtime_error("OpenSSL: SHA-256 update failed");
}

Sha256Digest Sha256::finish() {
    Sha256Digest digest{};
    unsigned int n = 0;
    if (EVP_DigestFinal_ex(ctx_->md, digest.data(), &n) != 1 || n != digest.size())
        throw std::runtime_error("OpenSSL: SHA-256 final failed");
    EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr);
    return digest;
}

std::string to_hex(const Sha256Digest& digest) {
    static constexpr char hex[] = "0123456789abcdef";
    std::string out;
    out.reserve(64);
    for (const uint8_t b : digest) {
        out.push_back(hex[b >> 4]);
        out.push_back(hex[b & 15]);
    }
    return out;
}

std::string sha256_hex(std::string_view data) {
    Sha256 h;
    h.update(data);
    return to_hex(h.finish());
}

std::string sha256_file_hex(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(path.string() + ": cannot open for hashing");
    Sha256 h;
    std::vector<char> buf(1 << 20);
    while (in) {
        in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        h.update(buf.data(), static_cast<size_t>(in.gcount()));
    }
    if (in.bad()) throw std::runtime_error(path.string() + ": read error while hashing");
    return to_hex(h.finish());
}

bool is_group_key(std::string_view text) {
    return text.size() == 64 &&
           std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace cc
