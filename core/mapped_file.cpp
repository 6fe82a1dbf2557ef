#include "core/mapped_file.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cc {
namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const char* what, int err) {
    throw std::runtime_error(path.string() + ": " + what + ": " + std::strerror(err));
}

// Closes the descriptor on every path out of the constructor; the mapping outlives it.
struct FdGuard {
    int fd;
    ~FdGuard() {
        if (fd >= 0) ::close(fd);
    }
};

}  // namespace

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(path, "cannot open", errno);
    FdGuard guard{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0) fail(path, "cannot stat", errno);
    if (!S_ISREG(st.st_mode)) throw std::runtime_error(path.string() + ": not a regular file");
    if (st.st_size == 0) return;  // mmap refuses length 0; an empty file is an empty span
    const auto n_bytes = static_cast<size_t>(st.st_size);
    void* p = ::mmap(nullptr, n_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) fail(path, "cannot mmap", errno);
    data_ = static_cast<const std::byte*>(p);
    size_ = n_bytes;
}

MappedFile::~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
    if (this != &other) {
        if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
        path_ = std::move(other.path_);
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
    }
    return *this;
}

}  // namespace cc
