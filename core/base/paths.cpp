#include "core/base/paths.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace cc {

std::filesystem::path default_cache_dir() {
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::filesystem::path(xdg) / "contextcache";
    if (const char* home = std::getenv("HOME"); home && *home) return std::filesystem::path(home) / ".cache" / "contextcache";
    return std::filesystem::temp_directory_path() / "contextcache";
}

void ensure_private_dir(const std::filesystem::path& dir) {
    std::error_code ec;
    if (std::filesystem::is_directory(dir, ec)) return;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw std::runtime_error(dir.string() + ": cannot create the cache directory: " + ec.message());
    if (::chmod(dir.c_str(), 0700) != 0)
        throw std::runtime_error(dir.string() + ": cannot set mode 0700: " + std::strerror(errno));
}

}  // namespace cc
