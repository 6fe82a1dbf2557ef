// Shared helpers for the GoogleTest suites: paths configured by CMake and fixture lookup.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>
#include <sys/wait.h>

#include <array>
#include <vector>

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

// contextcache-cli run through the shell: exit code, stdout, stderr.
struct RunResult {
    int exit_code = -1;
    std::string out;
    std::string err;
};

inline std::string shell_quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

inline RunResult run_cli(const std::vector<std::string>& args) {
    static cc::test::TempDir tmp;
    const auto err_path = tmp.path() / "stderr.txt";
    // Never touch the user's real cache: every run gets this test program's own XDG_CACHE_HOME.
    std::string cmd = "XDG_CACHE_HOME=" + shell_quote((tmp.path() / "xdg-cache").string()) + " " +
                      shell_quote(cc::test::cli_path().string());
    for (const auto& a : args) cmd += " " + shell_quote(a);
    cmd += " 2>" + shell_quote(err_path.string());
    RunResult r;
    FILE* pipe = popen(cmd.c_str(), "r");
    if (!pipe) return r;
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
    const int status = pclose(pipe);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.err = cc::test::read_file(err_path);
    return r;
}

}  // namespace cc::test

// Skips the current test with a clear message when a shared fixture is absent.
#define CC_REQUIRE_FIXTURE(name)                                                                 \
    do {                                                                                         \
        if (!std::filesystem::exists(::cc::test::fixture(name)))                                 \
            GTEST_SKIP() << "fixture " << ::cc::test::fixture(name)                              \
                         << " is absent (CONTEXTCACHE_SHARED_DIR=" << CC_SHARED_DIR << ")";      \
    } while (0)
