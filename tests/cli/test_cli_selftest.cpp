// `contextcache-cli selftest` end to end: the CPU checks pass (with the exact cached == full rows),
// the CUDA self-test skips with exit code 77 and a reason on a machine without a device (never
// "pass"), and bad usage or a bad model is an error.
#include "app/backends.h"
#include "core/engine/backend_select.h"
#include "tests/test_support.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <sys/wait.h>

namespace {

using cc::test::RunResult;
using cc::test::run_cli;

TEST(CliSelftest, CudaWithoutADeviceIsSkippedWithExitCode77) {
    const auto probe = cc::app::available_backends()->probe_gpu();
    if (probe.available) GTEST_SKIP() << "a CUDA device is present (" << probe.message << "): the skip path is not taken";
    auto r = run_cli({"selftest", "--backend", "cuda"});
    EXPECT_EQ(r.exit_code, 77) << r.out << r.err;
    EXPECT_TRUE(r.out.starts_with("skipped: ")) << r.out;
    EXPECT_EQ(r.out.find("pass"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(probe.compiled ? probe.message : std::string("no CUDA backend")), std::string::npos) << r.out;

    r = run_cli({"selftest", "--backend", "cuda", "--json"});
    EXPECT_EQ(r.exit_code, 77);
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["status"], "skipped");
    EXPECT_EQ(j["backend"], "cuda");
    EXPECT_FALSE(j["reason"].get<std::string>().empty());
    EXPECT_FALSE(j.contains("checks"));
}

TEST(CliSelftest, CpuChecksPassAndCachedEqualsFullExactly) {
    const auto r = run_cli({"selftest", "--backend", "cpu", "--quick", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["backend"], "cpu");
    EXPECT_EQ(j["status"], "pass");
    EXPECT_EQ(j["failed"], 0);
    bool model_row = false, scalar_row = false, math_rows = false;
    for (const auto& c : j["checks"]) {
        EXPECT_TRUE(c["pass"].get<bool>()) << c.dump();
        EXPECT_LE(c["max_error"].get<double>(), c["bound"].get<double>()) << c.dump();
        const std::string check = c["check"];
        if (check == "model: cached == full") {
            model_row = true;
            EXPECT_EQ(c["max_error"].get<double>(), 0.0);
            EXPECT_NE(c["shape"].get<std::string>().find("builtin:qwen3-test"), std::string::npos);
        }
        if (check == "cpu scalar: cached == full") {
            scalar_row = true;
            EXPECT_EQ(c["note"], "bit-identical");
        }
        if (check.starts_with("math: ")) math_rows = true;
    }
    EXPECT_TRUE(model_row);
    EXPECT_TRUE(scalar_row);
    EXPECT_TRUE(math_rows);
}

TEST(CliSelftest, CpuTableIsReadable) {
    const auto r = run_cli({"selftest", "--backend", "cpu", "--quick"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("check"), std::string::npos);
    EXPECT_NE(r.out.find("max error"), std::string::npos);
    EXPECT_NE(r.out.find("PASS"), std::string::npos);
    EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("checks passed"), std::string::npos);
}

TEST(CliSelftest, BadUsageAndBadModelAreErrors) {
    EXPECT_EQ(run_cli({"selftest", "--backend", "gpu"}).exit_code, 2);
    EXPECT_EQ(run_cli({"selftest", "extra"}).exit_code, 2);
    EXPECT_EQ(run_cli({"selftest", "--bogus", "1"}).exit_code, 2);
    const auto r = run_cli({"selftest", "--backend", "cpu", "--quick", "--model", "/nonexistent/model-dir"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("/nonexistent/model-dir"), std::string::npos) << r.err;
}

}  // namespace
