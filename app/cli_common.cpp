#include "app/cli_common.h"

#include "app/backends.h"

#include "core/base/paths.h"
#include "core/cpu/kernels.h"

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

namespace cli {

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(path + ": cannot open");
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::vector<std::string> split_list(const std::string& text) {
    std::vector<std::string> items;
    std::stringstream ss(text);
    for (std::string item; std::getline(ss, item, ',');)
        if (!item.empty()) items.push_back(item);
    return items;
}

long long parse_int(const std::string& text, const std::string& option, long long min, long long max) {
    size_t used = 0;
    long long v = 0;
    try {
        v = std::stoll(text, &used);
    } catch (const std::exception&) {
        throw UsageError(option + " must be an integer, not \"" + text + "\"");
    }
    if (used != text.size()) throw UsageError(option + " must be an integer, not \"" + text + "\"");
    if (v < min || v > max)
        throw UsageError(option + " must be between " + std::to_string(min) + " and " + std::to_string(max));
    return v;
}

double parse_double(const std::string& text, const std::string& option, double min, double max) {
    size_t used = 0;
    double v = 0;
    try {
        v = std::stod(text, &used);
    } catch (const std::exception&) {
        throw UsageError(option + " must be a number, not \"" + text + "\"");
    }
    if (used != text.size() || !(v >= min && v <= max))
        throw UsageError(option + " must be a number between " + std::to_string(min) + " and " + std::to_string(max));
    return v;
}

std::vector<cc::token_id> parse_ids(const std::string& text) {
    std::vector<cc::token_id> ids;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (item.empty()) continue;
        ids.push_back(static_cast<cc::token_id>(parse_int(item, "--prompt-ids", 0, INT32_MAX)));
    }
    if (ids.empty()) throw UsageError("--prompt-ids holds no ids");
    return ids;
}

void print_json(const ordered_json& j) { std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n"; }

std::string ids_text(const std::vector<cc::token_id>& ids) {
    std::string out;
    for (size_t i = 0; i < ids.size(); ++i) out += (i ? " " : "") + std::to_string(ids[i]);
    return out;
}

std::string system_prompt(Args& args) {
    if (auto s = args.get("system")) return *s;
    if (auto f = args.get("system-file")) return read_file(*f);
    return "";
}

cc::ToolChoice tool_choice_arg(Args& args) {
    const auto v = args.get("tool-choice");
    if (v && v->empty()) throw UsageError("--tool-choice must be auto, none, required or a function's name, not \"\"");
    cc::ToolChoice choice = v ? cc::ToolChoice::parse(*v) : cc::ToolChoice{};
    choice.strict = args.flag("strict");  // every call's arguments masked to its tool's schema
    return choice;
}

cc::ToolSet tools_arg(Args& args, const std::string& command, bool required) {
    auto path = args.get("tools");
    if (!path) {
        if (required) throw UsageError(command + " needs --tools FILE");
        return cc::ToolSet();
    }
    return cc::ToolSet::from_file(*path);
}


bool plans_gpu(const std::string& model_spec, const std::string& backend) {
    if (backend == "cuda") return true;
    if (backend != "auto") return false;
    // the backend auto picks for this model (a CUDA device takes it when present)
    cc::EngineOptions probe;
    probe.model_spec = model_spec;
    probe.backend = backend;
    probe.backends = cc::app::available_backends();
    return cc::planned_numerics(probe).rfind("cpu", 0) != 0;
}

std::string serve_default_weights(const std::string& model_spec, const std::string& backend) {
    if (!cc::cpu::bf16dot::supported()) return "stored";
    // CC_CPU_ISA may pin a narrower kernel path, which has no bf16dot GEMM.
    if (const char* isa = std::getenv("CC_CPU_ISA"); isa != nullptr && *isa != '\0' && std::string(isa) != "avx512" &&
                                                     std::string(isa) != "auto")
        return "stored";
    return plans_gpu(model_spec, backend) ? "stored" : "bf16dot";
}

std::string default_kv_dtype(const std::string& model_spec, const std::string& backend, bool serve) {
    return serve || plans_gpu(model_spec, backend) ? "bf16" : "f32";
}

cc::EngineOptions engine_options(Args& args, const std::string& model_spec, const std::string& backend,
                                 const std::string& default_kv_dtype, const std::string& default_weights,
                                 int64_t default_remote_warm_mb, int64_t default_kv_warm_mb) {
    cc::EngineOptions o;
    o.model_spec = model_spec;
    o.backend = backend;
    o.backends = cc::app::available_backends();
    if (auto t = args.get("threads")) o.n_threads = parse_int(*t, "--threads", 1, 1024);
    try {
        o.kv_dtype = cc::parse_kv_dtype(args.get_or("kv-dtype", default_kv_dtype));
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--kv-dtype: ") + e.what());
    }
    try {
        o.weights = cc::parse_weight_dtype(args.get_or("weights", default_weights));
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--weights: ") + e.what());
    }
    if (auto f = args.get("chat-format")) o.chat_format = *f;
    o.cache_dir = args.get_or("cache-dir", cc::default_cache_dir().string());
    o.cache.dir = o.cache_dir;
    if (auto v = args.get("host-budget-bytes")) o.cache.host_budget_bytes = static_cast<size_t>(parse_int(*v, "--host-budget-bytes", 0, INT64_MAX));
    if (auto v = args.get("gpu-budget-bytes")) o.cache.gpu_budget_bytes = static_cast<size_t>(parse_int(*v, "--gpu-budget-bytes", 0, INT64_MAX));
    if (auto v = args.get("disk-budget-bytes")) o.cache.disk_budget_bytes = static_cast<size_t>(parse_int(*v, "--disk-budget-bytes", 0, INT64_MAX));
    // The shared remote tier (core/store/remote_tier.h): every command that builds an Engine.
    if (auto v = args.get("remote")) {
        try {
            cc::parse_redis_url(*v);
        } catch (const std::invalid_argument& e) {
            throw UsageError(std::string("--remote: ") + e.what());
        }
        o.cache.remote.url = *v;
    }
    if (auto v = args.get("remote-chunk-bytes"))
        o.cache.remote.chunk_bytes = static_cast<size_t>(parse_int(*v, "--remote-chunk-bytes", 4096, int64_t(512) << 20));
    if (auto v = args.get("remote-wait-ms")) o.cache.remote.wait_ms = static_cast<int>(parse_int(*v, "--remote-wait-ms", 0, 3600000));
    int64_t warm_mb = default_remote_warm_mb;   // only with a remote tier: it is the tier's pool
    if (auto v = args.get("remote-warm-mb")) warm_mb = parse_int(*v, "--remote-warm-mb", 0, int64_t(1) << 20);
    if (!o.cache.remote.url.empty()) o.cache.remote.warm_bytes = static_cast<size_t>(warm_mb) << 20;
    int64_t kv_warm_mb = default_kv_warm_mb;
    if (auto v = args.get("kv-warm-mb")) kv_warm_mb = parse_int(*v, "--kv-warm-mb", 0, int64_t(1) << 20);
    o.kv_warm_bytes = static_cast<size_t>(kv_warm_mb) << 20;
    if (auto v = args.get("kv-warm-fill")) {
        if (*v == "on-demand")
            o.kv_warm_fill = cc::WarmFill::on_demand;
        else if (*v == "up-front")
            o.kv_warm_fill = cc::WarmFill::up_front;
        else
            throw UsageError("--kv-warm-fill: \"" + *v + "\" is not one of on-demand, up-front");
    }
    return o;
}

void report_warnings(cc::Engine& engine) {
    for (const auto& w : engine.cache_warnings()) std::cerr << "contextcache-cli: warning: " << w << "\n";
}

}  // namespace cli
