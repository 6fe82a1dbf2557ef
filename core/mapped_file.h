// A read-only memory mapping of a whole file (RAII). Weights are used in place from the page cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

namespace cc {

class MappedFile {
public:
    MappedFile() = default;
    // Throws std::runtime_error naming the file when it cannot be opened or mapped.
    explicit MappedFile(const std::filesystem::path& path);
    ~MappedFile();
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    std::span<const std::byte> bytes() const { return {data_, size_}; }
    const std::byte* data() const { return data_; }
    size_t size() const { return size_; }
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
    const std::byte* data_ = nullptr;
    size_t size_ = 0;
};

}  // namespace cc
