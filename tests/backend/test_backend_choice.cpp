// The backend choice (core/backend/backend_choice.h) with fake probes: every branch of auto / cpu / cuda
// on a machine without a GPU, and the engine's use of it (the reason and the planned numerics).
#include "app/backends.h"
#include "core/backend/backend_choice.h"
#include "core/engine/backend_select.h"
#include "core/engine/engine.h"

#include <gtest/gtest.h>

namespace {

cc::CudaProbeSummary h100(size_t free_bytes) {
    cc::CudaProbeSummary c;
    c.compiled = true;
    c.available = true;
    c.message = "NVIDIA H100 (sm_90)";
    c.device_name = "NVIDIA H100";
    c.compute_major = 9;
    c.compute_minor = 0;
    c.free_bytes = free_bytes;
    return c;
}

cc::BackendChoiceInputs inputs(const std::string& requested, cc::CudaProbeSummary cuda,
                               std::optional<size_t> required = size_t(1) << 30) {
    cc::BackendChoiceInputs in;
    in.requested = requested;
    in.cuda = std::move(cuda);
    in.required_bytes = required;
    return in;
}

constexpr size_t GiB = size_t(1) << 30;

TEST(BackendChoice, CpuIsAlwaysTheCpuEvenWithADevice) {
    const auto c = cc::choose_backend(inputs("cpu", h100(80 * GiB)));
    EXPECT_EQ(c.backend, "cpu");
    EXPECT_EQ(c.reason, "asked for (--backend cpu)");
}

TEST(BackendChoice, AutoPicksCudaWhenTheModelFits) {
    const auto c = cc::choose_backend(inputs("auto", h100(80 * GiB), 17 * GiB));
    EXPECT_EQ(c.backend, "cuda");
    EXPECT_EQ(c.reason, "auto: CUDA device NVIDIA H100 (sm_90)");
}

TEST(BackendChoice, AutoFitsExactlyAtTheFreeBytesAndNotOneByteAbove) {
    EXPECT_EQ(cc::choose_backend(inputs("auto", h100(9 * GiB), 9 * GiB)).backend, "cuda");
    EXPECT_EQ(cc::choose_backend(inputs("auto", h100(9 * GiB), 9 * GiB + 1)).backend, "cpu");
}

TEST(BackendChoice, AutoFallsBackWhenTheModelDoesNotFitAndSaysHowMuch) {
    const size_t need = static_cast<size_t>(17.2 * double(GiB));
    const size_t free = static_cast<size_t>(9.1 * double(GiB));
    const auto c = cc::choose_backend(inputs("auto", h100(free), need));
    EXPECT_EQ(c.backend, "cpu");
    EXPECT_EQ(c.reason, "auto: model needs 17.2 GiB, NVIDIA H100 has 9.1 GiB free");
}

TEST(BackendChoice, AutoWithoutADeviceRepeatsTheProbesMessage) {
    cc::CudaProbeSummary none;
    none.compiled = true;
    none.message = "no CUDA device: CUDA driver version is insufficient for CUDA runtime version";
    const auto c = cc::choose_backend(inputs("auto", none));
    EXPECT_EQ(c.backend, "cpu");
    EXPECT_EQ(c.reason, "auto: no CUDA device: CUDA driver version is insufficient for CUDA runtime version");
}

TEST(BackendChoice, AutoInABuildWithoutCudaSaysSo) {
    const auto c = cc::choose_backend(inputs("auto", cc::CudaProbeSummary{}));
    EXPECT_EQ(c.backend, "cpu");
    EXPECT_NE(c.reason.find("auto: this build has no CUDA backend"), std::string::npos) << c.reason;
}

TEST(BackendChoice, AutoWithUnknownRequiredBytesStaysOnTheCpu) {
    auto in = inputs("auto", h100(80 * GiB), std::nullopt);
    in.required_bytes_error = "the CUDA forward pass is not implemented yet";
    const auto c = cc::choose_backend(in);
    EXPECT_EQ(c.backend, "cpu");
    EXPECT_EQ(c.reason, "auto: the device memory this model needs is unknown: the CUDA forward pass is not implemented yet");
}

TEST(BackendChoice, AutoWithUnreadableFreeMemoryStaysOnTheCpu) {
    auto probe = h100(0);
    probe.free_bytes.reset();
    probe.free_bytes_error = "cudaMemGetInfo failed: cudaErrorDevicesUnavailable";
    const auto c = cc::choose_backend(inputs("auto", probe));
    EXPECT_EQ(c.backend, "cpu");
    EXPECT_NE(c.reason.find("cudaErrorDevicesUnavailable"), std::string::npos) << c.reason;
}

TEST(BackendChoice, CudaWithADeviceThatFitsIsCuda) {
    const auto c = cc::choose_backend(inputs("cuda", h100(80 * GiB)));
    EXPECT_EQ(c.backend, "cuda");
    EXPECT_EQ(c.reason, "asked for (--backend cuda): NVIDIA H100 (sm_90)");
}

// "cuda" never quietly becomes a CPU run: each obstacle is an error that names it.
TEST(BackendChoice, CudaWithoutAUsableDeviceIsAnErrorNamingWhy) {
    cc::CudaProbeSummary none;
    none.compiled = true;
    none.message = "no CUDA device: the driver reports 0 devices";
    auto expect_error = [](const cc::BackendChoiceInputs& in, const std::string& part) {
        try {
            cc::choose_backend(in);
            ADD_FAILURE() << "no error; expected one naming: " << part;
        } catch (const std::runtime_error& e) {
            const std::string what = e.what();
            EXPECT_TRUE(what.starts_with("--backend cuda: ")) << what;
            EXPECT_NE(what.find(part), std::string::npos) << what;
        }
    };
    expect_error(inputs("cuda", none), "no CUDA device: the driver reports 0 devices");
    expect_error(inputs("cuda", cc::CudaProbeSummary{}), "this build has no CUDA backend");
    expect_error(inputs("cuda", h100(GiB), 2 * GiB), "model needs 2.0 GiB, NVIDIA H100 has 1.0 GiB free");
    auto unknown = inputs("cuda", h100(80 * GiB), std::nullopt);
    unknown.required_bytes_error = "no kernels for this model";
    expect_error(unknown, "no kernels for this model");
}

TEST(BackendChoice, UnknownBackendNameIsRejected) {
    EXPECT_THROW(cc::choose_backend(inputs("rocm", h100(80 * GiB))), std::invalid_argument);
}

TEST(BackendChoice, HumanBytes) {
    EXPECT_EQ(cc::human_bytes(12), "12 bytes");
    EXPECT_EQ(cc::human_bytes(1536), "1.5 KiB");
    EXPECT_EQ(cc::human_bytes(size_t(512) << 20), "512.0 MiB");
    EXPECT_EQ(cc::human_bytes(size_t(80) << 30), "80.0 GiB");
}

// The engine on this machine (no GPU, whatever the build): auto runs on the CPU and says why, the
// planned numerics equal the loaded ones, and --backend cuda is an error naming the reason.
TEST(BackendChoice, EngineReportsTheReasonAndPlannedNumericsMatch) {
    const auto backends = cc::app::available_backends();
    const auto probe = backends->probe_gpu();
    if (probe.available) GTEST_SKIP() << "a CUDA device is present (" << probe.message << "): this test covers machines without one";
    cc::EngineOptions o;
    o.model_spec = "builtin:qwen3-test";
    o.backends = backends;
    const std::string planned = cc::planned_numerics(o);
    cc::Engine engine(o);
    const auto& info = engine.load_model();
    EXPECT_EQ(info.backend, "cpu");
    EXPECT_EQ(info.numerics, planned);
    EXPECT_TRUE(info.backend_reason.starts_with("auto: ")) << info.backend_reason;
    EXPECT_FALSE(info.device.empty());

    o.backend = "cuda";
    EXPECT_THROW(cc::planned_numerics(o), std::runtime_error);
    cc::Engine cuda_engine(o);
    try {
        cuda_engine.load_model();
        ADD_FAILURE() << "--backend cuda loaded without a device";
    } catch (const std::runtime_error& e) {
        EXPECT_TRUE(std::string(e.what()).starts_with("--backend cuda: ")) << e.what();
    }
    EXPECT_FALSE(cuda_engine.loaded());

    o.backend = "cpu";
    cc::Engine cpu_engine(o);
    EXPECT_EQ(cpu_engine.load_model().backend_reason, "asked for (--backend cpu)");
}

TEST(BackendChoice, PlannedModelConfigMatchesTheLoadedOne) {
    cc::EngineOptions o;
    o.model_spec = "builtin:qwen3-test";
    o.backend = "cpu";
    cc::Engine engine(o);
    const auto& info = engine.load_model();
    const auto planned = cc::planned_model_config(o.model_spec);
    EXPECT_EQ(planned.n_layers, info.config.n_layers);
    EXPECT_EQ(planned.dim, info.config.dim);
    EXPECT_EQ(planned.vocab_size, info.config.vocab_size);
    EXPECT_THROW(cc::planned_model_config("builtin:no-such-model"), std::runtime_error);
}

}  // namespace
