#include "core/engine/result_json.h"

#include <cmath>

namespace cc {

using nlohmann::ordered_json;

ordered_json to_json(const Timings& t) {
    return ordered_json{{"tokenize_ms", t.tokenize_ms},   {"lookup_ms", t.lookup_ms},
                        {"disk_load_ms", t.disk_load_ms}, {"remote_load_ms", t.remote_load_ms},
                        {"upload_ms", t.upload_ms},
                        {"conversation_link_ms", t.conversation_link_ms},
                        {"link_ms", t.link_ms},           {"compile_ms", t.compile_ms},
                        {"prefill_ms", t.prefill_ms},     {"ttft_ms", t.ttft_ms},
                        {"decode_ms", t.decode_ms},       {"total_ms", t.total_ms},
                        {"prefill_tok_s", t.prefill_tok_s}, {"decode_tok_s", t.decode_tok_s},
                        {"disk_load_gb_s", t.disk_load_gb_s}, {"remote_load_gb_s", t.remote_load_gb_s},
                        {"upload_gb_s", t.upload_gb_s}};
}

ordered_json to_json(const ToolSetDiff& d) {
    ordered_json changed = ordered_json::array();
    for (const auto& c : d.changed) {
        ordered_json j{{"name", c.name}};
        if (!c.renamed_to.empty()) j["renamed_to"] = c.renamed_to;
        j["field"] = c.field;
        j["change"] = c.change;
        changed.push_back(std::move(j));
    }
    return ordered_json{{"added", d.added}, {"removed", d.removed}, {"changed", std::move(changed)}};
}

ordered_json to_json(const MissReason& m, size_t prefix_tokens) {
    ordered_json nearest = ordered_json::array();
    for (const auto& n : m.nearest) {
        const ordered_json tools = to_json(n.tools);
        nearest.push_back(ordered_json{{"group_key", n.group_key},
                                       {"tier", tier_name(n.tier)},
                                       {"n_tools", n.n_tools},
                                       {"prefix_tokens", n.prefix_tokens},
                                       {"reusable_tokens", n.reusable_tokens},
                                       {"system_prompt_changed", n.system_prompt_changed},
                                       {"tools_added", tools["added"]},
                                       {"tools_removed", tools["removed"]},
                                       {"tools_changed", tools["changed"]},
                                       {"tools_compared", n.tools_compared}});
    }
    return ordered_json{{"n_stored", m.n_stored}, {"nearest", std::move(nearest)},
                        {"text", miss_reason_text(m, prefix_tokens)}};
}

ordered_json miss_reason_json(const std::optional<MissReason>& m, size_t prefix_tokens) {
    return m ? to_json(*m, prefix_tokens) : ordered_json(nullptr);
}

ordered_json to_json(const CompileResult& r) {
    ordered_json j{{"group_key", r.group_key},         {"tools_hash", r.tools_hash},
                   {"n_tools", r.n_tools},             {"tool_names", r.tool_names},
                   {"prefix_tokens", r.prefix_tokens}, {"cache_hit", r.cache_hit},
                   {"tier", tier_name(r.tier)},                   {"reused_tokens", r.reused_tokens},
                   {"compile_ms", r.compile_ms},       {"persist_ms", r.persist_ms},
                   {"persisted", r.persisted},         {"kv_bytes", r.kv_bytes}};
    j["miss_reason"] = miss_reason_json(r.miss_reason, r.prefix_tokens);
    if (!r.problem.empty()) j["problem"] = r.problem;
    if (!r.persist_error.empty()) j["persist_error"] = r.persist_error;
    return j;
}

ordered_json tool_call_json(const std::optional<ToolCall>& call) {
    if (!call) return nullptr;
    ordered_json j{{"name", call->name}, {"arguments", call->arguments}};
    if (!call->arguments_valid) j["arguments_raw"] = call->raw;
    return j;
}

ordered_json to_json(const ChatToolCall& c) {
    return ordered_json{{"id", c.id}, {"name", c.name}, {"arguments", c.arguments}};
}

ordered_json to_json(const ParsedReply& r) {
    ordered_json j{{"content", r.content}};
    j["reasoning_content"] = r.reasoning_content ? ordered_json(*r.reasoning_content) : ordered_json(nullptr);
    j["tool_calls"] = ordered_json::array();
    for (const auto& c : r.tool_calls) j["tool_calls"].push_back(to_json(c));
    j["tool_calls_valid"] = r.tool_calls_valid;
    return j;
}

ordered_json to_json(const QueryResult& r) {
    ordered_json j;
    j["mode"] = r.mode;
    j["text"] = r.text;
    j["tokens"] = r.tokens;
    j["tool_call"] = tool_call_json(r.tool_call);
    j["cache_hit"] = r.cache_hit;
    j["tier"] = tier_name(r.tier);
    j["group_key"] = r.group_key;
    j["prefix_tokens"] = r.prefix_tokens;
    j["suffix_tokens"] = r.suffix_tokens;
    j["generated_tokens"] = r.generated_tokens;
    j["forced_tokens"] = r.forced_tokens;  // of those, fed by the tool_choice constraint (not sampled)
    j["reused_tokens"] = r.reused_tokens;
    j["prompt_tokens"] = r.prompt_tokens;
    j["group_reused_tokens"] = r.group_reused_tokens;
    j["conversation_reused_tokens"] = r.conversation_reused_tokens;
    j["prefilled_tokens"] = r.prefilled_tokens;
    j["conversation_tier"] = tier_name(r.conversation_tier);
    j["diverged_at"] = r.diverged_at ? ordered_json(*r.diverged_at) : ordered_json(nullptr);
    j["miss_reason"] = miss_reason_json(r.miss_reason, r.prefix_tokens);
    if (r.reply) j["reply"] = to_json(*r.reply);
    if (!r.problem.empty()) j["problem"] = r.problem;
    j["stop_reason"] = stop_reason_name(r.stop_reason);
    j["timings"] = to_json(r.timings);
    if (r.identical) {
        j["identical"] = *r.identical;
        j["max_abs_logit_diff"] = r.max_abs_logit_diff;
        j["first_difference"] = r.first_difference ? ordered_json(*r.first_difference) : ordered_json(nullptr);
    }
    if (r.full) j["full"] = to_json(*r.full);
    return j;
}

ordered_json to_json(const ModelInfo& m) {
    const auto& c = m.config;
    ordered_json j{{"model", m.spec},
                   {"builtin", m.builtin},
                   {"synthetic_weights", m.synthetic_weights},
                   {"family", m.family},
                   {"fingerprint", m.fingerprint},
                   {"chat_format", m.chat_format.empty() ? ordered_json(nullptr) : ordered_json(m.chat_format)},
                   {"has_tokenizer", m.has_tokenizer},
                   {"backend", m.backend},
                   {"backend_reason", m.backend_reason},
                   {"numerics", m.numerics},
                   {"device", m.device},
                   {"threads", m.n_threads},
                   {"n_params", m.n_params},
                   {"weight_bytes", m.weight_bytes},
                   {"weights", m.weights},
                   {"matrix_bytes", m.matrix_bytes},
                   {"kv_bytes_per_token", m.kv_bytes_per_token},
                   {"load_ms", m.load_ms},
                   {"config", c.to_json()}};
    if (m.synthetic_weights) j["note"] = "built-in model: synthetic weights; timings and exactness are real, text is not";
    else if (m.builtin)
        j["note"] = "built-in model trained here for tool selection, not a general assistant: it picks the wrong tool "
                    "for about two requests in five and often invents argument values (resources/models/toolcaller/README.md)";
    return j;
}

ordered_json to_json(const GroupInfo& g) {
    return ordered_json{{"group_key", g.group_key},       {"tools_hash", g.tools_hash},
                        {"tool_names", g.tool_names},     {"n_tokens", g.n_tokens()},
                        {"kv_bytes", g.kv_bytes},         {"file_bytes", g.file_bytes},
                        {"tier", tier_name(g.tier)},
                        {"created_unix_ms", g.created_unix_ms}, {"last_used_unix_ms", g.last_used_unix_ms},
                        {"hits", g.hits},                 {"in_use", g.in_use}};
}

}  // namespace cc
