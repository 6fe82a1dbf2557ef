#include "core/engine/miss_reason.h"

#include "core/text/token_prefix.h"

#include <algorithm>

namespace cc {
namespace {

// Without the stored texts: added and removed by name (canonical order kept).
ToolSetDiff diff_by_name(const std::vector<std::string>& stored, const std::vector<std::string>& wanted) {
    ToolSetDiff d;
    for (const auto& n : wanted)
        if (std::find(stored.begin(), stored.end(), n) == stored.end()) d.added.push_back(n);
    for (const auto& n : stored) {
        if (std::find(wanted.begin(), wanted.end(), n) == wanted.end()) d.removed.push_back(n);
        else ++d.n_unchanged;  // as far as names tell
    }
    return d;
}

}  // namespace

MissReason explain_miss(std::span<const GroupStore::StoredGroup> stored, const MissQuery& query, size_t max_nearest) {
    MissReason reason;
    std::vector<NearestGroup> all;
    for (const auto& s : stored) {
        const GroupMeta& g = s.meta;
        if (g.group_key == query.group_key) continue;
        ++reason.n_stored;
        NearestGroup n;
        n.group_key = g.group_key;
        n.tier = s.tier;
        n.n_tools = g.tool_names.size();
        n.prefix_tokens = g.prefix_ids.size();
        n.reusable_tokens = common_prefix_tokens(g.prefix_ids, query.prefix_ids);
        n.system_prompt_changed = g.system_prompt_sha256 != query.system_prompt_sha256;
        n.tools_compared = !g.tool_texts.empty() || g.tool_names.empty();
        if (n.tools_compared) {
            try {
                n.tools = diff_tool_sets(g.tool_texts, query.tool_texts, "group " + g.group_key);
            } catch (const std::exception&) {
                n.tools_compared = false;  // a header whose texts do not parse: fall back on names
            }
        }
        if (!n.tools_compared) n.tools = diff_by_name(g.tool_names, query.tool_names);
        all.push_back(std::move(n));
    }
    std::stable_sort(all.begin(), all.end(), [](const NearestGroup& a, const NearestGroup& b) {
        if (a.n_differences() != b.n_differences()) return a.n_differences() < b.n_differences();
        return a.reusable_tokens > b.reusable_tokens;
    });
    if (all.size() > max_nearest) all.resize(max_nearest);
    reason.nearest = std::move(all);
    return reason;
}

MissReason explain_miss(const GroupStore& store, const GroupMeta& expected, size_t max_nearest) {
    const auto stored = store.comparable(expected);
    MissQuery q;
    q.group_key = expected.group_key;
    q.tool_texts = expected.tool_texts;
    q.tool_names = expected.tool_names;
    q.system_prompt_sha256 = expected.system_prompt_sha256;
    q.prefix_ids = expected.prefix_ids;
    return explain_miss(stored, q, max_nearest);
}

std::string miss_reason_text(const MissReason& reason, size_t prefix_tokens) {
    if (reason.nearest.empty()) return "no stored group for this model, chat format and numerics";
    std::string out;
    for (const auto& n : reason.nearest) {
        if (!out.empty()) out += "\n";
        out += "nearest " + n.group_key.substr(0, 8) + " (" + tier_name(n.tier) + ", " + std::to_string(n.n_tools) + " tools): ";
        std::string what;
        auto add = [&](const std::string& s) { what += (what.empty() ? "" : "; ") + s; };
        if (!n.tools.empty()) add(tool_set_diff_text(n.tools));
        if (!n.tools_compared) add("tool texts not recorded (compared by name)");
        if (n.system_prompt_changed) add("system prompt changed");
        if (what.empty()) add("same tools and system prompt");
        out += what + "; " + std::to_string(n.reusable_tokens) + " of " + std::to_string(prefix_tokens) +
               " prefix tokens reusable";
    }
    return out;
}

}  // namespace cc
