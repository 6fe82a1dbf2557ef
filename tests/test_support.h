// Shared helpers for the GoogleTest suites: paths configured by CMake and fixture lookup.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

namespace cc::test {

inline std::filesystem::path data_dir() { return CC_TEST_DATA_DIR; }      // tests/data
inline std::filesystem::path gen_dir() { return CC_TEST_GEN_DIR; }        // unpacked archives
inline std::filesystem::path source_dir() { return CC_SOURCE_DIR; }       // repository root
inline std::filesystem::path shared_dir() { return CC_SHARED_DIR; }       // ../shared
inline std::filesystem::path cli_path() { return CC_CLI_PATH; }

inline std::filesystem::path fixture(const std::string& name) { return shared_dir() / "fixtures" / name; }

inline std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(path.string() + ": cannot open");
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// A fresh empty directory under the system temp dir, removed when the object dies.
class TempDir {
public:
    TempDir() {
        auto base = std::filesystem::temp_directory_path();
        for (int i = 0;; ++i) {
            path_ = base / ("cc_test_" + std::to_string(::getpid()) + "_" + std::to_string(i));
            if (std::filesystem::create_directory(path_)) break;
        }
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

}  // namespace cc::test

// Skips the current test with a clear message when a shared fixture is absent.
#define CC_REQUIRE_FIXTURE(name)                                                                 \
    do {                                                                                         \
        if (!std::filesystem::exists(::cc::test::fixture(name)))                                 \
            GTEST_SKIP() << "fixture " << ::cc::test::fixture(name)                              \
                         << " is absent (CONTEXTCACHE_SHARED_DIR=" << CC_SHARED_DIR << ")";      \
    } while (0)
