// Result files record where they came from (core/research/run_info): the commit, the machine, the model.
#include "core/research/run_info.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>

namespace {

std::string run(const std::string& cmd) {
    std::string out;
    if (FILE* p = popen(cmd.c_str(), "r")) {
        std::array<char, 128> buf{};
        while (fgets(buf.data(), buf.size(), p)) out += buf.data();
        pclose(p);
    }
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}

TEST(RunInfo, CommitIsACommitOfThisSourceTree) {
    const std::string git = std::string("git -C '") + CC_SOURCE_DIR + "' ";
    if (run(git + "rev-parse --git-dir 2>/dev/null").empty())
        GTEST_SKIP() << "not a git checkout: the build records \"unknown\"";
    // `git describe --always --dirty`: an abbreviated hash (or tag-N-gHASH), maybe "-dirty". The tree
    // may have moved on since the build (a commit without a rebuild), so the test asks only that the
    // recorded commit is one of this repository's commits, not that it is HEAD.
    std::string built = cc::build_commit();
    if (built.ends_with("-dirty")) built.resize(built.size() - 6);
    const std::string resolved = run(git + "rev-parse --verify --quiet '" + built + "^{commit}' 2>/dev/null");
    EXPECT_EQ(resolved.size(), 40u) << "build_commit() = " << cc::build_commit() << " is not a commit here";
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
