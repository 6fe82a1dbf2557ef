// The CUDA backend as a plugin (app/backends.h): the programs do not link the CUDA libraries; they
// open libcontextcache-cuda.so only where the NVIDIA driver is installed. Here (no GPU, and on CI
// no driver): the plugin this tree built opens, binds every symbol and reports why there is no
// device; a plugin of another build, a library that is no plugin and a missing file are refused
// with the file named; and probing for a GPU without the driver maps no CUDA library.
#include "app/backends.h"
#include "core/model/builtin_model.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

std::string self_maps() {
    std::ifstream in("/proc/self/maps");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

bool driver_installed() {
    return dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL) != nullptr;
}

std::string error_of(const fs::path& path) {
    try {
        cc::app::open_backend_plugin(path);
    } catch (const std::runtime_error& e) {
        return e.what();
    }
    return "";
}

// ctest runs each test in its own process (and a plain run of the binary runs this one first):
// nothing has opened the plugin yet.
TEST(BackendPlugin, ProbingWithoutTheDriverMapsNoCudaLibrary) {
    const auto backends = cc::app::available_backends();
    if (cc::app::cuda_plugin_candidates().empty()) GTEST_SKIP() << "this build has no CUDA backend";
    if (driver_installed()) GTEST_SKIP() << "the NVIDIA driver is installed here: the plugin opens, as it should";
    const auto probe = backends->probe_gpu();
    EXPECT_TRUE(probe.compiled);
    EXPECT_FALSE(probe.available);
    EXPECT_TRUE(probe.message.starts_with("no CUDA device: the NVIDIA driver is not installed (libcuda.so.1")) << probe.message;
    const std::string maps = self_maps();
    for (const char* lib : {"libcudart", "libcublas", "libcontextcache-cuda"})
        EXPECT_EQ(maps.find(lib), std::string::npos) << lib << " is mapped after a probe without the driver";
}

TEST(BackendPlugin, TheBuiltPluginOpensAndReportsWhyThereIsNoDevice) {
    const auto candidates = cc::app::cuda_plugin_candidates();
    if (candidates.empty()) GTEST_SKIP() << "this build has no CUDA backend";
    ASSERT_TRUE(fs::exists(candidates.back())) << candidates.back();
    const cc::BackendEntry e = cc::app::open_backend_plugin(candidates.back());
    EXPECT_EQ(e.name, "cuda");
    ASSERT_TRUE(e.probe && e.numerics_id && e.required_bytes && e.make && e.selftest);
    const auto probe = e.probe();
    EXPECT_TRUE(probe.compiled);
    EXPECT_FALSE(probe.message.empty());
    if (probe.available) GTEST_SKIP() << "a CUDA device is present (" << probe.message << "): test_cuda_* cover it";
    EXPECT_TRUE(probe.message.starts_with("no CUDA device")) << probe.message;

    // The plugin's code runs: its numerics id for a named device, and the bytes a model needs.
    cc::CudaProbeSummary h100;
    h100.compiled = h100.available = true;
    h100.device_name = "NVIDIA H100";
    h100.compute_major = 9;
    cc::BackendOptions o;
    EXPECT_EQ(e.numerics_id(o, h100), "cuda/sm90/bf16/f32");
    const auto recipe = cc::find_builtin("qwen3-test");
    ASSERT_TRUE(recipe);
    EXPECT_GT(e.required_bytes(recipe->config, o), size_t(0));
    // An exception thrown in the plugin is caught here, with its message.
    o.weights = cc::WeightDType::bf16dot;
    try {
        e.numerics_id(o, h100);
        ADD_FAILURE() << "the cuda backend took --weights bf16dot";
    } catch (const std::runtime_error& err) {
        EXPECT_NE(std::string(err.what()).find("is a CPU backend format"), std::string::npos) << err.what();
    }
}

TEST(BackendPlugin, APluginOfAnotherBuildIsRefusedBeforeItRuns) {
    const std::string why = error_of(CC_FAKE_BACKEND_PLUGIN);
    EXPECT_NE(why.find(CC_FAKE_BACKEND_PLUGIN), std::string::npos) << why;
    EXPECT_NE(why.find("built for another program"), std::string::npos) << why;
    EXPECT_NE(why.find("build=another-tree"), std::string::npos) << why;
}

TEST(BackendPlugin, ALibraryThatIsNoPluginAndAMissingFileAreRefusedByName) {
    const std::string not_plugin = error_of("libm.so.6");
    EXPECT_NE(not_plugin.find("backend plugin libm.so.6: not a ContextCache backend plugin"), std::string::npos) << not_plugin;
    const fs::path missing = fs::temp_directory_path() / "no-such-dir-cc" / "libcontextcache-cuda.so";
    const std::string gone = error_of(missing);
    EXPECT_TRUE(gone.starts_with("backend plugin " + missing.string() + ": ")) << gone;
}

}  // namespace
