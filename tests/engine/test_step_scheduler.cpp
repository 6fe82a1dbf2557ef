// Continuous batching stays exact (DESIGN §8 Batching): a sequence's logits and K/V do not change
// by a bit because other sequences share its step, because its prefill is cut into chunks, or
// because requests arrive, finish and are cancelled around it. Everything is asserted with ==
// against the same sequence run alone.
#include "core/base/cancelled.h"
#include "core/base/kernel_math.h"
#include "core/engine/engine.h"
#include "core/engine/step_scheduler.h"
#include "tests/test_support.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <thread>

namespace {

using namespace cc;

Engine& engine(int parallel = 1, int step_tokens = 256) {
    static std::map<std::pair<int, int>, std::unique_ptr<Engine>> engines;
    auto& slot = engines[{parallel, step_tokens}];
    if (!slot) {
        EngineOptions o;
        o.model_spec = "builtin:qwen3-test";
        o.parallel = parallel;
        o.step_tokens = step_tokens;
        slot = std::make_unique<Engine>(o);
        slot->load_model();
    }
    return *slot;
}

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<token_id> random_ids(size_t n, uint32_t seed, int vocab) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> d(0, std::min(vocab, 5000) - 1);
    std::vector<token_id> ids(n);
    for (auto& id : ids) id = d(rng);
    return ids;
}

std::vector<std::byte> exported(const Backend& b, const KvBlock& block) {
    std::vector<std::byte> out(b.kv_bytes(block.n_tokens()));
    b.export_kv(block, block.n_tokens(), out);
    return out;
}

std::vector<int> all_rows(size_t n) {
    std::vector<int> rows(n);
    for (size_t i = 0; i < n; ++i) rows[i] = int(i);
    return rows;
}

// forward_batch with fresh storage for each sequence's logits, returned in order; `base` runs the
// Backend's own (one sequence after another) instead of the backend's override.
std::vector<std::vector<float>> batch(Backend& b, std::vector<SequenceRows> seqs, bool base = false) {
    std::vector<std::vector<float>> out;
    for (const auto& s : seqs) out.emplace_back(s.logit_rows.size() * size_t(b.config().vocab_size), -1.0f);
    for (size_t i = 0; i < seqs.size(); ++i) seqs[i].logits = out[i];
    if (base) b.Backend::forward_batch(seqs);
    else b.forward_batch(seqs);
    return out;
}

std::vector<float> scheduled(StepScheduler& s, std::span<const token_id> ids, const KvView& view, std::span<const int> rows,
                             const std::atomic<bool>* cancel = nullptr, StepStats* stats = nullptr) {
    std::vector<float> logits(rows.size() * size_t(engine().backend().config().vocab_size));
    s.forward(ids, view, rows, logits, cancel, stats);
    return logits;
}

// A prefix block holding `ids`, computed alone.
std::unique_ptr<KvBlock> prefix_block(Backend& b, const std::vector<token_id>& ids) {
    auto block = b.allocate_kv(int(ids.size()));
    b.forward(ids, KvView{nullptr, 0, block.get()}, {});
    return block;
}

// One sequence of a test: a view and the tokens it runs next.
struct Seq {
    const KvBlock* prefix = nullptr;
    int prefix_tokens = 0;
    std::unique_ptr<KvBlock> suffix;
    std::vector<token_id> tokens;
    std::vector<int> rows;
};

TEST(ForwardBatch, each_sequence_gets_the_bits_it_gets_alone) {
    Backend& b = engine().backend();
    const int vocab = b.config().vocab_size;
    const auto group_a = random_ids(40, 1, vocab), group_b = random_ids(33, 2, vocab);
    auto prefix_a = prefix_block(b, group_a), prefix_b = prefix_block(b, group_b);

    // The same group shared by two sequences (one prefilling, one at a later position decoding),
    // another group, a sequence with no prefix, and a view that uses only part of its prefix.
    auto make = [&](std::vector<Seq>& seqs) {
        seqs.clear();
        const struct {
            const KvBlock* prefix;
            int prefix_tokens;
            int history;  // suffix positions already there
            int n_new;
            uint32_t seed;
        } plan[] = {{prefix_a.get(), 40, 0, 7, 10}, {prefix_a.get(), 40, 9, 1, 11}, {prefix_b.get(), 33, 3, 12, 12},
                    {nullptr, 0, 0, 30, 13},         {prefix_a.get(), 25, 2, 1, 14}};
        for (const auto& p : plan) {
            Seq s;
            s.prefix = p.prefix;
            s.prefix_tokens = p.prefix_tokens;
            s.suffix = b.allocate_kv(p.history + p.n_new);
            if (p.history > 0)
                b.forward(random_ids(size_t(p.history), p.seed + 100, vocab), KvView{s.prefix, s.prefix_tokens, s.suffix.get()}, {});
            s.tokens = random_ids(size_t(p.n_new), p.seed, vocab);
            s.rows = all_rows(s.tokens.size());
            seqs.push_back(std::move(s));
        }
    };
    std::vector<Seq> alone, together;
    make(alone);
    make(together);
    std::vector<std::vector<float>> expected;
    for (auto& s : alone) expected.push_back(b.forward(s.tokens, KvView{s.prefix, s.prefix_tokens, s.suffix.get()}, s.rows));

    std::vector<SequenceRows> rows;
    for (auto& s : together) rows.push_back(SequenceRows{s.tokens, KvView{s.prefix, s.prefix_tokens, s.suffix.get()}, s.rows, {}});
    const auto got = batch(b, rows);
    ASSERT_EQ(got.size(), alone.size());
    for (size_t i = 0; i < alone.size(); ++i) {
        EXPECT_TRUE(bits_equal(got[i], expected[i])) << "sequence " << i << ": logits differ from the sequence alone";
        EXPECT_EQ(together[i].suffix->n_tokens(), alone[i].suffix->n_tokens()) << "sequence " << i;
        EXPECT_TRUE(exported(b, *together[i].suffix) == exported(b, *alone[i].suffix)) << "sequence " << i << ": K/V differ";
    }

    // The base implementation (one sequence after another: what a backend without its own runs)
    // gives the same.
    std::vector<Seq> one_by_one;
    make(one_by_one);
    rows.clear();
    for (auto& s : one_by_one) rows.push_back(SequenceRows{s.tokens, KvView{s.prefix, s.prefix_tokens, s.suffix.get()}, s.rows, {}});
    const auto base = batch(b, rows, /*base=*/true);
    for (size_t i = 0; i < alone.size(); ++i) EXPECT_TRUE(bits_equal(base[i], expected[i])) << "sequence " << i;
}

// The test that fails when a kernel stops being batch-invariant: one sequence decoded a token at a
// time, its logits at every position compared with the same sequence in steps of 1..16 sequences
// whose neighbours are at other positions and lengths.
TEST(ForwardBatch, a_row_is_the_same_at_every_batch_size_and_position) {
    Backend& b = engine().backend();
    const int vocab = b.config().vocab_size;
    const auto prompt = random_ids(20, 3, vocab);
    std::vector<std::vector<float>> reference;
    {
        auto block = b.allocate_kv(int(prompt.size()));
        for (size_t p = 0; p < prompt.size(); ++p) {
            const int row = 0;
            reference.push_back(b.forward(std::span<const token_id>(&prompt[p], 1), KvView{nullptr, 0, block.get()},
                                          std::span<const int>(&row, 1)));
        }
    }
    for (int n_seqs = 1; n_seqs <= 16; ++n_seqs) {
        std::vector<std::unique_ptr<KvBlock>> blocks;
        std::vector<std::vector<token_id>> streams;
        for (int s = 0; s < n_seqs; ++s) {
            // neighbours start with a history of their own, so their positions differ from ours
            const size_t history = s == 0 ? 0 : size_t(s * 3 % 11);
            streams.push_back(random_ids(history + prompt.size(), uint32_t(100 + s), vocab));
            if (s == 0) streams[0] = prompt;
            blocks.push_back(b.allocate_kv(int(streams.back().size())));
            if (history > 0)
                b.forward(std::span<const token_id>(streams.back()).first(history), KvView{nullptr, 0, blocks.back().get()}, {});
        }
        for (size_t p = 0; p < prompt.size(); ++p) {
            const int row = 0;
            std::vector<SequenceRows> step;
            for (int s = 0; s < n_seqs; ++s) {
                const size_t at = size_t(blocks[size_t(s)]->n_tokens());
                step.push_back(SequenceRows{std::span<const token_id>(&streams[size_t(s)][at], 1),
                                            KvView{nullptr, 0, blocks[size_t(s)].get()}, std::span<const int>(&row, 1), {}});
            }
            const auto out = batch(b, step);
            ASSERT_TRUE(bits_equal(out[0], reference[p])) << "position " << p << " in a step of " << n_seqs << " sequences";
        }
    }
}

TEST(ForwardBatch, a_bad_sequence_changes_no_block) {
    Backend& b = engine().backend();
    const int vocab = b.config().vocab_size;
    auto ok = b.allocate_kv(8), bad = b.allocate_kv(8);
    const auto ids = random_ids(4, 5, vocab);
    std::vector<token_id> bad_ids = ids;
    bad_ids[2] = vocab;  // outside the vocabulary
    std::vector<SequenceRows> step{{ids, KvView{nullptr, 0, ok.get()}, {}, {}}, {bad_ids, KvView{nullptr, 0, bad.get()}, {}, {}}};
    EXPECT_THROW(batch(b, step), std::runtime_error);
    EXPECT_EQ(ok->n_tokens(), 0);
    EXPECT_EQ(bad->n_tokens(), 0);
    // two sequences writing one block are refused
    std::vector<SequenceRows> shared{{ids, KvView{nullptr, 0, ok.get()}, {}, {}}, {ids, KvView{nullptr, 0, ok.get()}, {}, {}}};
    EXPECT_THROW(batch(b, shared), std::runtime_error);
    EXPECT_EQ(ok->n_tokens(), 0);
    // logits storage of the wrong size is refused before anything runs, by the override and the base
    const int row = 0;
    std::vector<float> short_storage(size_t(vocab) - 1);
    std::vector<SequenceRows> wrong{{ids, KvView{nullptr, 0, ok.get()}, std::span<const int>(&row, 1), short_storage}};
    EXPECT_THROW(b.forward_batch(wrong), std::runtime_error);
    EXPECT_THROW(b.Backend::forward_batch(wrong), std::runtime_error);
    EXPECT_EQ(ok->n_tokens(), 0);
}

// Several threads prefill and decode through one scheduler with a small step budget (prefills cut
// into chunks, decode rows sharing steps with them); every call's logits == the sequence alone.
TEST(StepScheduler, concurrent_chunked_calls_are_exact) {
    Backend& b = engine().backend();
    const int vocab = b.config().vocab_size;
    const auto group = random_ids(50, 7, vocab);
    auto prefix = prefix_block(b, group);
    constexpr int kThreads = 6, kDecode = 6;
    struct Run {
        std::vector<token_id> prompt, decode;
        std::vector<std::vector<float>> logits;  // the prompt's rows, then one per decode step
    };
    auto run = [&](Run& r, const std::function<std::vector<float>(std::span<const token_id>, const KvView&, std::span<const int>)>& fwd) {
        auto block = b.allocate_kv(int(r.prompt.size() + r.decode.size()));
        const KvView view{prefix.get(), 50, block.get()};
        const auto rows = all_rows(r.prompt.size());
        const auto out = fwd(r.prompt, view, rows);
        const size_t v = size_t(vocab);
        for (size_t i = 0; i < rows.size(); ++i) r.logits.emplace_back(out.begin() + std::ptrdiff_t(i * v), out.begin() + std::ptrdiff_t((i + 1) * v));
        for (token_id t : r.decode) {
            const int row = 0;
            r.logits.push_back(fwd(std::span<const token_id>(&t, 1), view, std::span<const int>(&row, 1)));
        }
    };
    std::vector<Run> alone(kThreads), batched(kThreads);
    for (int i = 0; i < kThreads; ++i) {
        alone[size_t(i)].prompt = random_ids(size_t(3 + 9 * i), uint32_t(20 + i), vocab);
        alone[size_t(i)].decode = random_ids(kDecode, uint32_t(40 + i), vocab);
        batched[size_t(i)].prompt = alone[size_t(i)].prompt;
        batched[size_t(i)].decode = alone[size_t(i)].decode;
        run(alone[size_t(i)], [&](auto ids, const KvView& view, auto rows) { return b.forward(ids, view, rows); });
    }
    StepScheduler scheduler(b, StepSchedulerOptions{.max_step_tokens = 8});
    std::vector<StepStats> stats(kThreads);
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i)
        threads.emplace_back([&, i] {
            run(batched[size_t(i)], [&](auto ids, const KvView& view, auto rows) {
                return scheduled(scheduler, ids, view, rows, nullptr, &stats[size_t(i)]);
            });
        });
    for (auto& t : threads) t.join();
    size_t max_sequences = 0;
    for (int i = 0; i < kThreads; ++i) {
        ASSERT_EQ(batched[size_t(i)].logits.size(), alone[size_t(i)].logits.size());
        for (size_t r = 0; r < alone[size_t(i)].logits.size(); ++r)
            EXPECT_TRUE(bits_equal(batched[size_t(i)].logits[r], alone[size_t(i)].logits[r])) << "thread " << i << " row " << r;
        max_sequences = std::max(max_sequences, stats[size_t(i)].max_sequences);
    }
    const auto totals = scheduler.totals();
    EXPECT_GT(totals.chunked_calls, 0u) << "the 8-row budget cuts the longer prompts into chunks";
    EXPECT_EQ(totals.rows, [&] {
        uint64_t n = 0;
        for (const auto& r : alone) n += r.prompt.size() + r.decode.size();
        return n;
    }());
    // With six threads joining at once some steps are shared (not asserted beyond one: the
    // threads' arrival is up to the OS).
    EXPECT_GE(max_sequences, 1u);
}

TEST(StepScheduler, a_cancelled_call_leaves_its_block_as_it_was) {
    Backend& b = engine().backend();
    const int vocab = b.config().vocab_size;
    StepScheduler scheduler(b, StepSchedulerOptions{.max_step_tokens = 4});
    auto block = b.allocate_kv(64);
    b.forward(random_ids(5, 8, vocab), KvView{nullptr, 0, block.get()}, {});
    std::atomic<bool> cancel{true};
    EXPECT_THROW(scheduled(scheduler, random_ids(40, 9, vocab), KvView{nullptr, 0, block.get()}, {}, &cancel), Cancelled);
    EXPECT_EQ(block->n_tokens(), 5);
    // a bad request is refused before it joins a step
    std::vector<token_id> bad{0, vocab};
    EXPECT_THROW(scheduled(scheduler, bad, KvView{nullptr, 0, block.get()}, {}), std::runtime_error);
    EXPECT_EQ(block->n_tokens(), 5);
    // so is logits storage of the wrong size
    const int row = 0;
    std::vector<float> short_storage(size_t(vocab) - 1);
    EXPECT_THROW(scheduler.forward(random_ids(2, 9, vocab), KvView{nullptr, 0, block.get()}, std::span<const int>(&row, 1),
                                   short_storage),
                 std::runtime_error);
    EXPECT_EQ(block->n_tokens(), 5);
    cancel = false;
    scheduled(scheduler, random_ids(40, 9, vocab), KvView{nullptr, 0, block.get()}, {}, &cancel);
    EXPECT_EQ(block->n_tokens(), 45);
}

// Logit rows in any order, repeated, and cut across chunks (the step writes consecutive ones in
// place and stages the others): each == the same rows from the backend alone.
TEST(StepScheduler, logit_rows_in_any_order_land_in_their_slots) {
    Backend& b = engine().backend();
    const int vocab = b.config().vocab_size;
    const auto ids = random_ids(11, 15, vocab);
    const std::vector<int> rows{9, 2, 3, 3, 10, 0, 5};
    auto alone = b.allocate_kv(int(ids.size()));
    const auto expected = b.forward(ids, KvView{nullptr, 0, alone.get()}, rows);
    StepScheduler scheduler(b, StepSchedulerOptions{.max_step_tokens = 4});
    auto block = b.allocate_kv(int(ids.size()));
    const auto got = scheduled(scheduler, ids, KvView{nullptr, 0, block.get()}, rows);
    EXPECT_TRUE(bits_equal(got, expected));
    EXPECT_GT(scheduler.totals().chunked_calls, 0u);
}

// Greedy tokens instead of logits (SequenceRows::argmax), through the same chunks and stagings:
// each the first maximum of that row's logits from the backend alone, with the logits coming back
// too or not, and a call's token storage of the wrong size refused before it joins a step.
TEST(StepScheduler, greedy_tokens_land_in_their_slots_through_chunked_steps) {
    Backend& b = engine().backend();
    const int vocab = b.config().vocab_size;
    const auto ids = random_ids(11, 16, vocab);
    const std::vector<int> rows{9, 2, 3, 3, 10, 0, 5};
    auto alone = b.allocate_kv(int(ids.size()));
    const auto expected = b.forward(ids, KvView{nullptr, 0, alone.get()}, rows);
    StepScheduler scheduler(b, StepSchedulerOptions{.max_step_tokens = 4});
    for (const bool with_logits : {true, false}) {
        auto block = b.allocate_kv(int(ids.size()));
        std::vector<float> logits(with_logits ? rows.size() * size_t(vocab) : 0);
        std::vector<token_id> tokens(rows.size(), -1);
        scheduler.forward(ids, KvView{nullptr, 0, block.get()}, rows, logits, nullptr, nullptr, CallKind::later,
                          tokens);
        for (size_t j = 0; j < rows.size(); ++j)
            EXPECT_EQ(tokens[j], km::argmax_row(expected.data() + j * size_t(vocab), vocab))
                << "row " << rows[j] << (with_logits ? " (logits too)" : " (tokens only)");
        if (with_logits) {
            EXPECT_TRUE(bits_equal(logits, expected));
        }
        EXPECT_EQ(block->n_tokens(), int(ids.size()));
    }
    EXPECT_GT(scheduler.totals().chunked_calls, 0u);
    auto block = b.allocate_kv(int(ids.size()));
    std::vector<float> none;
    std::vector<token_id> short_ids(rows.size() - 1);
    EXPECT_THROW(scheduler.forward(ids, KvView{nullptr, 0, block.get()}, rows, none, nullptr, nullptr, CallKind::later,
                                   short_ids),
                 std::runtime_error);
    EXPECT_EQ(block->n_tokens(), 0);
}

// ---- first-token priority ----------------------------------------------------------------------

// Runs the real backend's steps, records each step's sequences (their row counts, in the step's
// order) and holds the steps listed in `hold` at their start until the test lets them go: calls
// line up behind a held step, so what the scheduler does with them is seen exactly.
class GatedBackend final : public Backend {
public:
    GatedBackend(Backend& inner, std::set<size_t> hold) : inner_(inner), hold_(std::move(hold)) {}
    std::string name() const override { return inner_.name(); }
    std::string numerics_id() const override { return inner_.numerics_id(); }
    const ModelConfig& config() const override { return inner_.config(); }
    KvDType kv_dtype() const override { return inner_.kv_dtype(); }
    std::unique_ptr<KvBlock> allocate_kv(int capacity) override { return inner_.allocate_kv(capacity); }
    std::vector<float> forward(std::span<const token_id> tokens, const KvView& kv, std::span<const int> rows,
                               const std::atomic<bool>* cancel) override {
        return inner_.forward(tokens, kv, rows, cancel);
    }
    void export_kv(const KvBlock& block, int n, std::span<std::byte> out) const override {
        inner_.export_kv(block, n, out);
    }
    std::unique_ptr<KvBlock> import_kv(std::span<const std::byte> data, int n, int capacity, int reserve) override {
        return inner_.import_kv(data, n, capacity, reserve);
    }
    void forward_batch(std::span<const SequenceRows> seqs, const std::atomic<bool>* cancel) override {
        {
            std::unique_lock lock(mutex_);
            std::vector<size_t> rows;
            for (const auto& s : seqs) rows.push_back(s.tokens.size());
            steps_.push_back(std::move(rows));
            const size_t index = steps_.size() - 1;
            cv_.notify_all();
            cv_.wait(lock, [&] { return !hold_.contains(index); });
        }
        inner_.forward_batch(seqs, cancel);
    }
    void wait_for_step(size_t index) {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return steps_.size() > index; });
    }
    void release(size_t index) {
        std::lock_guard lock(mutex_);
        hold_.erase(index);
        cv_.notify_all();
    }
    std::vector<std::vector<size_t>> steps() const {
        std::lock_guard lock(mutex_);
        return steps_;
    }

private:
    Backend& inner_;
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    std::set<size_t> hold_;
    std::vector<std::vector<size_t>> steps_;
};

// Waits (bounded) until `n` calls wait in the scheduler.
bool calls_waiting(const StepScheduler& s, size_t n) {
    for (int i = 0; i < 20000; ++i) {
        if (s.totals().waiting == n) return true;
        std::this_thread::sleep_for(std::chrono::microseconds(250));
    }
    return false;
}

// Forward calls on threads of their own through one scheduler, as requests make them: sequence i
// runs tokens[i] over the 20 positions of `prefix` and its own suffix block, every row's logits
// into got[i]. join() before the end of the scope (a joinable thread left behind terminates).
class ScheduledCalls {
public:
    ScheduledCalls(StepScheduler& s, const KvBlock& prefix, const std::vector<std::vector<token_id>>& tokens,
                   std::vector<std::unique_ptr<KvBlock>> blocks, int vocab)
        : got(tokens.size()), s_(s), prefix_(prefix), tokens_(tokens), blocks_(std::move(blocks)), vocab_(vocab) {}
    void start(size_t i, CallKind kind) {
        threads_.emplace_back([this, i, kind] {
            const auto rows = all_rows(tokens_[i].size());
            got[i].resize(rows.size() * size_t(vocab_));
            s_.forward(tokens_[i], KvView{&prefix_, 20, blocks_[i].get()}, rows, got[i], nullptr, nullptr, kind);
        });
    }
    void join() {
        for (auto& t : threads_) t.join();
    }
    std::vector<std::vector<float>> got;

private:
    StepScheduler& s_;
    const KvBlock& prefix_;
    const std::vector<std::vector<token_id>>& tokens_;
    std::vector<std::unique_ptr<KvBlock>> blocks_;
    int vocab_;
    std::vector<std::thread> threads_;
};

// Three replies decoding over one group when two requests' first-token prefills arrive: the first
// runs alone, ahead of the decode rows; the second, arriving while it runs, shares the next step
// with the decode rows (they are passed over at most once); a first-token prefill longer than
// first_token_rows never goes first. With first_token_rows = 0 every call shares steps by least
// left first. Every call's logits == the same call alone.
TEST(StepScheduler, short_first_token_prefills_run_ahead_of_decode_rows_once) {
    Backend& b = engine().backend();
    const int vocab = b.config().vocab_size;
    const auto group = random_ids(20, 3, vocab);
    auto prefix = prefix_block(b, group);
    // Sequences: 0 holds the first step; 1-3 decode one token each; 4 and 5 are first-token
    // prefills of 5 and 3 rows; 6 is a first-token prefill of 12 rows (over first_token_rows = 8).
    const std::vector<size_t> lengths{1, 1, 1, 1, 5, 3, 12};
    const std::vector<CallKind> kinds{CallKind::later,      CallKind::later,       CallKind::later,
                                      CallKind::later,      CallKind::first_token, CallKind::first_token,
                                      CallKind::first_token};
    auto make_suffix = [&](size_t i) {  // each sequence's private suffix: 4 tokens already there
        auto block = b.allocate_kv(32);
        b.forward(random_ids(4, uint32_t(60 + i), vocab), KvView{prefix.get(), 20, block.get()}, {});
        return block;
    };
    std::vector<std::vector<token_id>> tokens;
    std::vector<std::vector<float>> alone;
    for (size_t i = 0; i < lengths.size(); ++i) {
        tokens.push_back(random_ids(lengths[i], uint32_t(80 + i), vocab));
        auto block = make_suffix(i);
        alone.push_back(b.forward(tokens[i], KvView{prefix.get(), 20, block.get()}, all_rows(lengths[i])));
    }

    for (const int first_token_rows : {8, 0}) {
        SCOPED_TRACE("first_token_rows " + std::to_string(first_token_rows));
        GatedBackend gated(b, {0, 1});
        StepScheduler scheduler(gated,
                                StepSchedulerOptions{.max_step_tokens = 64, .first_token_rows = first_token_rows});
        std::vector<std::unique_ptr<KvBlock>> blocks;
        for (size_t i = 0; i < lengths.size(); ++i) blocks.push_back(make_suffix(i));
        ScheduledCalls calls(scheduler, *prefix, tokens, std::move(blocks), vocab);
        calls.start(0, kinds[0]);
        gated.wait_for_step(0);  // step 0 runs sequence 0 alone and is held
        for (size_t i : {1, 2, 3, 4, 6}) calls.start(i, kinds[i]);
        ASSERT_TRUE(calls_waiting(scheduler, 6));
        gated.release(0);
        gated.wait_for_step(1);  // step 1 chosen from 1, 2, 3, 4, 6, held
        calls.start(5, kinds[5]);
        ASSERT_TRUE(calls_waiting(scheduler, 6));  // the five of step 1 (still running) and 5
        gated.release(1);
        calls.join();

        for (size_t i = 0; i < lengths.size(); ++i) EXPECT_TRUE(bits_equal(calls.got[i], alone[i])) << "sequence " << i;
        const auto steps = gated.steps();
        if (first_token_rows > 0) {
            // 0 alone; 4 alone (5 rows), ahead of the decode rows and of 6 (12 rows); then the
            // decode rows, passed over once already, with 5 (3 rows) and 6, least left first
            const std::vector<std::vector<size_t>> expected{{1}, {5}, {1, 1, 1, 3, 12}};
            EXPECT_EQ(steps, expected);
            EXPECT_EQ(scheduler.totals().first_token_steps, 1u);
        } else {
            // least left first only: 5 arrives after step 1 was chosen and runs alone after it
            const std::vector<std::vector<size_t>> expected{{1}, {1, 1, 1, 5, 12}, {3}};
            EXPECT_EQ(steps, expected);
            EXPECT_EQ(scheduler.totals().first_token_steps, 0u);
        }
    }
}

// A burst of first-token prefills (four of 3 rows, first_token_step_rows = 8): at most 8 of their
// rows per step, whole calls in arrival order, the others wait for the next steps. Alone (nothing
// else waiting) they run two by two; beside two decoding replies the first two go ahead of the
// decode rows and the last two share the next step with them. With first_token_step_rows = 0 (no
// cap) the four go ahead together; with first_token_rows = 0 (no priority) all six share one step.
// Every call's logits == the same call alone.
TEST(StepScheduler, a_burst_of_first_token_prefills_runs_a_few_rows_at_a_time) {
    Backend& b = engine().backend();
    const int vocab = b.config().vocab_size;
    const auto group = random_ids(20, 4, vocab);
    auto prefix = prefix_block(b, group);
    auto make_suffix = [&](size_t i) {
        auto block = b.allocate_kv(32);
        b.forward(random_ids(4, uint32_t(160 + i), vocab), KvView{prefix.get(), 20, block.get()}, {});
        return block;
    };
    struct Case {
        int first_token_rows, first_token_step_rows;
        std::vector<size_t> waiting;  // after the held step 0 (sequence 0), arriving in this order
        std::vector<std::vector<size_t>> expected;
    };
    // Sequences: 0 holds the first step; 1 and 2 decode one token each; 3-6 are first-token
    // prefills of 3 rows.
    const std::vector<size_t> lengths{1, 1, 1, 3, 3, 3, 3};
    const std::vector<Case> cases{
        {8, 8, {3, 4, 5, 6}, {{1}, {3, 3}, {3, 3}}},
        {8, 8, {1, 3, 4, 2, 5, 6}, {{1}, {3, 3}, {1, 1, 3, 3}}},
        {8, 0, {1, 3, 4, 2, 5, 6}, {{1}, {3, 3, 3, 3}, {1, 1}}},
        {0, 8, {1, 3, 4, 2, 5, 6}, {{1}, {1, 1, 3, 3, 3, 3}}},
    };
    std::vector<std::vector<token_id>> tokens;
    std::vector<std::vector<float>> alone;
    for (size_t i = 0; i < lengths.size(); ++i) {
        tokens.push_back(random_ids(lengths[i], uint32_t(180 + i), vocab));
        auto block = make_suffix(i);
        alone.push_back(b.forward(tokens[i], KvView{prefix.get(), 20, block.get()}, all_rows(lengths[i])));
    }
    for (const Case& c : cases) {
        SCOPED_TRACE("first_token_rows " + std::to_string(c.first_token_rows) + ", first_token_step_rows " +
                     std::to_string(c.first_token_step_rows) + ", " + std::to_string(c.waiting.size()) +
                     " calls waiting");
        GatedBackend gated(b, {0});
        StepScheduler scheduler(gated, StepSchedulerOptions{.max_step_tokens = 64,
                                                            .first_token_rows = c.first_token_rows,
                                                            .first_token_step_rows = c.first_token_step_rows});
        std::vector<std::unique_ptr<KvBlock>> blocks;
        for (size_t i = 0; i < lengths.size(); ++i) blocks.push_back(make_suffix(i));
        ScheduledCalls calls(scheduler, *prefix, tokens, std::move(blocks), vocab);
        const auto kind = [](size_t i) { return i >= 3 ? CallKind::first_token : CallKind::later; };
        calls.start(0, kind(0));
        gated.wait_for_step(0);                          // step 0 runs sequence 0 alone and is held
        for (size_t n = 0; n < c.waiting.size(); ++n) {  // one at a time: a known arrival order
            calls.start(c.waiting[n], kind(c.waiting[n]));
            ASSERT_TRUE(calls_waiting(scheduler, n + 2));
        }
        gated.release(0);
        calls.join();

        EXPECT_EQ(gated.steps(), c.expected);
        for (size_t i : c.waiting) EXPECT_TRUE(bits_equal(calls.got[i], alone[i])) << "sequence " << i;
        EXPECT_TRUE(bits_equal(calls.got[0], alone[0]));
    }
}

// ---- the engine: requests on several threads ------------------------------------------------

ToolSet tools_from(const std::string& file, size_t first, size_t n) {
    auto arr = nlohmann::ordered_json::parse(test::read_file(test::source_dir() / "resources" / "toolsets" / file));
    nlohmann::ordered_json subset = nlohmann::ordered_json::array();
    for (size_t i = first; i < first + n && i < arr.size(); ++i) subset.push_back(arr[i]);
    return ToolSet::from_json_text(subset.dump(), file);
}

struct Request {
    ChatRequest chat;
    QueryOptions options;
};

// Requests of random lengths over three tool sets (two share a group), one of them a second turn
// of another's conversation; all run at once on a parallel engine, each == itself alone in full
// mode on an ordinary engine, logits included.
TEST(ParallelEngine, every_concurrent_reply_equals_its_request_alone) {
    std::mt19937 rng(11);
    const ToolSet sets[] = {tools_from("tools_20.json", 0, 3), tools_from("tools_20.json", 3, 2), tools_from("tools_20.json", 0, 3)};
    const char* questions[] = {"What's the weather in Oslo?", "Book a table for two tonight", "hi",
                               "Convert 100 USD to EUR and tell me the rate, please, with some detail", "Who are you?"};
    std::vector<Request> requests;
    for (int i = 0; i < 8; ++i) {
        Request r;
        r.chat.tools = sets[i % 3];
        r.chat.system_prompt = "You are a helpful assistant.";
        r.chat.messages.push_back(ChatMessage::user(questions[size_t(rng()) % 5]));
        if (i == 7) {
            r.chat.messages = requests[1].chat.messages;
            r.chat.messages.push_back(ChatMessage::assistant("Sure."));
            r.chat.messages.push_back(ChatMessage::user("And tomorrow?"));
            r.chat.tools = requests[1].chat.tools;
        }
        r.options.max_new_tokens = 4 + int(rng() % 9);
        r.options.ignore_eos = true;
        r.options.keep_logits = true;
        requests.push_back(std::move(r));
    }
    std::vector<QueryResult> expected;
    for (const auto& r : requests) {
        QueryOptions full = r.options;
        full.mode = QueryMode::full;
        expected.push_back(engine().chat(r.chat, full));
    }

    Engine& parallel = engine(4, 16);  // a small budget: prefills are chunked around decode rows
    std::vector<QueryResult> got(requests.size());
    std::vector<std::thread> threads;
    std::atomic<int> next{0};
    // A fifth thread runs long requests that are cancelled after a few tokens, arriving at random
    // moments among the others: each stops with stop_reason cancelled, the others are unaffected.
    std::atomic<bool> others_done{false};
    int n_cancelled = 0;
    threads.emplace_back([&] {
        std::mt19937 arrivals(5);
        for (int k = 0; k < 3 && !others_done; ++k) {
            std::this_thread::sleep_for(std::chrono::milliseconds(arrivals() % 40));
            CancelToken token;
            parallel.begin_request(token);
            QueryOptions o;
            o.max_new_tokens = 500;
            o.ignore_eos = true;
            const auto r = parallel.chat(ChatRequest{sets[k % 3], "Cancelled.", {ChatMessage::user("go on and on")}, {}}, o,
                                         [&](const TokenEvent& ev) { if (ev.index == 3) token.cancel(); });
            parallel.end_request();
            EXPECT_EQ(r.stop_reason, StopReason::cancelled);
            EXPECT_LT(r.tokens.size(), 10u);
            ++n_cancelled;
        }
    });
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            std::mt19937 arrivals{static_cast<uint32_t>(t)};
            for (int i; (i = next++) < int(requests.size());) {
                std::this_thread::sleep_for(std::chrono::milliseconds(arrivals() % 30));  // random arrival times
                parallel.begin_request(CancelToken());
                got[size_t(i)] = parallel.chat(requests[size_t(i)].chat, requests[size_t(i)].options);
                parallel.end_request();
            }
        });
    for (size_t t = 1; t < threads.size(); ++t) threads[t].join();
    others_done = true;
    threads[0].join();
    EXPECT_GE(n_cancelled, 1);
    size_t shared_steps = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
        ASSERT_EQ(got[i].tokens, expected[i].tokens) << "request " << i;
        ASSERT_EQ(got[i].step_logits.size(), expected[i].step_logits.size()) << "request " << i;
        for (size_t s = 0; s < expected[i].step_logits.size(); ++s)
            EXPECT_TRUE(bits_equal(got[i].step_logits[s], expected[i].step_logits[s])) << "request " << i << " step " << s;
        EXPECT_GT(got[i].batch.steps, 0u) << "request " << i;
        if (got[i].batch.max_sequences > 1) ++shared_steps;
    }
    // Which requests overlap is up to the OS; that four threads never overlapped at all would
    // mean the scheduler serialises them.
    EXPECT_GT(shared_steps, 0u) << "no request ever shared a step with another";

    // The same group missed by four requests at once is compiled once.
    const ToolSet fresh = tools_from("tools_20.json", 8, 4);
    const auto before = parallel.cache().list().size();
    threads.clear();
    std::vector<QueryResult> same(4);
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            ChatRequest c{fresh, "Another system prompt.", {ChatMessage::user("hello")}, {}};
            QueryOptions o;
            o.max_new_tokens = 2;
            same[size_t(t)] = parallel.chat(c, o);
        });
    for (auto& t : threads) t.join();
    EXPECT_EQ(parallel.cache().list().size(), before + 1);
    int compiled = 0;
    for (const auto& r : same) compiled += r.tier == Tier::miss ? 1 : 0;
    EXPECT_EQ(compiled, 1) << "one request compiles the group, the others link it";
}

}  // namespace
