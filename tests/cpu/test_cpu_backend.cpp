// The CPU backend: conformance (stories260k greedy, float64 goldens of the tiny reference models)
// and the exactness contract: cached prefix + suffix gives the same bits as a full prefill, for
// every family, KV dtype, split point, batch split and thread count.
#include "core/base/kernel_math.h"
#include "core/cpu/cpu_backend.h"
#include "core/cpu/kernels.h"
#include "core/model/builtin_model.h"
#include "core/model/weights.h"
#include "tests/test_support.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <set>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

using namespace cc;
using json = nlohmann::json;

namespace {

ModelWeights load_model(const std::filesystem::path& dir) {
    const ModelConfig config = ModelConfig::from_json(json::parse(test::read_file(dir / "config.json")), (dir / "config.json").string());
    return load_weights(dir, config);
}

// ---- synthetic models with seeded random weights -------------------------------------------------

struct Synth {
    ModelWeights w;
    std::vector<std::shared_ptr<std::vector<std::byte>>> buffers;
};

Tensor make_tensor(Synth& s, std::vector<int64_t> shape, DType dt, std::mt19937& rng, float scale, float offset = 0.0f) {
    size_t n = 1;
    for (int64_t d : shape) n *= size_t(d);
    const size_t es = dt == DType::f32 ? 4 : 2;
    auto buf = std::make_shared<std::vector<std::byte>>(n * es);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (size_t i = 0; i < n; ++i) {
        const float v = offset + scale * nd(rng);
        if (dt == DType::f32) {
            std::memcpy(buf->data() + 4 * i, &v, 4);
        } else if (dt == DType::bf16) {
            const uint16_t h = km::f32_to_bf16(v);
            std::memcpy(buf->data() + 2 * i, &h, 2);
        } else {
            const uint16_t h = km::f32_to_f16(v);  // not _Float16: clang 14 has no such type on x86-64
            std::memcpy(buf->data() + 2 * i, &h, 2);
        }
    }
    s.w.storage.push_back(buf);
    Tensor t;
    t.dtype = dt;
    t.shape = std::move(shape);
    t.data = buf->data();
    t.n_bytes = buf->size();
    return t;
}

// qwen3: q/k-norm, head_dim 24 != dim / n_heads, tied; llama: llama3 rope scaling, untied;
// mistral: sliding window 9 (shorter than the test sequences), one kv head.
std::unique_ptr<Synth> make_synth(ModelFamily family, DType dt, uint32_t seed = 7) {
    auto s = std::make_unique<Synth>();
    ModelConfig& c = s->w.config;
    c.family = family;
    c.n_layers = 2;
    c.dim = 64;
    c.ffn_dim = 96;
    c.vocab_size = 97;
    c.max_position_embeddings = 512;
    c.rms_norm_eps = 1e-6;
    switch (family) {
        case ModelFamily::qwen3:
            c.model_type = "qwen3";
            c.n_heads = 4;
            c.n_kv_heads = 2;
            c.head_dim = 24;
            c.qk_norm = true;
            c.tie_word_embeddings = true;
            c.rope_theta = 1e6;
            break;
        case ModelFamily::llama:
            c.model_type = "llama";
            c.n_heads = 4;
            c.n_kv_heads = 2;
            c.head_dim = 16;
            c.rope_theta = 500000.0;
            c.rope_scaling = {"llama3", 8.0, 1.0, 4.0, 32};
            break;
        case ModelFamily::mistral:
            c.model_type = "mistral";
            c.n_heads = 4;
            c.n_kv_heads = 1;
            c.head_dim = 16;
            c.sliding_window = 9;
            break;
        case ModelFamily::qwen2:
            c.model_type = "qwen2";
            c.n_heads = 4;
            c.n_kv_heads = 2;
            c.head_dim = 16;
            c.qkv_bias = true;
            c.tie_word_embeddings = true;
            c.rope_theta = 1e6;
            break;
    }
    std::mt19937 rng(seed);
    const int64_t qd = int64_t(c.n_heads) * c.head_dim, kvd = int64_t(c.n_kv_heads) * c.head_dim;
    const float g = 1.0f / std::sqrt(float(c.dim));
    s->w.embed = make_tensor(*s, {c.vocab_size, c.dim}, dt, rng, 0.5f);
    for (int l = 0; l < c.n_layers; ++l) {
        LayerWeights L;
        L.attn_norm = make_tensor(*s, {c.dim}, dt, rng, 0.1f, 1.0f);
        L.wq = make_tensor(*s, {qd, c.dim}, dt, rng, 1.5f * g);
        L.wk = make_tensor(*s, {kvd, c.dim}, dt, rng, 1.5f * g);
        L.wv = make_tensor(*s, {kvd, c.dim}, dt, rng, g);
        L.wo = make_tensor(*s, {c.dim, qd}, dt, rng, 2.0f / std::sqrt(float(qd)));
        if (c.qkv_bias) {  // Qwen2's biases are large next to the projections: make them matter
            L.bq = make_tensor(*s, {qd}, dt, rng, 0.5f);
            L.bk = make_tensor(*s, {kvd}, dt, rng, 0.5f);
            L.bv = make_tensor(*s, {kvd}, dt, rng, 0.5f);
        }
        if (c.qk_norm) {
            L.q_norm = make_tensor(*s, {c.head_dim}, dt, rng, 0.3f, 1.0f);
            L.k_norm = make_tensor(*s, {c.head_dim}, dt, rng, 0.3f, 1.0f);
        }
        L.ffn_norm = make_tensor(*s, {c.dim}, dt, rng, 0.1f, 1.0f);
        L.w_gate = make_tensor(*s, {c.ffn_dim, c.dim}, dt, rng, g);
        L.w_up = make_tensor(*s, {c.ffn_dim, c.dim}, dt, rng, g);
        L.w_down = make_tensor(*s, {c.dim, c.ffn_dim}, dt, rng, 2.0f / std::sqrt(float(c.ffn_dim)));
        s->w.layers.push_back(L);
    }
    s->w.final_norm = make_tensor(*s, {c.dim}, dt, rng, 0.1f, 1.0f);
    s->w.lm_head = c.tie_word_embeddings ? s->w.embed : make_tensor(*s, {c.vocab_size, c.dim}, dt, rng, 3.0f * g);
    return s;
}

std::vector<token_id> random_tokens(int n, int vocab, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<token_id> t(static_cast<size_t>(n));
    for (auto& x : t) x = token_id(rng() % uint32_t(vocab));
    return t;
}

std::vector<int> iota_rows(int n) {
    std::vector<int> r(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) r[size_t(i)] = i;
    return r;
}

int argmax(const float* x, int n) { return int(std::max_element(x, x + n) - x); }

bool same_bits(const std::vector<float>& a, const float* b, size_t n) {
    return a.size() >= n && std::memcmp(a.data(), b, n * sizeof(float)) == 0;
}

std::vector<cpu::Isa> isas() {
    std::vector<cpu::Isa> out;
    for (cpu::Isa i : {cpu::Isa::scalar, cpu::Isa::avx2, cpu::Isa::avx512})
        if (cpu::isa_supported(i)) out.push_back(i);
    return out;
}

CpuBackendOptions opts(cpu::Isa isa, int threads = 0, KvDType kv = KvDType::f32, WeightDType weights = WeightDType::stored) {
    CpuBackendOptions o;
    o.isa = cpu::isa_name(isa);
    o.n_threads = threads;
    o.kv_dtype = kv;
    o.weights = weights;
    return o;
}

const char* family_str(ModelFamily f) {
    return family_name(f);
}

}  // namespace

// ---- conformance -----------------------------------------------------------------------------------

TEST(cpu_backend, stories260k_greedy_64_tokens_match_reference) {
    CC_REQUIRE_FIXTURE("stories260k");
    const auto dir = test::fixture("stories260k");
    const json ref = json::parse(test::read_file(dir / "reference.json"));
    const json& cs = ref.at("cases").at(0);
    const auto input = cs.at("input_ids").get<std::vector<token_id>>();
    const auto expect = cs.at("generated_ids").get<std::vector<token_id>>();
    ASSERT_EQ(input, (std::vector<token_id>{1, 403, 407, 261, 378}));
    ModelWeights w = load_model(dir);
    for (cpu::Isa isa : isas())
        for (KvDType kv : {KvDType::f32, KvDType::bf16}) {
            auto be = make_cpu_backend(w, opts(isa, 0, kv));
            const int V = be->config().vocab_size;
            auto block = be->allocate_kv(128);
            const int last = int(input.size()) - 1;
            std::vector<float> logits = be->forward(input, {nullptr, 0, block.get()}, std::vector<int>{last});
            ASSERT_EQ(logits.size(), size_t(V));
            if (kv == KvDType::f32) {
                for (const json& t : cs.at("top5_first_logits"))
                    EXPECT_NEAR(logits[t.at("id").get<size_t>()], t.at("logit").get<double>(), 1e-3)
                        << cpu::isa_name(isa) << " id " << t.at("id");
                std::vector<int> order(static_cast<size_t>(V));
                for (int i = 0; i < V; ++i) order[size_t(i)] = i;
                std::partial_sort(order.begin(), order.begin() + 5, order.end(),
                                  [&](int a, int b) { return logits[size_t(a)] > logits[size_t(b)]; });
                for (int i = 0; i < 5; ++i) EXPECT_EQ(order[size_t(i)], cs.at("top5_first_logits")[size_t(i)].at("id").get<int>());
            }
            std::vector<token_id> got;
            for (int step = 0; step < 64; ++step) {
                const token_id next = argmax(logits.data(), V);
                got.push_back(next);
                const token_id one[1] = {next};
                logits = be->forward(one, {nullptr, 0, block.get()}, std::vector<int>{0});
            }
            if (kv == KvDType::f32) {
                EXPECT_EQ(got, expect) << cpu::isa_name(isa);
            } else {
                // bf16 KV rounds K/V; greedy should still follow the reference for a good while.
                int same = 0;
                while (same < 64 && got[size_t(same)] == expect[size_t(same)]) ++same;
                EXPECT_GE(same, 16) << cpu::isa_name(isa) << " bf16 KV";
            }
        }
}

TEST(cpu_backend, reference_models_match_float64_goldens) {
    const auto root = test::data_dir() / "reference_models";
    if (!std::filesystem::exists(root / "goldens.json")) GTEST_SKIP() << "no reference models";
    const json goldens = json::parse(test::read_file(root / "goldens.json"));
    for (const auto& item : goldens.at("models").items()) {
        // Not a structured binding: the lambda below captures the name, which clang 14 refuses.
        const std::string name = item.key();
        const json& m = item.value();
        ModelWeights w = load_model(root / m.at("dir").get<std::string>());
        for (cpu::Isa isa : isas()) {
            auto be = make_cpu_backend(w, opts(isa, 2));
            const int V = be->config().vocab_size;
            double worst = 0;
            for (const json& cs : m.at("cases")) {
                const auto ids = cs.at("prompt_ids").get<std::vector<token_id>>();
                const int T = int(ids.size());
                auto block = be->allocate_kv(T + 16);
                std::vector<int> rows;
                for (const json& r : cs.at("logits_rows")) rows.push_back(r.at("position"));
                rows.push_back(T - 1);
                std::vector<float> logits = be->forward(ids, {nullptr, 0, block.get()}, rows);
                auto check = [&](const json& golden, size_t row, const std::string& what) {
                    for (int i = 0; i < V; ++i) {
                        const double g = golden[size_t(i)].get<double>();
                        const double d = std::abs(double(logits[row * size_t(V) + size_t(i)]) - g);
                        worst = std::max(worst, d / std::max(1.0, std::abs(g)));
                        ASSERT_LE(d, 2e-4 * std::max(1.0, std::abs(g)))
                            << name << " " << cpu::isa_name(isa) << " " << what << " vocab " << i;
                    }
                };
                for (size_t r = 0; r < cs.at("logits_rows").size(); ++r)
                    check(cs["logits_rows"][r].at("logits"), r, "row at position " + std::to_string(rows[r]));
                check(cs.at("logits_last"), rows.size() - 1, "last row");
                // greedy, decoding one token at a time against the KV cache
                std::vector<float> last(logits.end() - V, logits.end());
                std::vector<token_id> got;
                for (int step = 0; step < 16; ++step) {
                    got.push_back(argmax(last.data(), V));
                    if (step == 15) break;
                    const token_id one[1] = {got.back()};
                    last = be->forward(one, {nullptr, 0, block.get()}, std::vector<int>{0});
                }
                EXPECT_EQ(got, cs.at("greedy_ids").get<std::vector<token_id>>()) << name << " " << cpu::isa_name(isa);
            }
            RecordProperty(name + "_" + cpu::isa_name(isa) + "_max_rel_err", std::to_string(worst));
        }
    }
}

// ---- exactness -------------------------------------------------------------------------------------

// Full prefill vs compiled prefix + suffix (one call, and token by token), bit for bit, in one
// family, storage dtype, KV dtype and in-memory weight format, at 1, 2 and 3 threads.
namespace {
void expect_cached_equals_full(ModelFamily fam, DType dt, KvDType kv, WeightDType wd) {
    const int n = 53;
    auto s = make_synth(fam, dt);
    const auto tokens = random_tokens(n, s->w.config.vocab_size, 11);
    const int V = s->w.config.vocab_size;
    std::vector<float> full;
    {
        auto be = make_cpu_backend(s->w, opts(cpu::best_isa(), 1, kv, wd));
        auto block = be->allocate_kv(n);
        full = be->forward(tokens, {nullptr, 0, block.get()}, iota_rows(n));
        ASSERT_EQ(full.size(), size_t(n) * V);
    }
    for (int threads : {1, 2, 3}) {
        auto be = make_cpu_backend(s->w, opts(cpu::best_isa(), threads, kv, wd));
        const std::string ctx = std::string(family_str(fam)) + " weights " + std::to_string(int(dt)) + " as " +
                                weight_dtype_name(wd) + " kv " + kv_dtype_name(kv) + " threads " + std::to_string(threads);
        {  // full prefill again: thread count does not matter
            auto block = be->allocate_kv(n);
            auto again = be->forward(tokens, {nullptr, 0, block.get()}, iota_rows(n));
            ASSERT_TRUE(same_bits(again, full.data(), full.size())) << ctx;
        }
        for (int split : {1, 7, 16, 23, 40, n - 1}) {
            auto prefix = be->allocate_kv(split);
            const std::span<const token_id> all(tokens);
            auto none = be->forward(all.first(size_t(split)), {nullptr, 0, prefix.get()}, {});
            EXPECT_TRUE(none.empty());
            ASSERT_EQ(prefix->n_tokens(), split);
            // suffix in one call
            auto suffix = be->allocate_kv(n - split);
            auto got = be->forward(all.subspan(size_t(split)), {prefix.get(), split, suffix.get()}, iota_rows(n - split));
            ASSERT_TRUE(same_bits(got, full.data() + size_t(split) * V, size_t(n - split) * V)) << ctx << " split " << split;
            // suffix token by token, reusing the same prefix block
            auto suffix2 = be->allocate_kv(n - split);
            for (int t = split; t < n; ++t) {
                auto one = be->forward(all.subspan(size_t(t), 1), {prefix.get(), split, suffix2.get()}, std::vector<int>{0});
                ASSERT_TRUE(same_bits(one, full.data() + size_t(t) * V, size_t(V))) << ctx << " split " << split << " token " << t;
            }
            // a shorter view of a longer prefix block (prefix reuse of the first tokens)
            if (split > 3) {
                auto suffix3 = be->allocate_kv(n);
                auto part = be->forward(all.subspan(size_t(split - 3)), {prefix.get(), split - 3, suffix3.get()},
                                        iota_rows(n - split + 3));
                ASSERT_TRUE(same_bits(part, full.data() + size_t(split - 3) * V, size_t(n - split + 3) * V))
                    << ctx << " shorter view " << split - 3;
            }
        }
    }
}
}  // namespace

TEST(cpu_backend, cached_prefix_plus_suffix_is_bit_identical_to_full_prefill) {
    for (ModelFamily fam : {ModelFamily::qwen3, ModelFamily::llama, ModelFamily::mistral, ModelFamily::qwen2})
        for (DType dt : {DType::f32, DType::bf16, DType::f16})
            for (KvDType kv : {KvDType::f32, KvDType::bf16})
                for (WeightDType wd : {WeightDType::stored, WeightDType::bf16, WeightDType::q8}) {
                    if (wd == WeightDType::bf16 && dt == DType::bf16) continue;  // the same as stored
                    expect_cached_equals_full(fam, dt, kv, wd);
                    if (HasFatalFailure()) return;
                }
}

// The bf16dot format (BF16 activations, VDPBF16PS) keeps the contract: its own kernels in both paths.
TEST(cpu_backend, bf16dot_cached_prefix_plus_suffix_is_bit_identical_to_full_prefill) {
    if (!cpu::bf16dot::supported()) GTEST_SKIP() << "this CPU has no AVX-512 BF16 (vdpbf16ps): the bf16dot format cannot run here";
    for (ModelFamily fam : {ModelFamily::qwen3, ModelFamily::llama, ModelFamily::qwen2})
        for (DType dt : {DType::f32, DType::bf16})
            for (KvDType kv : {KvDType::f32, KvDType::bf16}) {
                expect_cached_equals_full(fam, dt, kv, WeightDType::bf16dot);
                if (HasFatalFailure()) return;
            }
}

// A converting weight format is another model: its own numerics id (so a cache made with it never
// links with another), logits close to the stored weights' (q8: per-block int8; bf16: rounding),
// and F16 weights widened to F32 are the stored format itself.
namespace {
double cosine(const std::vector<float>& a, const std::vector<float>& b) {
    double dot = 0, na = 0, nb = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        dot += double(a[i]) * b[i];
        na += double(a[i]) * a[i];
        nb += double(b[i]) * b[i];
    }
    return dot / std::sqrt(na * nb);
}
}  // namespace

TEST(cpu_backend, weight_formats_have_their_own_numerics_id_and_stay_close) {
    auto s = make_synth(ModelFamily::qwen3, DType::f32);
    const int n = 40, V = s->w.config.vocab_size;
    const auto tokens = random_tokens(n, V, 3);
    std::vector<std::string> ids;
    std::vector<float> stored;
    std::vector<WeightDType> formats{WeightDType::stored, WeightDType::f32, WeightDType::bf16, WeightDType::q8};
    if (cpu::bf16dot::supported()) formats.push_back(WeightDType::bf16dot);
    else EXPECT_THROW(make_cpu_backend(s->w, opts(cpu::best_isa(), 2, KvDType::f32, WeightDType::bf16dot)), std::runtime_error);
    for (WeightDType wd : formats) {
        auto be = make_cpu_backend(s->w, opts(cpu::best_isa(), 2, KvDType::f32, wd));
        ids.push_back(be->numerics_id());
        EXPECT_EQ(be->numerics_id(), cpu_numerics_id(opts(cpu::best_isa(), 2, KvDType::f32, wd)));
        auto block = be->allocate_kv(n);
        const auto logits = be->forward(tokens, {nullptr, 0, block.get()}, iota_rows(n));
        if (wd == WeightDType::stored) {
            stored = logits;
            continue;
        }
        if (wd == WeightDType::f32) {  // F32 weights stored as F32: the same bits
            EXPECT_TRUE(same_bits(logits, stored.data(), stored.size()));
            continue;
        }
        EXPECT_FALSE(same_bits(logits, stored.data(), stored.size())) << weight_dtype_name(wd) << " changed nothing";
        EXPECT_GT(cosine(logits, stored), 0.999) << weight_dtype_name(wd);
    }
    if (cpu::bf16dot::supported()) {  // with BF16 KV, bf16dot's attention runs in BF16 dot products too
        const auto logits_with = [&](WeightDType wd, std::string& id) {
            auto be = make_cpu_backend(s->w, opts(cpu::best_isa(), 2, KvDType::bf16, wd));
            id = be->numerics_id();
            auto block = be->allocate_kv(n);
            return be->forward(tokens, {nullptr, 0, block.get()}, iota_rows(n));
        };
        std::string ref_id, dot_id;
        const auto ref = logits_with(WeightDType::stored, ref_id), dot = logits_with(WeightDType::bf16dot, dot_id);
        EXPECT_TRUE(bf16_attention(opts(cpu::best_isa(), 2, KvDType::bf16, WeightDType::bf16dot)));
        EXPECT_FALSE(bf16_attention(opts(cpu::best_isa(), 2, KvDType::f32, WeightDType::bf16dot)));
        EXPECT_EQ(dot_id, ref_id + "/weights=bf16dot-" + cpu::bf16dot::cpu_vendor() + "/attention=bf16dot");
        EXPECT_GT(cosine(dot, ref), 0.999);
    }
    EXPECT_EQ(ids[0], std::string("cpu/") + cpu::isa_name(cpu::best_isa()) + "/f32");
    EXPECT_EQ(ids[3], ids[0] + "/weights=q8");
    if (ids.size() > 4) {
        EXPECT_EQ(ids[4], ids[0] + "/weights=bf16dot-" + cpu::bf16dot::cpu_vendor());
    }
    EXPECT_EQ(parse_weight_dtype("bf16dot"), WeightDType::bf16dot);
    EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), ids.size());
    EXPECT_EQ(parse_weight_dtype("auto"), WeightDType::stored);
    EXPECT_THROW(parse_weight_dtype("q4"), std::invalid_argument);
}

// Each available ISA path is deterministic across threads and batch splits on a longer sequence
// (several key tiles), and different paths agree to within float32 rounding.
TEST(cpu_backend, every_isa_is_exact_and_agrees_with_the_others) {
    auto s = make_synth(ModelFamily::qwen3, DType::bf16, 3);
    const int n = 150, V = s->w.config.vocab_size;
    const auto tokens = random_tokens(n, V, 5);
    std::vector<float> first;
    for (cpu::Isa isa : isas()) {
        std::vector<float> full;
        for (int threads : {1, 3}) {
            auto be = make_cpu_backend(s->w, opts(isa, threads));
            EXPECT_EQ(be->numerics_id(), std::string("cpu/") + cpu::isa_name(isa) + "/f32");
            auto block = be->allocate_kv(n);
            auto all = be->forward(tokens, {nullptr, 0, block.get()}, iota_rows(n));
            if (full.empty()) full = all;
            ASSERT_TRUE(same_bits(all, full.data(), full.size())) << cpu::isa_name(isa) << " threads " << threads;
            // 97 prefix tokens, then the rest in uneven pieces
            auto prefix = be->allocate_kv(97);
            const std::span<const token_id> sp(tokens);
            be->forward(sp.first(97), {nullptr, 0, prefix.get()}, {});
            auto suffix = be->allocate_kv(n - 97);
            int t = 97;
            for (int piece : {5, 1, 30, 17}) {
                auto got = be->forward(sp.subspan(size_t(t), size_t(piece)), {prefix.get(), 97, suffix.get()}, iota_rows(piece));
                ASSERT_TRUE(same_bits(got, full.data() + size_t(t) * V, size_t(piece) * V)) << cpu::isa_name(isa) << " at " << t;
                t += piece;
            }
            ASSERT_EQ(t, n);
        }
        if (first.empty()) {
            first = full;
        } else {
            for (size_t i = 0; i < full.size(); ++i)
                ASSERT_NEAR(full[i], first[i], 1e-3 * std::max(1.0f, std::abs(first[i]))) << cpu::isa_name(isa) << " at " << i;
        }
    }
}

namespace {
// Whole pages inside [data, data + n) that are resident, and how many whole pages there are.
std::pair<size_t, size_t> resident_whole_pages(const std::byte* data, size_t n) {
    const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + n) / page * page;
    if (end <= begin) return {0, 0};
    std::vector<unsigned char> in((end - begin) / page);
    if (::mincore(reinterpret_cast<void*>(begin), end - begin, in.data()) != 0) return {SIZE_MAX, in.size()};
    return {size_t(std::count_if(in.begin(), in.end(), [](unsigned char c) { return (c & 1) != 0; })), in.size()};
}
}  // namespace

// A built-in model's generated weights are not held twice: once the engine gives them up
// (mark_matrices_disposable), the CPU backend gives back the pages of every matrix it has packed,
// and computes exactly what it computes over weights it leaves alone.
TEST(cpu_backend, generated_matrices_given_up_are_discarded_after_packing_and_change_no_bit) {
    // make_synth's llama shape (an lm_head of its own, discarded too), widened so that every
    // matrix spans whole pages.
    ModelConfig c = make_synth(ModelFamily::llama, DType::f32)->w.config;
    ASSERT_FALSE(c.tie_word_embeddings);
    c.dim = 128;
    c.ffn_dim = 384;
    c.head_dim = 32;
    c.vocab_size = 600;
    const int n = 40;
    const auto tokens = random_tokens(n, c.vocab_size, 5);
    const int V = c.vocab_size;

    ModelWeights kept = generate_synthetic_weights(c, 77, DType::bf16);
    ASSERT_TRUE(kept.generated);
    std::vector<float> reference;
    {
        auto be = make_cpu_backend(kept, opts(cpu::best_isa(), 2, KvDType::f32, WeightDType::stored));
        auto block = be->allocate_kv(n);
        reference = be->forward(tokens, {nullptr, 0, block.get()}, iota_rows(n));
    }
    // Weights the backend leaves alone stay resident.
    EXPECT_EQ(resident_whole_pages(kept.layers[0].w_up.data, kept.layers[0].w_up.n_bytes).first,
              resident_whole_pages(kept.layers[0].w_up.data, kept.layers[0].w_up.n_bytes).second);

    ModelWeights given = generate_synthetic_weights(c, 77, DType::bf16);
    mark_matrices_disposable(given);
    auto be = make_cpu_backend(given, opts(cpu::best_isa(), 2, KvDType::f32, WeightDType::stored));
    std::vector<const Tensor*> matrices{&given.lm_head};
    for (const LayerWeights& l : given.layers)
        for (const Tensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) matrices.push_back(t);
    size_t whole_pages = 0;
    for (const Tensor* t : matrices) {
        EXPECT_TRUE(t->disposable);
        const auto [resident, pages] = resident_whole_pages(t->data, t->n_bytes);
        EXPECT_EQ(resident, 0u) << "of " << pages << " whole pages of a matrix the backend packed";
        whole_pages += pages;
    }
    EXPECT_GT(whole_pages, 20u);  // the check saw real pages
    // An untied embedding is read per token from the tensor: marked, but kept; norms never marked.
    EXPECT_TRUE(given.embed.disposable);
    EXPECT_FALSE(given.layers[0].attn_norm.disposable);
    const auto [embed_resident, embed_pages] = resident_whole_pages(given.embed.data, given.embed.n_bytes);
    EXPECT_EQ(embed_resident, embed_pages);
    auto block = be->allocate_kv(n);
    const auto got = be->forward(tokens, {nullptr, 0, block.get()}, iota_rows(n));
    ASSERT_EQ(got.size(), size_t(n) * V);
    EXPECT_TRUE(same_bits(got, reference.data(), reference.size()));

    // Weights that are not generated (a checkpoint's, the tests' own) are never marked.
    auto s = make_synth(ModelFamily::llama, DType::bf16);
    mark_matrices_disposable(s->w);
    EXPECT_FALSE(s->w.layers[0].wq.disposable);
    EXPECT_FALSE(s->w.lm_head.disposable);
}

// A tied embedding is read from the packed lm_head where the panels hold its values exactly (F32
// panels; BF16 and bf16dot panels of BF16 weights), and from the tensor otherwise: the logits are
// the bits of an untied twin (the same values, the lm_head a copy of its own, so the embedding
// is always read from the tensor), for every source dtype and weight format; rows in every panel,
// the partial last one included (vocab 97).
TEST(cpu_backend, a_tied_embedding_read_from_the_packed_lm_head_gives_the_bits_of_the_tensor) {
    std::vector<WeightDType> formats{WeightDType::stored, WeightDType::f32, WeightDType::bf16, WeightDType::q8};
    if (cpu::bf16dot::supported()) formats.push_back(WeightDType::bf16dot);
    const int n = 33;
    for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
        for (WeightDType wd : formats) {
            SCOPED_TRACE(std::string(dtype_name(dt)) + " weights packed as " + weight_dtype_name(wd));
            auto tied = make_synth(ModelFamily::qwen3, dt, 13);
            ASSERT_TRUE(tied->w.config.tie_word_embeddings);
            auto twin = make_synth(ModelFamily::qwen3, dt, 13);
            const Tensor& e = twin->w.embed;
            auto copy = std::make_shared<std::vector<std::byte>>(e.data, e.data + e.n_bytes);
            twin->w.storage.push_back(copy);
            twin->w.lm_head = e;
            twin->w.lm_head.data = copy->data();
            twin->w.config.tie_word_embeddings = false;
            const int V = tied->w.config.vocab_size;
            std::vector<token_id> tokens(static_cast<size_t>(n));
            for (int i = 0; i < n; ++i) tokens[size_t(i)] = token_id((i * 31 + 5) % V);  // 33 of the 97 rows
            tokens.back() = token_id(V - 1);                                             // the last panel's last row
            std::vector<std::vector<float>> logits;
            for (const ModelWeights* w : {&tied->w, &twin->w}) {
                auto be = make_cpu_backend(*w, opts(cpu::best_isa(), 2, KvDType::f32, wd));
                auto block = be->allocate_kv(n);
                logits.push_back(be->forward(tokens, {nullptr, 0, block.get()}, iota_rows(n)));
            }
            ASSERT_EQ(logits[0].size(), size_t(n) * V);
            EXPECT_TRUE(same_bits(logits[0], logits[1].data(), logits[1].size()));
        }
    }
}

// Generated tied weights (a built-in model's): the CPU backend reads the embedding from its
// packed lm_head and gives the embedding's pages back (the model is held once, not with its
// largest matrix twice); the logits are the bits of a backend over weights it did not discard.
// Where the panels do not hold the values (q8), the embedding stays resident and is read.
TEST(cpu_backend, a_generated_tied_embedding_is_given_back_once_packed_as_the_lm_head) {
    ModelConfig c = make_synth(ModelFamily::qwen3, DType::f32)->w.config;
    c.dim = 128;
    c.ffn_dim = 256;
    c.vocab_size = 1000;  // 1000 x 128 BF16 = 62 whole pages
    const int n = 24;
    const auto tokens = random_tokens(n, c.vocab_size, 21);
    for (DType dt : {DType::bf16, DType::f32}) {
        for (WeightDType wd : {WeightDType::stored, WeightDType::q8}) {
            SCOPED_TRACE(std::string(dtype_name(dt)) + " weights packed as " + weight_dtype_name(wd));
            ModelWeights kept = generate_synthetic_weights(c, 91, dt);
            ASSERT_TRUE(kept.generated);
            ASSERT_EQ(kept.lm_head.data, kept.embed.data);  // tied
            std::vector<float> reference;
            {
                auto be = make_cpu_backend(kept, opts(cpu::best_isa(), 2, KvDType::f32, wd));
                auto block = be->allocate_kv(n);
                reference = be->forward(tokens, {nullptr, 0, block.get()}, iota_rows(n));
            }
            ModelWeights given = generate_synthetic_weights(c, 91, dt);
            mark_matrices_disposable(given);
            EXPECT_TRUE(given.embed.disposable);
            auto be = make_cpu_backend(given, opts(cpu::best_isa(), 2, KvDType::f32, wd));
            const auto [resident, pages] = resident_whole_pages(given.embed.data, given.embed.n_bytes);
            EXPECT_GT(pages, 30u);
            if (wd == WeightDType::q8)
                EXPECT_EQ(resident, pages) << "q8 panels do not hold the embedding: it is read";
            else
                EXPECT_EQ(resident, 0u) << "of " << pages
                                        << " whole pages of the embedding read from the lm_head's panels";
            auto block = be->allocate_kv(n);
            const auto got = be->forward(tokens, {nullptr, 0, block.get()}, iota_rows(n));
            EXPECT_TRUE(same_bits(got, reference.data(), reference.size()));
        }
    }
}

TEST(cpu_backend, export_import_round_trip_gives_the_same_logits) {
    for (KvDType kv : {KvDType::f32, KvDType::bf16}) {
        auto s = make_synth(ModelFamily::llama, DType::f32);
        auto be = make_cpu_backend(s->w, opts(cpu::best_isa(), 2, kv));
        const int n = 40, split = 27, V = s->w.config.vocab_size;
        const auto tokens = random_tokens(n, V, 9);
        const std::span<const token_id> sp(tokens);
        auto prefix = be->allocate_kv(split);
        be->forward(sp.first(split), {nullptr, 0, prefix.get()}, {});
        std::vector<std::byte> bytes(be->kv_bytes(split));
        EXPECT_EQ(bytes.size(), size_t(2) * 2 * 2 * split * 16 * (kv == KvDType::f32 ? 4 : 2));
        be->export_kv(*prefix, split, bytes);
        auto imported = be->import_kv(bytes, split, split + 5, split);
        EXPECT_EQ(imported->n_tokens(), split);
        EXPECT_EQ(imported->capacity_tokens(), split + 5);
        std::vector<std::byte> again(bytes.size());
        be->export_kv(*imported, split, again);
        EXPECT_EQ(again, bytes);
        auto s1 = be->allocate_kv(n - split), s2 = be->allocate_kv(n - split);
        auto a = be->forward(sp.subspan(split), {prefix.get(), split, s1.get()}, iota_rows(n - split));
        auto b = be->forward(sp.subspan(split), {imported.get(), split, s2.get()}, iota_rows(n - split));
        ASSERT_TRUE(same_bits(a, b.data(), b.size()));
        // canonical layout: layer 0 K, kv head 0, position 0 is the first row
        EXPECT_THROW(be->import_kv(std::span<const std::byte>(bytes).first(bytes.size() - 1), split, split, split),
                     std::runtime_error);
        EXPECT_THROW(be->import_kv(bytes, split, n, split - 1), std::runtime_error);  // reserve below n_tokens
        EXPECT_THROW(be->import_kv(bytes, split, n, n + 1), std::runtime_error);      // reserve past the capacity
        EXPECT_THROW(be->export_kv(*prefix, split + 1, bytes), std::runtime_error);
    }
}

// A conversation turn copies the stored state of the earlier turns and prefills the new part into
// the same block (Engine::run_chat): import_kv and copy_kv reserve the whole prompt at once, so
// the copied positions are not copied again when the new part is longer than a block's first
// room, and the block goes on exactly as a full prefill.
TEST(cpu_backend, import_and_copy_reserve_the_positions_that_follow) {
    const int n = 300, split = 100;  // the new part is longer than the room import gives by itself
    auto s = make_synth(ModelFamily::qwen3, DType::bf16);
    const int V = s->w.config.vocab_size;
    const auto tokens = random_tokens(n, V, 23);
    const std::span<const token_id> sp(tokens);
    for (KvDType kv : {KvDType::f32, KvDType::bf16}) {
        auto be = make_cpu_backend(s->w, opts(cpu::best_isa(), 2, kv));
        auto whole = be->allocate_kv(n);
        const auto full = be->forward(sp, {nullptr, 0, whole.get()}, iota_rows(n));
        std::vector<std::byte> bytes(be->kv_bytes(split));
        be->export_kv(*whole, split, bytes);
        EXPECT_THROW(be->import_kv(bytes, split, n, split - 1), std::runtime_error);  // below n_tokens
        EXPECT_THROW(be->import_kv(bytes, split, n, n + 1), std::runtime_error);      // past the capacity
        auto block = be->import_kv(bytes, split, n, n);
        const int held = block->storage_tokens();
        EXPECT_GE(held, n) << kv_dtype_name(kv);
        const auto rest = be->forward(sp.subspan(split), {nullptr, 0, block.get()}, iota_rows(n - split));
        EXPECT_EQ(block->storage_tokens(), held) << kv_dtype_name(kv) << ": no growth within what was reserved";
        EXPECT_TRUE(same_bits(rest, full.data() + size_t(split) * V, size_t(n - split) * V)) << kv_dtype_name(kv);
        auto unreserved = be->import_kv(bytes, split, n, split);  // grows on the way, the same bits
        EXPECT_LT(unreserved->storage_tokens(), n) << kv_dtype_name(kv);
        EXPECT_TRUE(same_bits(be->forward(sp.subspan(split), {nullptr, 0, unreserved.get()}, iota_rows(n - split)),
                              full.data() + size_t(split) * V, size_t(n - split) * V))
            << kv_dtype_name(kv);

        // copy_kv, block to block (what the engine does now): from an owned block (its own copy),
        // from part of one, and from a linked image (the default route), each reserved and going on
        // exactly as the full prefill
        auto linked = be->link_kv(bytes, split, nullptr);
        for (const KvBlock* src : {static_cast<const KvBlock*>(whole.get()), static_cast<const KvBlock*>(linked.get())})
            for (int from : {split, split - 5}) {
                const std::string ctx = std::string(kv_dtype_name(kv)) + (src == whole.get() ? " owned" : " linked") +
                                        " from " + std::to_string(from);
                auto copy = be->copy_kv(*src, from, n, n);
                EXPECT_EQ(copy->n_tokens(), from) << ctx;
                EXPECT_EQ(copy->capacity_tokens(), n) << ctx;
                const int copy_held = copy->storage_tokens();
                EXPECT_GE(copy_held, n) << ctx;
                std::vector<std::byte> got(be->kv_bytes(from)), want(be->kv_bytes(from));
                be->export_kv(*copy, from, got);
                be->export_kv(*whole, from, want);
                EXPECT_EQ(got, want) << ctx;
                const auto more = be->forward(sp.subspan(size_t(from)), {nullptr, 0, copy.get()}, iota_rows(n - from));
                EXPECT_EQ(copy->storage_tokens(), copy_held) << ctx << ": no growth within what was reserved";
                EXPECT_TRUE(same_bits(more, full.data() + size_t(from) * V, size_t(n - from) * V)) << ctx;
            }
        EXPECT_THROW(be->copy_kv(*whole, n + 1, n + 1, n + 1), std::runtime_error);  // more than the source holds
        EXPECT_THROW(be->copy_kv(*whole, split, n, split - 1), std::runtime_error);  // reserve below n_tokens
        EXPECT_THROW(be->copy_kv(*whole, split, n, n + 1), std::runtime_error);      // reserve past the capacity
    }
}

// One forward_batch step of two sequences over `prefix` (its first `split` positions): the next
// token alone into s1, and the rest of `all` into s2; each sequence's logits == the full prefill's
// rows at those positions (`full`: every row of `all`, V logits each).
void expect_two_sequence_step(Backend& be, std::span<const token_id> all, KvBlock& prefix, int split, KvBlock& s1,
                              KvBlock& s2, const std::vector<float>& full, int V, const std::string& ctx) {
    const int n1 = 1, n2 = int(all.size()) - split;
    std::vector<float> got1(size_t(n1) * V), got2(size_t(n2) * V);
    const std::vector<int> rows1 = iota_rows(n1), rows2 = iota_rows(n2);
    const std::vector<SequenceRows> step{
        SequenceRows{all.subspan(size_t(split), size_t(n1)), KvView{&prefix, split, &s1}, rows1, got1},
        SequenceRows{all.subspan(size_t(split)), KvView{&prefix, split, &s2}, rows2, got2}};
    be.forward_batch(step);
    EXPECT_TRUE(same_bits(got1, full.data() + size_t(split) * V, size_t(n1) * V)) << ctx << ": batched sequence 1";
    EXPECT_TRUE(same_bits(got2, full.data() + size_t(split) * V, size_t(n2) * V)) << ctx << ": batched sequence 2";
}

// KV storage is not zeroed when a block is allocated (a recycled buffer keeps what the last block
// wrote; cpu_backend.cpp, KvRecycler): the unwritten positions past a block's end, which attention
// reads as the rest of a key tile, must never reach a logit. Blocks whose every position holds NaN
// (an image of NaN imported, then truncated to nothing) give the bits of ordinary blocks for a full
// prefill, prefix + suffix, token-by-token decode and a forward_batch step over a shared prefix.
TEST(cpu_backend, stale_kv_storage_never_reaches_the_logits) {
    const int n = 45, split = 21, cap = 64;
    for (ModelFamily fam : {ModelFamily::qwen3, ModelFamily::mistral}) {
        auto s = make_synth(fam, DType::bf16);
        const int V = s->w.config.vocab_size;
        const auto tokens = random_tokens(n, V, 13);
        const std::span<const token_id> all(tokens);
        for (cpu::Isa isa : isas())
            for (KvDType kv : {KvDType::f32, KvDType::bf16})
                for (WeightDType wd : {WeightDType::stored, WeightDType::bf16dot}) {
                    if (wd == WeightDType::bf16dot && (isa != cpu::best_isa() || !cpu::bf16dot::supported())) continue;
                    const std::string ctx = std::string(cpu::isa_name(isa)) + " " + family_str(fam) + " kv " +
                                            kv_dtype_name(kv) + " " + weight_dtype_name(wd);
                    auto be = make_cpu_backend(s->w, opts(isa, 2, kv, wd));
                    const std::vector<std::byte> nan_image(be->kv_bytes(cap), std::byte{0xff});  // NaN in F32 and BF16
                    auto stale = [&] {
                        auto block = be->import_kv(nan_image, cap, cap, cap);
                        block->truncate(0);
                        return block;
                    };
                    auto fresh = make_cpu_backend(s->w, opts(isa, 2, kv, wd));
                    auto full_block = fresh->allocate_kv(n);
                    const auto full = fresh->forward(tokens, {nullptr, 0, full_block.get()}, iota_rows(n));
                    for (float x : full) ASSERT_FALSE(std::isnan(x)) << ctx;

                    auto b = stale();
                    EXPECT_TRUE(
                        same_bits(be->forward(tokens, {nullptr, 0, b.get()}, iota_rows(n)), full.data(), full.size()))
                        << ctx << ": full prefill into a stale block";
                    auto prefix = stale();
                    be->forward(all.first(split), {nullptr, 0, prefix.get()}, {});
                    auto suffix = stale();
                    EXPECT_TRUE(same_bits(
                        be->forward(all.subspan(split), {prefix.get(), split, suffix.get()}, iota_rows(n - split)),
                        full.data() + size_t(split) * V, size_t(n - split) * V))
                        << ctx << ": prefix + suffix in stale blocks";
                    auto decode = stale();
                    for (int t = split; t < n; ++t)
                        ASSERT_TRUE(same_bits(be->forward(all.subspan(size_t(t), 1),
                                                          {prefix.get(), split, decode.get()}, std::vector<int>{0}),
                                              full.data() + size_t(t) * V, size_t(V)))
                            << ctx << ": decode into a stale block, token " << t;
                    // one step, two sequences over the same prefix (shared-prefix attention), stale suffixes
                    auto s1 = stale(), s2 = stale();
                    expect_two_sequence_step(*be, all, *prefix, split, *s1, *s2, full, V, ctx);
                }
    }
}

// With a warm KV pool (CpuBackendOptions::kv_warm_bytes) a block's storage is made of 2 MiB pieces
// that other blocks held before (KvRecycler over WarmPages): here blocks filled with NaN, freed past
// what the recycler keeps whole. A full prefill, prefix + suffix, token-by-token decode, copy_kv
// and a two-sequence step in blocks built from those pieces give the bits of a backend without a
// pool; the pool's counters show the pieces were taken and given back.
TEST(cpu_backend, kv_blocks_from_the_warm_pool_give_the_same_bits) {
    const int n = 45, split = 21;
    const size_t pool_bytes = size_t(32) << 20;
    auto s = make_synth(ModelFamily::qwen3, DType::bf16);
    const int V = s->w.config.vocab_size;
    const auto tokens = random_tokens(n, V, 17);
    const std::span<const token_id> all(tokens);
    for (KvDType kv : {KvDType::f32, KvDType::bf16}) {
        const std::string ctx = std::string("kv ") + kv_dtype_name(kv);
        CpuBackendOptions o = opts(cpu::best_isa(), 2, kv);
        auto plain = make_cpu_backend(s->w, o);
        o.kv_warm_bytes = pool_bytes;
        o.kv_warm_fill = WarmFill::up_front;
        o.kv_warm_refill = false;  // filled once, here: the pieces freed below are what it holds after
        auto be = make_cpu_backend(s->w, o);
        auto full_block = plain->allocate_kv(n);
        const auto full = plain->forward(tokens, {nullptr, 0, full_block.get()}, iota_rows(n));
        for (float x : full) ASSERT_FALSE(std::isnan(x)) << ctx;

        // Filled while the backend was built (no thread: what follows does not depend on the load).
        ASSERT_EQ(be->kv_pool_stats().filled_bytes, pool_bytes) << ctx << ": the pool did not fill";
        // `big` positions take over 2 MiB (pooled storage); the NaN blocks 8x that, so the recycler
        // never hands one of them whole to a block of `big` positions (a quarter of its size at least).
        const int big = int((size_t(3) << 20) / be->kv_bytes(1)) / 16 * 16;
        const int nan_cap = 8 * big;
        {
            const std::vector<std::byte> nan_image(be->kv_bytes(nan_cap), std::byte{0xff});  // NaN in F32 and BF16
            std::vector<std::unique_ptr<KvBlock>> nan_blocks;
            for (int i = 0; i < 4; ++i) nan_blocks.push_back(be->import_kv(nan_image, nan_cap, nan_cap, nan_cap));
        }  // freed: the recycler keeps two whole, the others' pieces refill the pool
        const WarmPages::Stats before = be->kv_pool_stats();
        EXPECT_GE(before.warm_bytes_taken, pool_bytes) << ctx << ": the NaN blocks did not drain the pool";
        EXPECT_GT(before.returned_bytes, 0u) << ctx << ": no freed storage came back to the pool";
        EXPECT_EQ(before.held_bytes, pool_bytes) << ctx;
        const auto pooled = [&] {
            auto block = be->allocate_kv(big);
            block->reserve(big);
            return block;
        };

        auto b = pooled();
        EXPECT_TRUE(same_bits(be->forward(tokens, {nullptr, 0, b.get()}, iota_rows(n)), full.data(), full.size()))
            << ctx << ": full prefill";
        auto prefix = pooled();
        be->forward(all.first(split), {nullptr, 0, prefix.get()}, {});
        auto suffix = pooled();
        EXPECT_TRUE(same_bits(be->forward(all.subspan(split), {prefix.get(), split, suffix.get()}, iota_rows(n - split)),
                              full.data() + size_t(split) * V, size_t(n - split) * V))
            << ctx << ": prefix + suffix";
        auto decode = pooled();
        for (int t = split; t < n; ++t)
            ASSERT_TRUE(same_bits(be->forward(all.subspan(size_t(t), 1), {prefix.get(), split, decode.get()},
                                              std::vector<int>{0}),
                                  full.data() + size_t(t) * V, size_t(V)))
                << ctx << ": decode, token " << t;
        // a conversation going on from a stored state: the prefix's positions copied into pooled storage
        auto copied = be->copy_kv(*prefix, split, big, big);
        auto rest = pooled();
        EXPECT_TRUE(same_bits(be->forward(all.subspan(split), {copied.get(), split, rest.get()}, iota_rows(n - split)),
                              full.data() + size_t(split) * V, size_t(n - split) * V))
            << ctx << ": over a copied prefix";
        auto s1 = pooled(), s2 = pooled();
        expect_two_sequence_step(*be, all, *prefix, split, *s1, *s2, full, V, ctx);

        const WarmPages::Stats after = be->kv_pool_stats();
        EXPECT_GT(after.warm_bytes_taken, before.warm_bytes_taken) << ctx << ": the blocks did not come from the pool";
        EXPECT_EQ(plain->kv_pool_stats().capacity_bytes, 0u) << ctx << ": a backend without a pool reports one";
    }
}

// A block's storage starts at what its first write needs plus some room and grows as positions are
// written (cpu_backend.cpp, CpuKvBlock::reserve), each time into a new buffer (here from a recycler
// that holds NaN-filled ones) that the written positions are copied into. A long decode through
// several growths, prefill chunks that cross a growth, a truncation, and views with and without a
// prefix give the bits of a full prefill, and the block exports the full prefill's K/V.
TEST(cpu_backend, kv_storage_grows_on_demand_and_keeps_every_bit) {
    const int n = 700, P = 37;
    auto s = make_synth(ModelFamily::qwen3, DType::bf16);
    const int V = s->w.config.vocab_size;
    const auto tokens = random_tokens(n, V, 17);
    const std::span<const token_id> all(tokens);
    for (cpu::Isa isa : isas())
        for (KvDType kv : {KvDType::f32, KvDType::bf16}) {
            const std::string ctx = std::string(cpu::isa_name(isa)) + " kv " + kv_dtype_name(kv);
            auto be = make_cpu_backend(s->w, opts(isa, 2, kv));
            auto full_block = be->allocate_kv(n);
            const auto full = be->forward(tokens, {nullptr, 0, full_block.get()}, iota_rows(n));
            {  // two NaN-filled buffers into the recycler
                const std::vector<std::byte> nan_image(be->kv_bytes(n), std::byte{0xff});
                auto a = be->import_kv(nan_image, n, n, n), b = be->import_kv(nan_image, n, n, n);
            }
            {  // reserve: a prompt written in chunks gets its storage in one piece, before the writes
                auto block = be->allocate_kv(n);
                block->reserve(600);
                const int held = block->storage_tokens();
                EXPECT_GE(held, 600) << ctx;
                EXPECT_LE(held, (n + 15) / 16 * 16) << ctx;
                for (int t = 0; t < 600; t += 200) {
                    const auto got =
                        be->forward(all.subspan(size_t(t), 200), {nullptr, 0, block.get()}, iota_rows(200));
                    ASSERT_TRUE(same_bits(got, full.data() + size_t(t) * V, size_t(200) * V))
                        << ctx << " reserved, at " << t;
                }
                EXPECT_EQ(block->storage_tokens(), held) << ctx << ": no growth within what was reserved";
            }
            auto prefix = be->allocate_kv(P);
            be->forward(all.first(P), {nullptr, 0, prefix.get()}, {});
            for (bool with_prefix : {false, true}) {
                const int p = with_prefix ? P : 0;
                auto block = be->allocate_kv(n - p);
                const KvView view{with_prefix ? prefix.get() : nullptr, p, block.get()};
                if (!with_prefix) {
                    be->forward(all.first(1), view, {});
                    // the memory a block holds follows what is written, not the capacity asked for
                    EXPECT_GE(block->storage_tokens(), 1) << ctx;
                    EXPECT_LT(block->storage_tokens(), n / 4) << ctx;
                } else {
                    // a first write, then a truncation back to nothing: growth copies only what counts
                    be->forward(all.subspan(size_t(p), 5), view, {});
                    block->truncate(0);
                }
                int t = p + block->n_tokens();
                // chunks, then one token at a time across the first growth (at ~272 positions),
                // then a chunk across the second, to the end
                const auto chunk = [&](int len) {
                    const auto got = be->forward(all.subspan(size_t(t), size_t(len)), view, iota_rows(len));
                    ASSERT_TRUE(same_bits(got, full.data() + size_t(t) * V, size_t(len) * V))
                        << ctx << (with_prefix ? " with a prefix" : "") << ", " << len << " tokens at " << t;
                    t += len;
                };
                for (int len : {9, 100}) chunk(len);
                while (t < 400 && !HasFatalFailure()) chunk(1);
                chunk(n - t);
                if (HasFatalFailure()) return;
                ASSERT_EQ(block->n_tokens(), n - p);
                EXPECT_GE(block->storage_tokens(), n - p) << ctx;
                EXPECT_LE(block->storage_tokens(), (n - p + 15) / 16 * 16) << ctx;
                if (!with_prefix) {
                    std::vector<std::byte> a(be->kv_bytes(n)), b(be->kv_bytes(n));
                    be->export_kv(*full_block, n, a);
                    be->export_kv(*block, n, b);
                    EXPECT_TRUE(a == b) << ctx << ": the grown block's K/V differ from the full prefill's";
                }
            }
        }
}

// Zero copy: a prefix linked in place from its canonical image (as a group file's mapping is)
// gives the bits of a full prefill and of the tiled prefix block it was exported from, for every
// ISA, family, KV dtype, thread count and split (ragged tiles, head_dim 24 not a multiple of the
// vector width, a shorter view, token-by-token decode).
TEST(cpu_backend, linked_canonical_prefix_is_bit_identical_to_full_prefill) {
    const int n = 61;
    for (cpu::Isa isa : isas())
        for (ModelFamily fam : {ModelFamily::qwen3, ModelFamily::llama, ModelFamily::mistral})
            for (KvDType kv : {KvDType::f32, KvDType::bf16}) {
                auto s = make_synth(fam, DType::bf16);
                const auto tokens = random_tokens(n, s->w.config.vocab_size, 13);
                const std::span<const token_id> all(tokens);
                const int V = s->w.config.vocab_size;
                std::vector<float> full;
                {
                    auto be = make_cpu_backend(s->w, opts(isa, 1, kv));
                    auto block = be->allocate_kv(n);
                    full = be->forward(tokens, {nullptr, 0, block.get()}, iota_rows(n));
                }
                for (int threads : {1, 2}) {
                    auto be = make_cpu_backend(s->w, opts(isa, threads, kv));
                    EXPECT_TRUE(be->links_in_place());
                    for (int split : {1, 15, 16, 17, 33, 48, n - 1}) {
                        const std::string ctx = std::string(cpu::isa_name(isa)) + " " + family_str(fam) + " kv " +
                                                kv_dtype_name(kv) + " threads " + std::to_string(threads) + " split " +
                                                std::to_string(split);
                        auto prefix = be->allocate_kv(split);
                        be->forward(all.first(size_t(split)), {nullptr, 0, prefix.get()}, {});
                        auto image = std::make_shared<std::vector<std::byte>>(be->kv_bytes(split));
                        be->export_kv(*prefix, split, *image);
                        auto linked = be->link_kv(*image, split, image);
                        ASSERT_EQ(linked->n_tokens(), split);
                        // what the store writes again from a linked block: the same canonical bytes
                        std::vector<std::byte> again(image->size());
                        be->export_kv(*linked, split, again);
                        ASSERT_EQ(again, *image) << ctx;
                        // suffix in one call, against the linked and against the tiled prefix
                        auto s1 = be->allocate_kv(n - split), s2 = be->allocate_kv(n - split);
                        auto got = be->forward(all.subspan(size_t(split)), {linked.get(), split, s1.get()}, iota_rows(n - split));
                        auto mem = be->forward(all.subspan(size_t(split)), {prefix.get(), split, s2.get()}, iota_rows(n - split));
                        ASSERT_TRUE(same_bits(got, full.data() + size_t(split) * V, size_t(n - split) * V)) << ctx;
                        ASSERT_TRUE(same_bits(got, mem.data(), mem.size())) << ctx;
                        // token by token (decode reads the linked block once per step)
                        auto s3 = be->allocate_kv(n - split);
                        for (int t = split; t < n; t += 5) {
                            auto one = be->forward(all.subspan(size_t(t), 1), {linked.get(), split, s3.get()}, std::vector<int>{0});
                            ASSERT_TRUE(same_bits(one, full.data() + size_t(t) * V, size_t(V))) << ctx << " token " << t;
                            if (t + 5 < n) be->forward(all.subspan(size_t(t + 1), 4), {linked.get(), split, s3.get()}, {});
                        }
                        // a shorter view of the linked block (longest-prefix reuse)
                        if (split > 3) {
                            auto s4 = be->allocate_kv(n);
                            auto part = be->forward(all.subspan(size_t(split - 3)), {linked.get(), split - 3, s4.get()},
                                                    iota_rows(n - split + 3));
                            ASSERT_TRUE(same_bits(part, full.data() + size_t(split - 3) * V, size_t(n - split + 3) * V)) << ctx;
                        }
                        // read-only: never a suffix block
                        EXPECT_THROW(be->forward(all.first(1), {nullptr, 0, linked.get()}, {}), std::runtime_error);
                        EXPECT_THROW(be->link_kv(std::span<const std::byte>(*image).first(image->size() - 1), split, image),
                                     std::runtime_error);
                    }
                }
            }
}

// Continuous batching's shared-prefix attention (CpuBackendOptions::share_prefix_attention):
// sequences over one prefix block attend in one call, and each still gets, bit for bit, the logits
// and suffix K/V it gets alone: every ISA, KV dtype and weight format (bf16dot's BF16 attention
// with an odd prefix, whose key pair straddles prefix and suffix), a sliding window, the prefix
// tiled or linked in place, mixed with sequences over another prefix, a shorter view of the same
// block, and no prefix at all.
TEST(cpu_backend, sequences_sharing_a_prefix_in_one_step_get_the_bits_they_get_alone) {
    struct Plan {
        int prefix;   // 0: the first prefix block, 1: the second, -1: none
        int P;        // positions of the prefix the view uses
        int history;  // suffix positions already there
        int n_new;
    };
    const int P0 = 37, P1 = 16;
    const Plan plan[] = {{0, P0, 0, 1},  {0, P0, 1, 1}, {0, P0, 5, 3}, {-1, 0, 0, 6},  {0, P0, 9, 8}, {1, P1, 2, 1},
                         {0, P0, 0, 20}, {0, 20, 3, 2}, {1, P1, 0, 4}, {0, P0, 3, 1}};
    for (ModelFamily fam : {ModelFamily::qwen3, ModelFamily::mistral, ModelFamily::qwen2}) {
        auto s = make_synth(fam, DType::bf16);
        const int vocab = s->w.config.vocab_size;
        for (cpu::Isa isa : isas())
            for (KvDType kv : {KvDType::f32, KvDType::bf16})
                for (WeightDType wd : {WeightDType::stored, WeightDType::bf16dot}) {
                    if (wd == WeightDType::bf16dot && (isa != cpu::best_isa() || !cpu::bf16dot::supported())) continue;
                    for (bool linked : {false, true}) {
                        auto be = make_cpu_backend(s->w, opts(isa, 2, kv, wd));
                        const std::string ctx = std::string(cpu::isa_name(isa)) + " " + family_str(fam) + " kv " +
                                                kv_dtype_name(kv) + " " + weight_dtype_name(wd) +
                                                (linked ? " linked" : " tiled");
                        std::vector<std::unique_ptr<KvBlock>> prefixes;
                        std::vector<std::shared_ptr<std::vector<std::byte>>> images;
                        for (int p : {0, 1}) {
                            const int n = p == 0 ? P0 : P1;
                            auto block = be->allocate_kv(n);
                            be->forward(random_tokens(n, vocab, 50 + uint32_t(p)), {nullptr, 0, block.get()}, {});
                            if (linked) {
                                auto image = std::make_shared<std::vector<std::byte>>(be->kv_bytes(n));
                                be->export_kv(*block, n, *image);
                                block = be->link_kv(*image, n, image);
                                images.push_back(image);
                            }
                            prefixes.push_back(std::move(block));
                        }
                        // The same sequences twice: alone, then all in one forward_batch step.
                        auto make = [&](std::vector<std::unique_ptr<KvBlock>>& suffixes) {
                            suffixes.clear();
                            for (size_t i = 0; i < std::size(plan); ++i) {
                                const Plan& q = plan[i];
                                const KvBlock* prefix = q.prefix < 0 ? nullptr : prefixes[size_t(q.prefix)].get();
                                suffixes.push_back(be->allocate_kv(q.history + q.n_new));
                                if (q.history > 0)
                                    be->forward(random_tokens(q.history, vocab, 200 + uint32_t(i)),
                                                {prefix, q.P, suffixes.back().get()}, {});
                            }
                        };
                        std::vector<std::unique_ptr<KvBlock>> alone, together;
                        make(alone);
                        make(together);
                        std::vector<std::vector<token_id>> tokens;
                        std::vector<std::vector<int>> rows;
                        std::vector<std::vector<float>> expected;
                        std::vector<SequenceRows> step;
                        std::vector<std::vector<float>> got;
                        got.reserve(std::size(plan));  // the steps' spans point into it
                        for (size_t i = 0; i < std::size(plan); ++i) {
                            const Plan& q = plan[i];
                            const KvBlock* prefix = q.prefix < 0 ? nullptr : prefixes[size_t(q.prefix)].get();
                            tokens.push_back(random_tokens(q.n_new, vocab, 300 + uint32_t(i)));
                            rows.push_back(iota_rows(q.n_new));
                            expected.push_back(be->forward(tokens.back(), {prefix, q.P, alone[i].get()}, rows.back()));
                        }
                        for (size_t i = 0; i < std::size(plan); ++i) {
                            const Plan& q = plan[i];
                            const KvBlock* prefix = q.prefix < 0 ? nullptr : prefixes[size_t(q.prefix)].get();
                            got.emplace_back(rows[i].size() * size_t(vocab), -1.0f);
                            step.push_back(SequenceRows{tokens[i], KvView{prefix, q.P, together[i].get()}, rows[i], got.back()});
                        }
                        be->forward_batch(step);
                        ASSERT_EQ(got.size(), std::size(plan)) << ctx;
                        for (size_t i = 0; i < std::size(plan); ++i) {
                            EXPECT_TRUE(same_bits(got[i], expected[i].data(), expected[i].size()) &&
                                        got[i].size() == expected[i].size())
                                << ctx << ": sequence " << i << "'s logits differ from the sequence alone";
                            const int n = together[i]->n_tokens();
                            ASSERT_EQ(n, alone[i]->n_tokens()) << ctx << " sequence " << i;
                            std::vector<std::byte> a(be->kv_bytes(n)), b(be->kv_bytes(n));
                            be->export_kv(*alone[i], n, a);
                            be->export_kv(*together[i], n, b);
                            EXPECT_TRUE(a == b) << ctx << ": sequence " << i << "'s suffix K/V differ";
                        }
                    }
                }
    }
}

// Greedy decoding asks a step for tokens instead of logits (SequenceRows::argmax): each is the first
// maximum of the logits it replaces (km::argmax_row), whether the logits come back too or not, for
// one sequence or several in a step, through the CPU backend's own forward_batch and through the
// one every backend inherits (Backend::forward_batch: sequences one after another through forward()).
TEST(cpu_backend, greedy_tokens_are_the_first_maximum_of_the_logits_they_replace) {
    auto s = make_synth(ModelFamily::qwen3, DType::bf16);
    const int vocab = s->w.config.vocab_size;
    auto cpu = make_cpu_backend(s->w, opts(cpu::best_isa(), 2));
    const std::vector<std::vector<token_id>> tokens = {random_tokens(9, vocab, 61), random_tokens(1, vocab, 62),
                                                       random_tokens(4, vocab, 63)};
    const std::vector<std::vector<int>> rows = {{8, 3, 3}, {0}, {0, 1, 2, 3}};
    std::vector<std::vector<float>> want;
    for (size_t i = 0; i < tokens.size(); ++i) {
        auto kv = cpu->allocate_kv(int(tokens[i].size()));
        want.push_back(cpu->forward(tokens[i], {nullptr, 0, kv.get()}, rows[i]));
    }
    Backend* be = cpu.get();
    for (const bool inherited : {false, true})  // the CPU backend's forward_batch, or Backend's own
        for (const bool with_logits : {true, false})
            for (const size_t n_seqs : {size_t(1), tokens.size()}) {
                const std::string ctx = std::string(inherited ? "Backend's forward_batch" : "cpu's forward_batch") +
                                        (with_logits ? ", logits too, " : ", tokens only, ") + std::to_string(n_seqs) +
                                        " sequence(s)";
                std::vector<std::unique_ptr<KvBlock>> blocks;
                std::vector<std::vector<float>> logits(n_seqs);
                std::vector<std::vector<token_id>> ids(n_seqs);
                std::vector<SequenceRows> step;
                for (size_t i = 0; i < n_seqs; ++i) {
                    blocks.push_back(be->allocate_kv(int(tokens[i].size())));
                    if (with_logits) logits[i].assign(rows[i].size() * size_t(vocab), NAN);
                    ids[i].assign(rows[i].size(), -1);
                    step.push_back({tokens[i], {nullptr, 0, blocks[i].get()}, rows[i], logits[i], ids[i]});
                }
                if (inherited)
                    be->Backend::forward_batch(step);
                else if (inherited)
                    be->Backend::forward_batch(step);
                else
                    be->forward_batch(step);
                for (size_t i = 0; i < n_seqs; ++i) {
                    for (size_t j = 0; j < rows[i].size(); ++j)
                        EXPECT_EQ(ids[i][j], km::argmax_row(want[i].data() + j * size_t(vocab), vocab))
                            << ctx << ": sequence " << i << " row " << j;
                    if (with_logits) {
                        EXPECT_TRUE(same_bits(logits[i], want[i].data(), want[i].size())) << ctx;
                    }
                    EXPECT_EQ(blocks[i]->n_tokens(), int(tokens[i].size())) << ctx;
                }
            }
    // storage of the wrong size is refused before anything runs, naming what is wrong
    auto kv = cpu->allocate_kv(9);
    std::vector<token_id> two(2);
    std::vector<float> none;
    const std::vector<int> three_rows{0, 1, 2};
    for (const SequenceRows& bad : {SequenceRows{tokens[0], {nullptr, 0, kv.get()}, three_rows, none, two},
                                    SequenceRows{tokens[0], {nullptr, 0, kv.get()}, three_rows, none, {}}}) {
        try {
            cpu->forward_batch(std::span(&bad, 1));
            ADD_FAILURE() << "no error";
        } catch (const std::runtime_error& e) {
            EXPECT_NE(
                std::string(e.what()).find(bad.argmax.empty() ? "floats for its logits" : "ids for the greedy tokens"),
                std::string::npos)
                << e.what();
        }
    }
    EXPECT_EQ(kv->n_tokens(), 0);
}

// The last layer runs on past its K/V only for the rows whose logits a call asks for. Whichever
// rows those are (none, one, a few, repeated, unordered; alone or in a step with other
// sequences), their logits are the bits of the call that asks for every row, and the K/V the call
// leaves (which every later token attends to) are the same bytes.
TEST(cpu_backend, the_rows_asked_for_change_no_bit_of_their_logits_or_the_kv) {
    const int n = 41, P = 13;
    const std::vector<std::vector<int>> asks = {{n - 1},           {0}, {17}, {3, 4, 5}, {2, 30, 31, n - 1},
                                                {n - 1, 7, n - 1}, {}};
    for (ModelFamily fam : {ModelFamily::qwen3, ModelFamily::mistral, ModelFamily::qwen2}) {
        auto s = make_synth(fam, DType::bf16);
        const int V = s->w.config.vocab_size;
        const auto tokens = random_tokens(n, V, 21);
        const std::vector<token_id> next{tokens[5]};
        for (cpu::Isa isa : isas())
            for (KvDType kv : {KvDType::f32, KvDType::bf16})
                for (WeightDType wd : {WeightDType::stored, WeightDType::bf16dot}) {
                    if (wd == WeightDType::bf16dot && (isa != cpu::best_isa() || !cpu::bf16dot::supported())) continue;
                    auto be = make_cpu_backend(s->w, opts(isa, 2, kv, wd));
                    const std::string ctx = std::string(cpu::isa_name(isa)) + " " + family_str(fam) + " kv " +
                                            kv_dtype_name(kv) + " " + weight_dtype_name(wd);
                    auto prefix = be->allocate_kv(P);
                    be->forward(random_tokens(P, V, 22), {nullptr, 0, prefix.get()}, {});
                    auto kv_bytes = [&](const KvBlock& b) {
                        std::vector<std::byte> out(be->kv_bytes(b.n_tokens()));
                        be->export_kv(b, b.n_tokens(), out);
                        return out;
                    };
                    for (int pp : {0, P}) {
                        const KvView base{pp ? prefix.get() : nullptr, pp, nullptr};
                        auto all_block = be->allocate_kv(n + 1);
                        const auto all = be->forward(tokens, {base.prefix, pp, all_block.get()}, iota_rows(n));
                        const auto all_next =
                            be->forward(next, {base.prefix, pp, all_block.get()}, std::vector<int>{0});
                        const auto all_kv = kv_bytes(*all_block);
                        for (const std::vector<int>& ask : asks) {
                            const std::string what = ctx + " prefix " + std::to_string(pp) + " asking " +
                                                     std::to_string(ask.size()) + " rows";
                            auto block = be->allocate_kv(n + 1);
                            const auto got = be->forward(tokens, {base.prefix, pp, block.get()}, ask);
                            ASSERT_EQ(got.size(), ask.size() * size_t(V)) << what;
                            for (size_t r = 0; r < ask.size(); ++r)
                                EXPECT_EQ(
                                    std::memcmp(got.data() + r * size_t(V), all.data() + size_t(ask[r]) * size_t(V),
                                                size_t(V) * sizeof(float)),
                                    0)
                                    << what << ": row " << ask[r];
                            EXPECT_TRUE(be->forward(next, {base.prefix, pp, block.get()}, std::vector<int>{0}) ==
                                        all_next)
                                << what << ": the next token's logits differ";
                            EXPECT_TRUE(kv_bytes(*block) == all_kv) << what << ": the K/V differ";
                        }
                    }
                    // One step of first tokens: sequences over the shared prefix and one without,
                    // each asking for its last row, one for none.
                    const int lens[] = {9, 4, 12, 6};
                    const int views[] = {P, P, 0, P};
                    std::vector<std::unique_ptr<KvBlock>> alone, together;
                    std::vector<std::vector<token_id>> toks;
                    std::vector<std::vector<int>> rows;
                    std::vector<std::vector<float>> expected, got;
                    std::vector<SequenceRows> step;
                    got.reserve(std::size(lens));
                    for (size_t i = 0; i < std::size(lens); ++i) {
                        const KvBlock* pb = views[i] ? prefix.get() : nullptr;
                        toks.push_back(random_tokens(lens[i], V, 40 + uint32_t(i)));
                        rows.push_back(i == 3 ? std::vector<int>{} : std::vector<int>{lens[i] - 1});
                        alone.push_back(be->allocate_kv(lens[i]));
                        together.push_back(be->allocate_kv(lens[i]));
                        expected.push_back(be->forward(toks[i], {pb, views[i], alone[i].get()}, iota_rows(lens[i])));
                    }
                    for (size_t i = 0; i < std::size(lens); ++i) {
                        got.emplace_back(rows[i].size() * size_t(V), -1.0f);
                        step.push_back(SequenceRows{
                            toks[i], KvView{views[i] ? prefix.get() : nullptr, views[i], together[i].get()}, rows[i],
                            got.back()});
                    }
                    be->forward_batch(step);
                    for (size_t i = 0; i < std::size(lens); ++i) {
                        if (!rows[i].empty()) {
                            EXPECT_EQ(std::memcmp(got[i].data(), expected[i].data() + size_t(lens[i] - 1) * size_t(V),
                                                  size_t(V) * sizeof(float)),
                                      0)
                                << ctx << ": sequence " << i << "'s last row in the step";
                        }
                        EXPECT_TRUE(kv_bytes(*together[i]) == kv_bytes(*alone[i]))
                            << ctx << ": sequence " << i << "'s K/V";
                    }
                }
    }
}

TEST(cpu_backend, cancel_throws_and_leaves_the_suffix_unchanged) {
    auto s = make_synth(ModelFamily::mistral, DType::f32);
    auto be = make_cpu_backend(s->w, opts(cpu::best_isa(), 2));
    const int V = s->w.config.vocab_size;
    const auto tokens = random_tokens(30, V, 4);
    const std::span<const token_id> sp(tokens);
    auto block = be->allocate_kv(30);
    auto first = be->forward(sp.first(10), {nullptr, 0, block.get()}, std::vector<int>{9});
    std::atomic<bool> cancel{true};
    EXPECT_THROW(be->forward(sp.subspan(10), {nullptr, 0, block.get()}, iota_rows(20), &cancel), Cancelled);
    EXPECT_EQ(block->n_tokens(), 10);
    cancel = false;
    auto rest = be->forward(sp.subspan(10), {nullptr, 0, block.get()}, iota_rows(20), &cancel);
    EXPECT_EQ(block->n_tokens(), 30);
    auto ref_block = be->allocate_kv(30);
    auto full = be->forward(tokens, {nullptr, 0, ref_block.get()}, iota_rows(30));
    ASSERT_TRUE(same_bits(rest, full.data() + size_t(10) * V, size_t(20) * V));
}

// check_forward_request is what every backend's forward() runs first: each bad request is refused
// with its own words, and a good one passes.
TEST(ForwardRequest, EachProblemIsNamed) {
    struct Block : KvBlock {
        int cap, n;
        Block(int c, int k) : cap(c), n(k) {}
        int capacity_tokens() const override { return cap; }
        int n_tokens() const override { return n; }
        void truncate(int k) override { n = k; }
    };
    Block prefix(8, 6), suffix(4, 1);
    const std::vector<token_id> ok{1, 2};
    const auto message = [&](std::span<const token_id> tokens, KvView kv, const KvBlock* pre, const KvBlock& suf,
                             std::vector<int> rows) -> std::string {
        try {
            check_forward_request(tokens, kv, pre, suf, rows, 100);
        } catch (const std::runtime_error& e) {
            return e.what();
        }
        return "";
    };
    EXPECT_EQ(message(ok, {&prefix, 6, &suffix}, &prefix, suffix, {0, 1}), "");
    EXPECT_EQ(message(ok, {nullptr, 0, &suffix}, nullptr, suffix, {}), "");
    EXPECT_EQ(message(ok, {&prefix, -1, &suffix}, nullptr, suffix, {}), "forward: negative prefix_tokens");
    EXPECT_EQ(message(ok, {&prefix, 7, &suffix}, &prefix, suffix, {}),
              "forward: the view uses 7 prefix positions, the prefix block holds 6");
    EXPECT_EQ(message(ok, {&suffix, 1, &suffix}, &suffix, suffix, {}), "forward: the prefix and suffix blocks are the same block");
    EXPECT_EQ(message(std::vector<token_id>{1, 100}, {nullptr, 0, &suffix}, nullptr, suffix, {}),
              "forward: token id 100 (at index 1) is outside the vocabulary [0, 100)");
    EXPECT_EQ(message(std::vector<token_id>{-1}, {nullptr, 0, &suffix}, nullptr, suffix, {}),
              "forward: token id -1 (at index 0) is outside the vocabulary [0, 100)");
    EXPECT_EQ(message(ok, {nullptr, 0, &suffix}, nullptr, suffix, {2}), "forward: logit row 2 is outside the batch [0, 2)");
    EXPECT_EQ(message(std::vector<token_id>{1, 2, 3, 4}, {&prefix, 6, &suffix}, &prefix, suffix, {}),
              "forward: KV capacity exceeded: positions 7..10 need 5 suffix slots, the block has 4");
}

TEST(cpu_backend, bad_requests_are_errors_naming_the_problem) {
    auto s = make_synth(ModelFamily::qwen3, DType::f32);
    auto be = make_cpu_backend(s->w, opts(cpu::best_isa(), 1));
    auto block = be->allocate_kv(4);
    const std::vector<token_id> bad{1, 97, 2};
    try {
        be->forward(bad, {nullptr, 0, block.get()}, {});
        FAIL() << "no error";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("97"), std::string::npos) << e.what();
    }
    EXPECT_THROW(be->forward(std::vector<token_id>{-1}, {nullptr, 0, block.get()}, {}), std::runtime_error);
    EXPECT_EQ(block->n_tokens(), 0);
    try {
        be->forward(std::vector<token_id>{1, 2, 3, 4, 5}, {nullptr, 0, block.get()}, {});
        FAIL() << "no error";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("capacity"), std::string::npos) << e.what();
    }
    EXPECT_THROW(be->forward(std::vector<token_id>{1}, {nullptr, 0, block.get()}, std::vector<int>{1}), std::runtime_error);
    EXPECT_THROW(be->forward(std::vector<token_id>{1}, {nullptr, 0, nullptr}, {}), std::runtime_error);
    EXPECT_THROW(be->forward(std::vector<token_id>{1}, {block.get(), 1, be->allocate_kv(2).get()}, {}), std::runtime_error);
    EXPECT_THROW(block->truncate(1), std::runtime_error);
    EXPECT_EQ(block->n_tokens(), 0);
}
