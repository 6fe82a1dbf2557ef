#include "core/engine/result_json.h"

#include <cmath>

namespace cc {

using nlohmann::ordered_json;

ordered_json to_json(const Timings& t) {
    return ordered_json{{"tokenize_ms", t.tokenize_ms},   {"lookup_ms", t.lookup_ms},
                        {"disk_load_ms", t.disk_load_ms}, {"upload_ms", t.upload_ms},
                        {"link_ms", t.link_ms},           {"compile_ms", t.compile_ms},
                        {"prefill_ms", t.prefill_ms},     {"ttft_ms", t.ttft_ms},
                        {"decode_ms", t.decode_ms},       {"total_ms", t.total_ms},
                        {"prefill_tok_s", t.prefill_tok_s}, {"decode_tok_s", t.decode_tok_s},
                        {"disk_load_gb_s", t.disk_load_gb_s}, {"upload_gb_s", t.upload_gb_s}};
}

ordered_json to_json(const CompileResult& r) {
    ordered_json j{{"group_key", r.group_key},         {"tools_hash", r.tools_hash},
                   {"n_tools", r.n_tools},             {"tool_names", r.tool_names},
                   {"prefix_tokens", r.prefix_tokens}, {"cache_hit", r.cache_hit},
                   {"tier", r.tier},                   {"reused_tokens", r.reused_tokens},
                   {"compile_ms", r.compile_ms},       {"persist_ms", r.persist_ms},
                   {"persisted", r.persisted},         {"kv_bytes", r.kv_bytes}};
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

ordered_json to_json(const QueryResult& r) {
    ordered_json j;
    j["mode"] = r.mode;
    j["text"] = r.text;
    j["tokens"] = r.tokens;
    j["tool_call"] = tool_call_json(r.tool_call);
    j["cache_hit"] = r.cache_hit;
    j["tier"] = r.tier;
    j["group_key"] = r.group_key;
    j["prefix_tokens"] = r.prefix_tokens;
    j["suffix_tokens"] = r.suffix_tokens;
    j["generated_tokens"] = r.generated_tokens;
    j["reused_tokens"] = r.reused_tokens;
    if (!r.problem.empty()) j["problem"] = r.problem;
    j["stop_reason"] = r.stop_reason;
    j["timings"] = to_json(r.timings);
    if (r.identical) {
        j["identical"] = *r.identical;
        j["max_abs_logit_diff"] = r.max_abs_logit_diff;
        j["first_difference"] = r.first_difference ? ordered_json(*r.first_difference) : ordered_json(nullptr);
    }
    if (r.nope) j["nope"] = to_json(*r.nope);
    if (r.full) j["full"] = to_json(*r.full);
    return j;
}

ordered_json to_json(const NopeReport& n) {
    // NaN (a cosine with an all-zero logit vector) has no JSON form: null
    auto num = [](double x) { return std::isfinite(x) ? ordered_json(x) : ordered_json(nullptr); };
    return ordered_json{{"n_tools", n.n_tools},
                        {"header_tokens", n.header_tokens},
                        {"tool_tokens", n.tool_tokens},
                        {"footer_tokens", n.footer_tokens},
                        {"composed_tokens", n.composed_tokens},
                        {"kv_dtype", n.kv_dtype},
                        {"rope_check_max_abs_diff", num(n.rope_check_max_abs_diff)},
                        {"rope_check_per_layer", n.rope_check_per_layer},
                        {"logit_cosine_first", num(n.logit_cosine_first)},
                        {"logit_cosine_mean", num(n.logit_cosine_mean)},
                        {"kl_first", num(n.kl_first)},
                        {"compared_steps", n.compared_steps},
                        {"top1_agreement", n.top1_agreement},
                        {"identical_tokens", n.identical_tokens},
                        {"identical_logits", n.identical_logits},
                        {"max_abs_logit_diff", n.max_abs_logit_diff},
                        {"first_difference", n.first_difference ? ordered_json(*n.first_difference) : ordered_json(nullptr)},
                        {"tool_name_match", n.tool_name_match},
                        {"build_ms", n.build_ms},
                        {"reused", n.reused}};
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
                   {"kv_bytes_per_token", m.kv_bytes_per_token},
                   {"load_ms", m.load_ms},
                   {"config", c.to_json()}};
    if (m.synthetic_weights) j["note"] = "built-in model: synthetic weights; timings and exactness are real, text is not";
    return j;
}

ordered_json to_json(const GroupInfo& g) {
    return ordered_json{{"group_key", g.group_key},       {"tools_hash", g.tools_hash},
                        {"tool_names", g.tool_names},     {"n_tokens", g.n_tokens},
                        {"kv_bytes", g.kv_bytes},         {"file_bytes", g.file_bytes},
                        {"tier", g.tier},
                        {"created_unix_ms", g.created_unix_ms}, {"last_used_unix_ms", g.last_used_unix_ms},
                        {"hits", g.hits},                 {"in_use", g.in_use}};
}

}  // namespace cc
