// The BPE model: one pre-token in, ids out, exactly as HF `tokenizers` (models/bpe) merges.
#include "core/text/tokenizer_impl.h"

#include <mutex>
#include <queue>

namespace cc::tok {

namespace {
// splitmix64's finalizer: spreads packed id pairs over the table.
uint64_t mix(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}
size_t slots_for(size_t n_entries) {
    size_t n = 16;
    while (n < n_entries * 2) n *= 2;
    return n;
}
}  // namespace

void VocabMap::reserve(size_t n_entries) {
    keys_.reserve(n_entries);
    ids_.reserve(n_entries);
    if (slots_for(n_entries) > slots_.size()) rehash(slots_for(n_entries));
}

void VocabMap::rehash(size_t n_slots) {
    std::vector<Slot> slots(n_slots);
    const size_t mask = n_slots - 1;
    for (const Slot& s : slots_) {
        if (s.index_plus_1 == 0) continue;
        size_t i = s.hash & mask;
        while (slots[i].index_plus_1 != 0) i = (i + 1) & mask;
        slots[i] = s;
    }
    slots_.swap(slots);
}

void VocabMap::insert_or_assign(std::string key, token_id id) {
    if (slots_.size() < slots_for(keys_.size() + 1)) rehash(slots_for(keys_.size() + 1));
    const uint64_t hash = std::hash<std::string_view>{}(key);
    const size_t mask = slots_.size() - 1;
    size_t i = hash & mask;
    while (slots_[i].index_plus_1 != 0) {
        const uint32_t index = slots_[i].index_plus_1 - 1;
        if (slots_[i].hash == hash && keys_[index] == key) {
            ids_[index] = id;
            return;
        }
        i = (i + 1) & mask;
    }
    slots_[i] = Slot{hash, static_cast<uint32_t>(keys_.size() + 1)};
    keys_.push_back(std::move(key));
    ids_.push_back(id);
}

std::optional<token_id> VocabMap::find(std::string_view key) const {
    if (slots_.empty()) return std::nullopt;
    const uint64_t hash = std::hash<std::string_view>{}(key);
    const size_t mask = slots_.size() - 1;
    for (size_t i = hash & mask; slots_[i].index_plus_1 != 0; i = (i + 1) & mask) {
        const uint32_t index = slots_[i].index_plus_1 - 1;
        if (slots_[i].hash == hash && keys_[index] == key) return ids_[index];
    }
    return std::nullopt;
}

void MergeMap::reserve(size_t n_entries) {
    if (slots_for(n_entries) > slots_.size()) rehash(slots_for(n_entries));
}

void MergeMap::rehash(size_t n_slots) {
    std::vector<Slot> slots(n_slots);
    const size_t mask = n_slots - 1;
    for (const Slot& s : slots_) {
        if (s.key == k_empty) continue;
        size_t i = mix(s.key) & mask;
        while (slots[i].key != k_empty) i = (i + 1) & mask;
        slots[i] = s;
    }
    slots_.swap(slots);
}

void MergeMap::insert_or_assign(uint64_t key, Merge merge) {
    if (slots_.size() < slots_for(n_entries_ + 1)) rehash(slots_for(n_entries_ + 1));
    const size_t mask = slots_.size() - 1;
    size_t i = mix(key) & mask;
    while (slots_[i].key != k_empty && slots_[i].key != key) i = (i + 1) & mask;
    if (slots_[i].key == k_empty) ++n_entries_;
    slots_[i] = Slot{key, merge};
}

const Merge* MergeMap::find(uint64_t key) const {
    if (slots_.empty()) return nullptr;
    const size_t mask = slots_.size() - 1;
    for (size_t i = mix(key) & mask; slots_[i].key != k_empty; i = (i + 1) & mask) {
        if (slots_[i].key == key) return &slots_[i].merge;
    }
    return nullptr;
}

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
        if (auto id = vocab.find(word)) {
            out.push_back(*id);
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
    // 1. Initial symbols: one per character. A character not in the vocab becomes its <0xNN>
    //    byte tokens (byte_fallback, when the vocab has all of its bytes), else the unk token
    //    (consecutive ones fused with fuse_unk), else vanishes (no unk token) -- as in the
    //    tokenizers library's BPE::merge_word, including its order: byte tokens do not flush a
    //    pending unk, so "unknown, then byte-encoded" gives [bytes..., unk].
    std::vector<Symbol> symbols;
    symbols.reserve(word.size());
    token_id pending_unk = -1;  // -1: none (an int, not std::optional: GCC 12 warns falsely on it)
    auto push = [&](token_id id) {
        symbols.push_back(Symbol{id, static_cast<int32_t>(symbols.size()) - 1, -1, true});
    };
    auto has_byte_tokens = [&](size_t at, size_t len) {
        for (size_t k = 0; k < len; ++k)
            if (byte_fallback_ids[static_cast<unsigned char>(word[at + k])] < 0) return false;
        return true;
    };
    size_t i = 0;
    while (i < word.size()) {
        char32_t cp = 0;
        const size_t len = utf8_decode(word, i, cp);
        std::optional<token_id> id;
        if (cp < single_char_ids.size()) {
            if (single_char_ids[cp] >= 0) id = single_char_ids[cp];
        } else {
            id = vocab.find(word.substr(i, len));
        }
        if (id) {
            if (pending_unk >= 0) {
                push(pending_unk);
                pending_unk = -1;
            }
            push(*id);
        } else if (byte_fallback && has_byte_tokens(i, len)) {
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
        return merges.find(pair_key(left, right));
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
