// Result files record where they came from (core/run_info): the commit, the machine, the model.
#include "core/run_info.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>

namespace {

std::string git_describe() {
    std::string out;
    const std::string cmd = std::string("git -C '") + CC_SOURCE_DIR + "' describe --always --dirty --abbrev=12 2>/dev/null";
    if (FILE* p = popen(cmd.c_str(), "r")) {
        std::array<char, 128> buf{};
        while (fgets(buf.data(), buf.size(), p)) out += buf.data();
        pclose(p);
    }
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}

TEST(RunInfo, CommitIsTheSourceTreesAtBuildTime) {
    const std::string now = git_describe();
    if (now.empty()) GTEST_SKIP() << "not a git checkout: the build records \"unknown\"";
    // Same commit; "-dirty" may differ if files changed since the build.
    const std::string built = cc::build_commit();
    EXPECT_EQ(built.substr(0, 12), now.substr(0, 12)) << "built " << built << ", tree now " << now;
}

TEST(RunInfo, JsonNamesTheMachineAndTheModel) {
    cc::ModelInfo m;
    m.spec = "builtin:qwen3-test";
    m.fingerprint = "abc";
    m.backend = "cpu";
    m.numerics = "cpu/scalar/f32";
    m.device = "Some CPU";
    m.n_threads = 3;
    const auto j = cc::run_info_json(m);
    EXPECT_EQ(j["model"], "builtin:qwen3-test");
    EXPECT_EQ(j["model_fingerprint"], "abc");
    EXPECT_EQ(j["numerics"], "cpu/scalar/f32");
    EXPECT_EQ(j["device"], "Some CPU");
    EXPECT_EQ(j["threads"], 3);
    EXPECT_FALSE(j["machine"]["cpu"].get<std::string>().empty());
    EXPECT_GT(j["machine"]["hardware_threads"].get<unsigned>(), 0u);
    EXPECT_EQ(j["date"].get<std::string>().size(), 20u);  // 2026-11-22T00:00:00Z
}

}  // namespace
