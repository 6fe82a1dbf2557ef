// `contextcache-cli selftest [--backend cuda|cpu] [--quick] [--model SPEC]`: checks a build on the
// user's own machine and prints a pass/fail table (or JSON with --json).
//
//   cuda: the registered CUDA backend's self-test — every op against the CPU reference and the
//         whole model on the device. Without a device, or in a build without CUDA, it prints
//         "skipped: <reason>" and exits 77 (the automake/ctest skip code) — never "pass".
//   cpu:  the shared per-element math (core/base/kernel_math.h) against float64, every CPU instruction
//         set path this CPU has (cached == full bit for bit, and close to the scalar path), and the
//         engine's cached == full on the model (builtin:qwen3-test unless --model).
//   auto: cuda when a device is usable, else cpu (saying why).
// Exit codes: 0 every check passed, 1 a check failed (or the run itself failed), 2 usage, 77 skipped.
#include "app/cli_common.h"
#include "core/engine/backend_select.h"
#include "core/model/builtin_model.h"
#include "core/cpu/cpu_backend.h"
#include "core/cpu/kernels.h"
#include "core/base/kernel_math.h"
#include "core/model/model_spec.h"
#include "core/research/run_info.h"
#include "core/model/weights.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>

namespace cli {
namespace {

constexpr int kExitSkipped = 77;
constexpr double kEps = 0x1.0p-24;  // float32 unit roundoff

using Row = cc::SelftestRow;  // the row every backend's self-test returns (core/backend/registry.h)

Row bounded(std::string check, std::string shape, double err, double bound, std::string note = {}) {
    Row r{std::move(check), std::move(shape), err, bound, std::isfinite(err) && err <= bound, std::move(note)};
    if (!std::isfinite(err)) r.note = (r.note.empty() ? "" : r.note + "; ") + "NaN/Inf in the result";
    return r;
}

std::vector<float> random_floats(std::mt19937_64& rng, size_t n, float lo, float hi) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

// ---- shared math vs float64 --------------------------------------------------------------------

// Relative to the row's largest output; bound: the float sum of n squares (n roundings) plus the
// rsqrt and two products, each at most one unit roundoff.
void check_rmsnorm(std::vector<Row>& rows, bool quick) {
    std::mt19937_64 rng(1);
    for (int n : quick ? std::vector<int>{1, 128} : std::vector<int>{1, 7, 64, 128, 1024, 4096}) {
        const auto x = random_floats(rng, size_t(n), -4, 4);
        const auto w = random_floats(rng, size_t(n), 0.5f, 1.5f);
        std::vector<float> y(static_cast<size_t>(n));
        const float eps = 1e-6f;
        cc::km::rmsnorm_row(x.data(), w.data(), y.data(), n, eps);
        double ss = 0;
        for (float v : x) ss += double(v) * v;
        const double inv = 1.0 / std::sqrt(ss / n + eps);
        double err = 0, scale = 0;
        for (int i = 0; i < n; ++i) {
            const double ref = double(w[size_t(i)]) * (double(x[size_t(i)]) * inv);
            err = std::max(err, std::abs(double(y[size_t(i)]) - ref));
            scale = std::max(scale, std::abs(ref));
        }
        rows.push_back(bounded("math: rmsnorm vs float64", "n=" + std::to_string(n), err / scale, (n + 4) * kEps));
    }
}

// RoPE rotation with float cos/sin (as the backends round them) vs the exact rotation by the
// double angle: two products and a sum (3 roundings) plus the cos/sin rounding (1 each).
void check_rope(std::vector<Row>& rows, bool quick) {
    std::mt19937_64 rng(2);
    for (int head_dim : {64, 128}) {
        for (int pos : quick ? std::vector<int>{0, 4095} : std::vector<int>{0, 1, 4095, 32767, 100000}) {
            cc::km::RopeParams p;
            p.theta = 1000000.0f;
            p.head_dim = head_dim;
            const int half = head_dim / 2;
            auto x = random_floats(rng, size_t(head_dim), -2, 2);
            const auto orig = x;
            std::vector<float> c(static_cast<size_t>(half)), s(static_cast<size_t>(half));
            for (int i = 0; i < half; ++i) {
                const double a = double(pos) * cc::km::rope_inv_freq(i, p);
                c[size_t(i)] = float(std::cos(a));
                s[size_t(i)] = float(std::sin(a));
            }
            cc::km::rope_rotate(x.data(), c.data(), s.data(), half);
            double err = 0, scale = 0;
            for (int i = 0; i < half; ++i) {
                const double a = double(pos) * cc::km::rope_inv_freq(i, p);
                const double x0 = orig[size_t(i)], x1 = orig[size_t(i + half)];
                const double r0 = x0 * std::cos(a) - x1 * std::sin(a), r1 = x1 * std::cos(a) + x0 * std::sin(a);
                err = std::max({err, std::abs(x[size_t(i)] - r0), std::abs(x[size_t(i + half)] - r1)});
                scale = std::max({scale, std::abs(x0), std::abs(x1)});
            }
            rows.push_back(bounded("math: rope vs float64", "head_dim=" + std::to_string(head_dim) + " pos=" + std::to_string(pos),
                                   err / scale, 8 * kEps));
        }
    }
}

// SiLU / SwiGLU over [-20, 20]: float exp (<= 1 ulp in glibc) and three more roundings.
void check_swiglu(std::vector<Row>& rows, bool quick) {
    std::mt19937_64 rng(3);
    const size_t n = quick ? 4096 : 1 << 16;
    const auto g = random_floats(rng, n, -20, 20);
    const auto u = random_floats(rng, n, -4, 4);
    double err = 0;
    for (size_t i = 0; i < n; ++i) {
        const double ref = double(g[i]) / (1.0 + std::exp(-double(g[i]))) * double(u[i]);
        const double got = cc::km::swiglu(g[i], u[i]);
        if (ref != 0) err = std::max(err, std::abs(got - ref) / std::abs(ref));
    }
    rows.push_back(bounded("math: swiglu vs float64", "n=" + std::to_string(n), err, 8 * kEps, "relative error"));
}

// Online softmax (the attention kernels' streaming update) vs a two-pass float64 softmax-weighted
// sum: each step rescales once and adds once, so the error grows with the sequence length.
void check_softmax(std::vector<Row>& rows, bool quick) {
    std::mt19937_64 rng(4);
    for (int n : quick ? std::vector<int>{1, 100} : std::vector<int>{1, 2, 100, 3000, 32768}) {
        const auto s = random_floats(rng, size_t(n), -30, 30);
        const auto v = random_floats(rng, size_t(n), -1, 1);
        cc::km::SoftmaxState st;
        float acc = 0;
        for (int i = 0; i < n; ++i) {
            float p = 0;
            const float rescale = cc::km::softmax_update(st, s[size_t(i)], &p);
            acc = acc * rescale + p * v[size_t(i)];
        }
        const float out = acc / st.l;
        double m = -INFINITY;
        for (float x : s) m = std::max(m, double(x));
        double l = 0, a = 0;
        for (int i = 0; i < n; ++i) {
            const double p = std::exp(double(s[size_t(i)]) - m);
            l += p;
            a += p * v[size_t(i)];
        }
        rows.push_back(bounded("math: online softmax vs float64", "n=" + std::to_string(n), std::abs(double(out) - a / l),
                               4.0 * (n + 4) * kEps, "absolute error, |v| <= 1"));
    }
}

void check_bf16(std::vector<Row>& rows) {
    size_t bad = 0;
    for (uint32_t h = 0; h < 65536; ++h) {
        const float f = cc::km::bf16_to_f32(uint16_t(h));
        if (std::isnan(f)) continue;
        if (cc::km::f32_to_bf16(f) != h) ++bad;
    }
    rows.push_back(Row{"math: bf16 -> f32 -> bf16", "all 65536 codes", double(bad), 0, bad == 0, bad ? "codes changed" : ""});
}

// ---- CPU instruction-set paths -----------------------------------------------------------------

// Per ISA: the last row's logits from a prefix block + suffix equal (==) a full prefill's; and the
// path's logits stay close to the scalar path's (they round in a different order, so not equal;
// bound: 1e-3 of the largest logit, far above float32 reordering and far below any real bug).
void check_isas(std::vector<Row>& rows, const std::string& spec, bool quick) {
    const auto weights = cc::load_model_weights(spec);
    const int vocab = weights.config.vocab_size;
    std::vector<cc::token_id> ids;
    const int n_prefix = quick ? 24 : 96, n_suffix = quick ? 5 : 17;
    for (int i = 0; i < n_prefix + n_suffix; ++i) ids.push_back(static_cast<cc::token_id>((i * 7919 + 13) % vocab));
    const std::string shape = "prefix=" + std::to_string(n_prefix) + " suffix=" + std::to_string(n_suffix);
    const std::span<const cc::token_id> all(ids);
    std::vector<float> scalar_logits;
    for (const auto isa : {cc::cpu::Isa::scalar, cc::cpu::Isa::avx2, cc::cpu::Isa::avx512}) {
        const std::string name = cc::cpu::isa_name(isa);
        if (!cc::cpu::isa_supported(isa)) {
            rows.push_back(Row{"cpu " + name + ": cached == full", shape, 0, 0, true, "not supported by this CPU: not run"});
            continue;
        }
        cc::CpuBackendOptions o;
        o.isa = name;
        const auto backend = cc::make_cpu_backend(weights, o);
        const int last_full = n_prefix + n_suffix - 1, last_suffix = n_suffix - 1;
        auto full_block = backend->allocate_kv(n_prefix + n_suffix);
        const auto full = backend->forward(all, cc::KvView{nullptr, 0, full_block.get()}, std::span<const int>(&last_full, 1));
        auto prefix = backend->allocate_kv(n_prefix);
        backend->forward(all.first(size_t(n_prefix)), cc::KvView{nullptr, 0, prefix.get()}, {});
        auto suffix = backend->allocate_kv(n_suffix);
        const auto cached = backend->forward(all.subspan(size_t(n_prefix)), cc::KvView{prefix.get(), n_prefix, suffix.get()},
                                             std::span<const int>(&last_suffix, 1));
        double diff = 0;
        for (size_t i = 0; i < full.size(); ++i) diff = std::max(diff, std::abs(double(full[i]) - double(cached[i])));
        const bool same = full.size() == cached.size() && std::memcmp(full.data(), cached.data(), full.size() * sizeof(float)) == 0;
        rows.push_back(Row{"cpu " + name + ": cached == full", shape, diff, 0, same, same ? "bit-identical" : "logits differ"});
        if (isa == cc::cpu::Isa::scalar) {
            scalar_logits = full;
            continue;
        }
        double err = 0, scale = 0;
        for (size_t i = 0; i < full.size(); ++i) {
            err = std::max(err, std::abs(double(full[i]) - double(scalar_logits[i])));
            scale = std::max(scale, std::abs(double(scalar_logits[i])));
        }
        rows.push_back(bounded("cpu " + name + " vs scalar: logits", shape, err, 1e-3 * std::max(1.0, scale), "absolute error"));
    }
}

// The engine end to end: compare mode (a full prefill, then the cached path) must be identical.
void check_engine(std::vector<Row>& rows, cc::EngineOptions options, bool quick) {
    options.backend = "cpu";
    options.cache.dir.clear();  // memory only: the self-test never touches the user's cache
    options.cache_dir.clear();
    cc::Engine engine(options);
    engine.load_model();
    const auto tools = cc::ToolSet::from_json_text(R"([
      {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "add", "description": "Adds two numbers.",
        "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}}])",
                                                   "selftest tools");
    engine.set_tools(tools, "You are a careful assistant.");
    cc::QueryOptions q;
    q.mode = cc::QueryMode::compare;
    q.max_new_tokens = quick ? 4 : 16;
    q.ignore_eos = true;
    const auto r = engine.query("What's the weather in Paris?", q);
    const bool same = r.identical && *r.identical;
    rows.push_back(Row{"model: cached == full", options.model_spec + " prefix=" + std::to_string(r.prefix_tokens) +
                                                    " suffix=" + std::to_string(r.suffix_tokens) +
                                                    " generated=" + std::to_string(r.generated_tokens),
                       r.max_abs_logit_diff, 0, same,
                       same ? "logits of every generated token bit-identical"
                            : "first difference at token " + std::to_string(r.first_difference.value_or(0))});
}

// ---- output -------------------------------------------------------------------------------------

std::string fmt(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", v);
    return buf;
}

int report(const std::string& backend, const std::string& device, const std::vector<Row>& rows, const std::string& note,
           bool json) {
    size_t failed = 0;
    for (const auto& r : rows) failed += r.pass ? 0 : 1;
    if (json) {
        ordered_json out{{"backend", backend}, {"device", device}, {"status", failed ? "fail" : "pass"},
                         {"passed", rows.size() - failed}, {"failed", failed}};
        if (!note.empty()) out["note"] = note;
        out["checks"] = ordered_json::array();
        for (const auto& r : rows)
            out["checks"].push_back(ordered_json{{"check", r.check}, {"shape", r.shape}, {"max_error", r.max_error},
                                                 {"bound", r.bound}, {"pass", r.pass}, {"note", r.note}});
        print_json(out);
    } else {
        std::cout << "selftest: backend " << backend << " (" << device << ")\n";
        if (!note.empty()) std::cout << note << "\n";
        size_t w_check = 5, w_shape = 5;
        for (const auto& r : rows) {
            w_check = std::max(w_check, r.check.size());
            w_shape = std::max(w_shape, r.shape.size());
        }
        auto pad = [](const std::string& s, size_t w) { return s + std::string(w > s.size() ? w - s.size() : 0, ' '); };
        std::cout << pad("check", w_check) << "  " << pad("shape", w_shape) << "  " << pad("max error", 10) << "  "
                  << pad("bound", 10) << "  result  note\n";
        for (const auto& r : rows)
            std::cout << pad(r.check, w_check) << "  " << pad(r.shape, w_shape) << "  " << pad(fmt(r.max_error), 10) << "  "
                      << pad(fmt(r.bound), 10) << "  " << (r.pass ? "PASS  " : "FAIL  ") << "  " << r.note << "\n";
        std::cout << (failed ? std::to_string(failed) + " of " + std::to_string(rows.size()) + " checks FAILED\n"
                             : "all " + std::to_string(rows.size()) + " checks passed\n");
    }
    return failed ? 1 : 0;
}

int skipped(const std::string& reason, bool json) {
    if (json) print_json(ordered_json{{"backend", "cuda"}, {"status", "skipped"}, {"reason", reason}, {"exit_code", kExitSkipped}});
    else std::cout << "skipped: " << reason << "\n";
    return kExitSkipped;
}

}  // namespace

int cmd_selftest(Args& args, const cc::EngineOptions& engine_options, bool json) {
    const bool quick = args.flag("quick");
    args.check_all_used();
    if (args.positional().size() > 1) throw UsageError("unexpected argument \"" + args.positional()[1] + "\"");
    cc::EngineOptions options = engine_options;
    // The self-test's default model is the small test model, not the demo one.
    if (!args.has("model")) options.model_spec = "builtin:qwen3-test";

    std::string backend = options.backend;
    std::string note;
    const auto probe = options.backends->probe_gpu();
    const cc::BackendEntry* gpu = options.backends->find("cuda");
    if (backend == "auto") {
        backend = probe.available ? "cuda" : "cpu";
        if (!probe.available) note = "CUDA not used (" + probe.message + "); running the CPU checks";
    }
    if (backend == "cuda") {
        if (!probe.compiled) return skipped("this build has no CUDA backend (configure with -DCONTEXTCACHE_CUDA=ON)", json);
        if (!probe.available) return skipped(probe.message, json);
        if (!gpu || !gpu->selftest) return skipped("the CUDA backend has no self-test", json);
        std::vector<Row> rows = gpu->selftest(quick, args.has("model") ? options.model_spec : "");
        if (rows.empty()) rows.push_back(Row{"cuda self-test", "", 0, 0, false, "the self-test returned no checks"});
        return report("cuda", probe.device_name, rows, note, json);
    }
    std::vector<Row> rows;
    check_bf16(rows);
    check_rmsnorm(rows, quick);
    check_rope(rows, quick);
    check_swiglu(rows, quick);
    check_softmax(rows, quick);
    check_isas(rows, options.model_spec, quick);
    check_engine(rows, options, quick);
    return report("cpu", cc::machine_info().cpu + ", best ISA " + cc::cpu::isa_name(cc::cpu::best_isa()), rows, note, json);
}

}  // namespace cli
