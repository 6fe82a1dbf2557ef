// The group store's GPU tier (DESIGN §7) without a GPU: a fake "device" backend wraps the CPU
// backend (kv_on_device() = true, every import/export counted), so the tier transitions, budgets,
// LRU order, promotion, upload timing and exactness after demote/promote cycles are checked here.
// A real CUDA backend goes through the same store code (core/store/group_store.cpp).
#include "core/model/builtin_model.h"
#include "core/cpu/cpu_backend.h"
#include "core/store/group_store.h"
#include "tests/test_support.h"

#include <gtest/gtest.h>

#include <cstring>

namespace {

// The CPU backend dressed as a device backend: its KV "lives on the device", and every copy in or
// out of it is counted (a GPU-tier hit must copy nothing).
class FakeDeviceBackend : public cc::Backend {
public:
    explicit FakeDeviceBackend(std::unique_ptr<cc::Backend> inner) : inner_(std::move(inner)) {}
    std::string name() const override { return "fake-device"; }
    std::string numerics_id() const override { return inner_->numerics_id(); }
    const cc::ModelConfig& config() const override { return inner_->config(); }
    cc::KvDType kv_dtype() const override { return inner_->kv_dtype(); }
    std::unique_ptr<cc::KvBlock> allocate_kv(int capacity_tokens) override { return inner_->allocate_kv(capacity_tokens); }
    std::vector<float> forward(std::span<const cc::token_id> tokens, const cc::KvView& kv, std::span<const int> logit_rows,
                               const std::atomic<bool>* cancel) override {
        return inner_->forward(tokens, kv, logit_rows, cancel);
    }
    void export_kv(const cc::KvBlock& block, int n_tokens, std::span<std::byte> out) const override {
        ++exports;
        inner_->export_kv(block, n_tokens, out);
    }
    std::unique_ptr<cc::KvBlock> import_kv(std::span<const std::byte> data, int n_tokens, int capacity_tokens,
                                           int reserve_tokens) override {
        ++imports;
        return inner_->import_kv(data, n_tokens, capacity_tokens, reserve_tokens);
    }
    bool kv_on_device() const override { return true; }

    mutable int exports = 0;
    int imports = 0;

private:
    std::unique_ptr<cc::Backend> inner_;
};

class GpuTier : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        weights_ = new cc::ModelWeights(cc::generate_builtin_weights(*cc::find_builtin("qwen3-test")));
    }
    static void TearDownTestSuite() {
        delete weights_;
        weights_ = nullptr;
    }
    void SetUp() override { device_ = std::make_unique<FakeDeviceBackend>(cc::make_cpu_backend(*weights_)); }

    // A distinct prefix per name (its K/V differ), 24 tokens.
    static std::vector<cc::token_id> prefix_of(char name) {
        std::vector<cc::token_id> ids;
        for (int i = 0; i < 24; ++i) ids.push_back(static_cast<cc::token_id>(100 + (name - 'a') * 31 + i * 7));
        return ids;
    }
    static std::string key_of(char name) { return std::string(64, name); }

    cc::Group expected() const {
        cc::Group g;
        g.model_fingerprint = std::string(64, 'f');
        g.chat_format = "qwen3";
        g.backend_numerics = device_->numerics_id();
        return g;
    }

    // Compiles a group on the fake device (a miss).
    std::shared_ptr<cc::Group> compile(char name) {
        const auto ids = prefix_of(name);
        const int n = static_cast<int>(ids.size());
        auto g = std::make_shared<cc::Group>();
        g->group_key = key_of(name);
        g->tools_hash = std::string(64, '0');
        g->tool_names = {std::string(1, name)};
        g->prefix_ids = ids;
        g->kv = device_->allocate_kv(n);
        device_->forward(ids, cc::KvView{nullptr, 0, g->kv.get()}, {}, nullptr);
        g->kv_bytes = device_->kv_bytes(n);
        g->model_fingerprint = std::string(64, 'f');
        g->chat_format = "qwen3";
        g->backend_numerics = device_->numerics_id();
        g->system_prompt_sha256 = std::string(64, '1');
        g->n_layers = device_->config().n_layers;
        g->n_kv_heads = device_->config().n_kv_heads;
        g->head_dim = device_->config().head_dim;
        g->kv_dtype = device_->kv_dtype();
        return g;
    }

    cc::GroupStore::Lookup find(cc::GroupStore& store, char name) {
        return store.find(key_of(name), prefix_of(name), expected(), *device_);
    }

    static inline const std::vector<cc::token_id> kSuffix{5, 17, 29, 41, 53};

    // Logits of the suffix's last row against a linked prefix group.
    std::vector<float> cached_logits(const cc::Group& g) {
        auto suffix = device_->allocate_kv(static_cast<int>(kSuffix.size()));
        const int last = static_cast<int>(kSuffix.size()) - 1;
        return device_->forward(kSuffix, cc::KvView{g.kv.get(), static_cast<int>(g.prefix_ids.size()), suffix.get()},
                                std::span<const int>(&last, 1), nullptr);
    }
    // The same row from a full prefill of prefix + suffix (the exactness reference).
    std::vector<float> full_logits(char name) {
        auto ids = prefix_of(name);
        ids.insert(ids.end(), kSuffix.begin(), kSuffix.end());
        auto block = device_->allocate_kv(static_cast<int>(ids.size()));
        const int last = static_cast<int>(ids.size()) - 1;
        return device_->forward(ids, cc::KvView{nullptr, 0, block.get()}, std::span<const int>(&last, 1), nullptr);
    }
    static bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
        return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
    }

    size_t group_bytes() const { return device_->kv_bytes(24); }

    static cc::ModelWeights* weights_;
    std::unique_ptr<FakeDeviceBackend> device_;
};

cc::ModelWeights* GpuTier::weights_ = nullptr;

cc::GroupStoreOptions budgets(size_t gpu, size_t host) {
    cc::GroupStoreOptions o;
    o.gpu_budget_bytes = gpu;
    o.host_budget_bytes = host;
    return o;
}

TEST_F(GpuTier, AGpuHitCopiesNothing) {
    cc::GroupStore store(budgets(size_t(1) << 30, size_t(1) << 30));
    store.set_backend(device_.get());
    EXPECT_TRUE(store.on_device());
    store.insert(compile('a'));
    EXPECT_EQ(store.tier_of(key_of('a')), cc::Tier::gpu);
    EXPECT_EQ(store.gpu_bytes(), group_bytes());
    EXPECT_EQ(store.gpu_size(), 1u);
    EXPECT_EQ(store.memory_bytes(), 0u);
    const auto hit = find(store, 'a');
    ASSERT_TRUE(hit.group);
    EXPECT_EQ(hit.tier, cc::Tier::gpu);
    EXPECT_EQ(hit.upload_ms, 0.0);
    EXPECT_EQ(hit.upload_gb_s, 0.0);
    EXPECT_EQ(device_->imports, 0);
    EXPECT_EQ(device_->exports, 0);
    EXPECT_TRUE(same_bits(cached_logits(*hit.group), full_logits('a')));
    const auto list = store.list();
    ASSERT_EQ(list.size(), 1u);
    EXPECT_EQ(list[0].tier, cc::Tier::gpu);
    EXPECT_TRUE(list[0].in_use);  // `hit` holds it
}

TEST_F(GpuTier, EvictionDemotesToHostAndAHostHitUploadsAndPromotes) {
    cc::GroupStore store(budgets(group_bytes(), size_t(1) << 30));  // room for one group on the "GPU"
    store.set_backend(device_.get());
    store.insert(compile('a'));
    store.insert(compile('b'));  // 'a' is least recently used: demoted
    EXPECT_EQ(device_->exports, 1);
    EXPECT_EQ(store.tier_of(key_of('a')), cc::Tier::memory);
    EXPECT_EQ(store.tier_of(key_of('b')), cc::Tier::gpu);
    EXPECT_EQ(store.memory_bytes(), group_bytes());
    EXPECT_EQ(store.gpu_bytes(), group_bytes());

    const auto hit = find(store, 'a');
    ASSERT_TRUE(hit.group);
    EXPECT_EQ(hit.tier, cc::Tier::memory);
    EXPECT_EQ(device_->imports, 1);
    EXPECT_GT(hit.upload_ms, 0.0);
    EXPECT_GT(hit.upload_gb_s, 0.0);
    EXPECT_EQ(store.tier_of(key_of('a')), cc::Tier::gpu);     // promoted
    EXPECT_EQ(store.tier_of(key_of('b')), cc::Tier::memory);  // and 'b' made room
    EXPECT_EQ(device_->exports, 2);
    EXPECT_TRUE(same_bits(cached_logits(*hit.group), full_logits('a')));

    // Listed with the same tier names.
    for (const auto& g : store.list()) EXPECT_EQ(g.tier, g.group_key == key_of('a') ? cc::Tier::gpu : cc::Tier::memory);
}

TEST_F(GpuTier, LogitsStayExactOverDemotePromoteCycles) {
    cc::GroupStore store(budgets(group_bytes(), size_t(1) << 30));
    store.set_backend(device_.get());
    const auto ref_a = full_logits('a');
    const auto ref_b = full_logits('b');
    store.insert(compile('a'));
    store.insert(compile('b'));
    for (int cycle = 0; cycle < 4; ++cycle) {
        for (char name : {'a', 'b'}) {
            const auto hit = find(store, name);
            ASSERT_TRUE(hit.group) << "cycle " << cycle;
            EXPECT_EQ(hit.tier, cc::Tier::memory) << "cycle " << cycle << " " << name;  // the other one pushed it out
            EXPECT_TRUE(same_bits(cached_logits(*hit.group), name == 'a' ? ref_a : ref_b)) << "cycle " << cycle;
        }
    }
    EXPECT_EQ(device_->imports, 8);
    EXPECT_EQ(device_->exports, 9);  // the first demotion, then one per promotion
}

TEST_F(GpuTier, LeastRecentlyUsedIsDemotedFirst) {
    cc::GroupStore store(budgets(2 * group_bytes(), size_t(1) << 30));
    store.set_backend(device_.get());
    store.insert(compile('a'));
    store.insert(compile('b'));
    ASSERT_TRUE(find(store, 'a').group);  // 'a' used after 'b'
    store.insert(compile('c'));
    EXPECT_EQ(store.tier_of(key_of('a')), cc::Tier::gpu);
    EXPECT_EQ(store.tier_of(key_of('b')), cc::Tier::memory);
    EXPECT_EQ(store.tier_of(key_of('c')), cc::Tier::gpu);
}

TEST_F(GpuTier, AGroupInUseIsNeverEvicted) {
    cc::GroupStore store(budgets(group_bytes(), group_bytes()));
    store.set_backend(device_.get());
    store.insert(compile('a'));
    auto held = find(store, 'a').group;  // a query holds 'a'
    store.insert(compile('b'));          // over budget: 'a' is held and 'b' was just inserted
    EXPECT_EQ(store.tier_of(key_of('a')), cc::Tier::gpu);
    EXPECT_EQ(store.tier_of(key_of('b')), cc::Tier::gpu);
    EXPECT_EQ(store.gpu_bytes(), 2 * group_bytes());
    EXPECT_EQ(device_->exports, 0);
    store.insert(compile('c'));  // 'b' is the only one free to go
    EXPECT_EQ(store.tier_of(key_of('a')), cc::Tier::gpu);
    EXPECT_EQ(store.tier_of(key_of('b')), cc::Tier::memory);
    EXPECT_TRUE(same_bits(cached_logits(*held), full_logits('a')));
    held.reset();
    store.insert(compile('d'));  // now 'a' (least recently used, no longer held) and 'c' go; the host keeps one
    EXPECT_EQ(store.tier_of(key_of('a')), cc::Tier::miss);
    EXPECT_EQ(store.tier_of(key_of('b')), cc::Tier::miss);
    EXPECT_EQ(store.tier_of(key_of('c')), cc::Tier::memory);
    EXPECT_EQ(store.tier_of(key_of('d')), cc::Tier::gpu);
    EXPECT_LE(store.memory_bytes(), group_bytes());
}

TEST_F(GpuTier, WithoutHostRoomAnEvictedGroupIsDroppedNotCopied) {
    cc::GroupStore store(budgets(group_bytes(), group_bytes() - 1));
    store.set_backend(device_.get());
    store.insert(compile('a'));
    store.insert(compile('b'));
    EXPECT_EQ(device_->exports, 0);
    EXPECT_EQ(store.tier_of(key_of('a')), cc::Tier::miss);
    EXPECT_FALSE(find(store, 'a').group);
}

TEST_F(GpuTier, ADiskHitUploadsThenPromotes) {
    cc::test::TempDir dir;
    auto o = budgets(size_t(1) << 30, size_t(1) << 30);
    o.dir = dir.path();
    cc::GroupStore store(o);
    store.set_backend(device_.get());
    auto a = compile('a');
    std::vector<std::byte> canonical(a->kv_bytes);
    device_->export_kv(*a->kv, 24, canonical);
    std::shared_ptr<const cc::Group> shared = a;
    const auto written = store.persist(shared, std::move(canonical));
    ASSERT_TRUE(written.ok) << written.error;
    EXPECT_EQ(store.tier_of(key_of('a')), cc::Tier::disk);
    const int imports_before = device_->imports;
    const auto hit = find(store, 'a');
    ASSERT_TRUE(hit.group) << hit.problem;
    EXPECT_EQ(hit.tier, cc::Tier::disk);
    EXPECT_EQ(device_->imports, imports_before + 1);  // link_kv uploads (a device backend cannot read the mapping)
    EXPECT_GT(hit.upload_gb_s, 0.0);
    EXPECT_EQ(store.tier_of(key_of('a')), cc::Tier::gpu);
    EXPECT_TRUE(same_bits(cached_logits(*hit.group), full_logits('a')));
    const auto again = find(store, 'a');
    EXPECT_EQ(again.tier, cc::Tier::gpu);
    EXPECT_EQ(device_->imports, imports_before + 1);
    const auto list = store.list();
    ASSERT_EQ(list.size(), 1u);
    EXPECT_EQ(list[0].tier, cc::Tier::gpu);
    EXPECT_GT(list[0].file_bytes, 0u);
}

TEST_F(GpuTier, LeavingTheDeviceBackendDemotesEveryBlock) {
    cc::GroupStore store(budgets(size_t(1) << 30, size_t(1) << 30));
    store.set_backend(device_.get());
    store.insert(compile('a'));
    store.insert(compile('b'));
    store.set_backend(nullptr);
    EXPECT_EQ(device_->exports, 2);
    EXPECT_EQ(store.tier_of(key_of('a')), cc::Tier::memory);
    EXPECT_EQ(store.tier_of(key_of('b')), cc::Tier::memory);
    EXPECT_EQ(store.gpu_size(), 0u);
    // Back on a device backend: the bytes are uploaded on use, exactly.
    store.set_backend(device_.get());
    const auto hit = find(store, 'a');
    ASSERT_TRUE(hit.group);
    EXPECT_EQ(hit.tier, cc::Tier::memory);
    EXPECT_TRUE(same_bits(cached_logits(*hit.group), full_logits('a')));
}

TEST_F(GpuTier, ADeviceBackendMustBeAttachedFirst) {
    cc::GroupStore store;
    EXPECT_THROW(find(store, 'a'), std::logic_error);
}

TEST_F(GpuTier, RemoveAndDropReachEveryTier) {
    cc::GroupStore store(budgets(group_bytes(), size_t(1) << 30));
    store.set_backend(device_.get());
    store.insert(compile('a'));
    store.insert(compile('b'));
    EXPECT_TRUE(store.drop_from_memory(key_of('a')));  // from the host tier
    EXPECT_TRUE(store.remove(key_of('b')));            // from the GPU tier
    EXPECT_EQ(store.tier_of(key_of('a')), cc::Tier::miss);
    EXPECT_EQ(store.tier_of(key_of('b')), cc::Tier::miss);
    EXPECT_EQ(store.memory_bytes(), 0u);
    EXPECT_EQ(store.gpu_bytes(), 0u);
}

// The CPU backend keeps the two-tier behaviour: "memory" KvBlocks, no GPU tier, no copies.
TEST_F(GpuTier, ACpuBackendKeepsTheMemoryTier) {
    auto cpu = cc::make_cpu_backend(*weights_);
    cc::GroupStore store(budgets(0, size_t(1) << 30));  // a zero GPU budget must not matter here
    store.set_backend(cpu.get());
    EXPECT_FALSE(store.on_device());
    store.insert(compile('a'));
    EXPECT_EQ(store.tier_of(key_of('a')), cc::Tier::memory);
    const auto hit = store.find(key_of('a'), prefix_of('a'), expected(), *cpu);
    EXPECT_EQ(hit.tier, cc::Tier::memory);
    EXPECT_EQ(store.gpu_bytes(), 0u);
    EXPECT_EQ(store.memory_bytes(), group_bytes());
}

// Eviction skips the groups requests hold. A group held when another was inserted stays over the
// budget then; once it is released, the next hit evicts it (not only the next insert).
TEST_F(GpuTier, AHitEvictsWhatWasHeldAtTheLastInsert) {
    auto cpu = cc::make_cpu_backend(*weights_);
    cc::GroupStore store(budgets(0, group_bytes()));  // room for one group
    store.set_backend(cpu.get());
    auto a = compile('a');
    store.insert(a);  // held here: in use
    store.insert(compile('b'));
    EXPECT_EQ(store.memory_size(), 2u);  // over budget: a is in use, b was just inserted
    a.reset();
    const auto hit = store.find(key_of('b'), prefix_of('b'), expected(), *cpu);
    EXPECT_EQ(hit.tier, cc::Tier::memory);
    EXPECT_EQ(store.memory_size(), 1u);
    EXPECT_EQ(store.memory_bytes(), group_bytes());
    EXPECT_EQ(store.tier_of(key_of('a')), cc::Tier::miss);
}

// The names results and the CLI write, and back.
TEST(TierNames, RoundTrip) {
    for (const cc::Tier t : {cc::Tier::gpu, cc::Tier::memory, cc::Tier::disk, cc::Tier::remote, cc::Tier::miss})
        EXPECT_EQ(cc::parse_tier(cc::tier_name(t)), t);
    EXPECT_STREQ(cc::tier_name(cc::Tier::memory), "memory");
    EXPECT_STREQ(cc::tier_name(cc::Tier::remote), "remote");
    EXPECT_THROW(cc::parse_tier(""), std::invalid_argument);
    EXPECT_THROW(cc::parse_tier("host"), std::invalid_argument);
}

}  // namespace
