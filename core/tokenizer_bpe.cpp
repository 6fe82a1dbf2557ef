// The BPE model: one pre-token in, ids out, exactly as HF `tokenizers` (models/bpe) merges.
#include "core/tokenizer_impl.h"

#include <mutex>
#include <queue>

namespace cc::tok {

bool WordCache::get(std::string_view word, std::vector<token_id>& out) const {
    std::shared_lock lock(mutex_);
    auto it = map_.find(word);
    if (it == map_.end()) return false;
    out.insert(out.end(), it->second.begin(), it->second.end());
    return true;
}

void WordCache::put(std::string_view word, const std::vector<token_id>& ids) const {
    if (word.size() > k_max_word_bytes) return;
    std::unique_lock lock(mutex_);
    if (map_.size() >= k_max_entries) return;
    map_.try_emplace(std::string(word), ids);
}

void BpeModel::tokenize(std::string_view word, std::vector<token_id>& out) const {
    if (word.empty()) return;
    if (ignore_merges) {
        // Llama 3: a pre-token that is itself a vocab entry is emitted whole, even if the merges
        // would have split it differently.
        if (auto it = vocab.find(word); it != vocab.end()) {
            out.push_back(it->second);
            return;
        }
    }
    if (cache.get(word, out)) return;
    std::vector<token_id> ids;
    merge_word(word, ids);
    cache.put(word, ids);
    out.insert(out.end(), ids.begin(), ids.end());
}

namespace {

struct Symbol {
    token_id id;
    int32_t prev;  // index of the previous live symbol, -1 at the start
    int32_t next;  // index of the next live symbol, -1 at the end
    bool live;
};

struct QueuedMerge {
    uint32_t rank;
    int32_t pos;
    token_id new_id;
    // std::priority_queue is a max-heap: "greater" means lower priority, so the lowest rank, then
    // the leftmost position, is popped first (HF's order).
    bool operator<(const QueuedMerge& other) const {
        if (rank != other.rank) return rank > other.rank;
        return pos > other.pos;
    }
};

}  // namespace

void BpeModel::merge_word(std::string_view word, std::vector<token_id>& out) const {
    // 1. Initial symbols: one per character; unknown characters become <0xNN> byte tokens
    //    (byte_fallback) or the unk token (consecutive ones fused with fuse_unk), or vanish
    //    when there is no unk token, as in HF.
    std::vector<Symbol> symbols;
    symbols.reserve(word.size());
    token_id pending_unk = -1;  // -1: none (an int, not std::optional: GCC 12 warns falsely on it)
    auto push = [&](token_id id) {
        symbols.push_back(Symbol{id, static_cast<int32_t>(symbols.size()) - 1, -1, true});
    };
    size_t i = 0;
    while (i < word.size()) {
        char32_t cp = 0;
        const size_t len = utf8_decode(word, i, cp);
        std::optional<token_id> id;
        if (cp < single_char_ids.size()) {
            if (single_char_ids[cp] >= 0) id = single_char_ids[cp];
        } else if (auto it = vocab.find(word.substr(i, len)); it != vocab.end()) {
            id = it->second;
        }
        if (id) {
            if (pending_unk >= 0) {
                push(pending_unk);
                pending_unk = -1;
            }
            push(*id);
        } else if (byte_fallback && has_all_byte_tokens) {
            // HF does not flush a pending unk here; with a complete byte table none can be pending.
            for (size_t k = 0; k < len; ++k) push(byte_fallback_ids[static_cast<unsigned char>(word[i + k])]);
        } else if (unk_id) {
            if (pending_unk >= 0 && !fuse_unk) push(pending_unk);
            pending_unk = *unk_id;
        }
        i += len;
    }
    if (pending_unk >= 0) push(pending_unk);
    const auto n_symbols = static_cast<int32_t>(symbols.size());
    for (int32_t k = 0; k < n_symbols; ++k) symbols[k].next = k + 1 < n_symbols ? k + 1 : -1;

    // 2. Merge by rank with a priority queue; stale entries are detected when popped.
    auto find_merge = [&](token_id left, token_id right) -> const Merge* {
        auto it = merges.find(pair_key(left, right));
        return it == merges.end() ? nullptr : &it->second;
    };
    std::priority_queue<QueuedMerge> queue;
    for (int32_t k = 0; k + 1 < n_symbols; ++k) {
        if (const Merge* m = find_merge(symbols[k].id, symbols[k + 1].id)) queue.push({m->rank, k, m->new_id});
    }
    while (!queue.empty()) {
        const QueuedMerge top = queue.top();
        queue.pop();
        Symbol& left = symbols[top.pos];
        if (!left.live || left.next < 0) continue;
        Symbol& right = symbols[left.next];
        const Merge* current = find_merge(left.id, right.id);
        if (current == nullptr || current->new_id != top.new_id) continue;  // stale entry
        left.id = top.new_id;
        right.live = false;
        left.next = right.next;
        if (right.next >= 0) symbols[right.next].prev = top.pos;
        if (left.prev >= 0) {
            if (const Merge* m = find_merge(symbols[left.prev].id, left.id)) queue.push({m->rank, left.prev, m->new_id});
        }
        if (left.next >= 0) {
            if (const Merge* m = find_merge(left.id, symbols[left.next].id)) queue.push({m->rank, top.pos, m->new_id});
        }
    }
    for (const Symbol& s : symbols) {
        if (s.live) out.push_back(s.id);
    }
}

}  // namespace cc::tok
