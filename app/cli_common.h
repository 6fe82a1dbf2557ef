// What every contextcache-cli command shares: the argument reader, the usage error, option parsing
// and JSON output. Each command lives in app/cli_<name>.cpp (or cli_main.cpp) and is dispatched
// from main() in cli_main.cpp.
#pragma once

#include "core/engine/engine.h"
#include "core/text/tool_set.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace cli {

using nlohmann::ordered_json;

// Bad usage (exit 2), as opposed to bad input (any other exception, exit 1).
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Minimal argument reader: "--name value" options, "--flag" switches, one command word.
class Args {
public:
    Args(int argc, char** argv, const std::vector<std::string>& flags) {
        for (int i = 1; i < argc; ++i) {
            std::string a = argv[i];
            if (a.starts_with("--")) {
                std::string name = a.substr(2);
                if (auto eq = name.find('='); eq != std::string::npos) {
                    values_[name.substr(0, eq)] = name.substr(eq + 1);
                } else if (std::find(flags.begin(), flags.end(), name) != flags.end()) {
                    values_[name] = "";
                } else {
                    if (i + 1 >= argc) throw UsageError("option --" + name + " needs a value");
                    values_[name] = argv[++i];
                }
            } else {
                positional_.push_back(a);
            }
        }
    }
    bool has(const std::string& name) const { return values_.count(name) != 0; }
    std::optional<std::string> get(const std::string& name) {
        used_.push_back(name);
        auto it = values_.find(name);
        if (it == values_.end()) return std::nullopt;
        return it->second;
    }
    std::string get_or(const std::string& name, const std::string& fallback) { return get(name).value_or(fallback); }
    std::string require(const std::string& name, const std::string& command) {
        auto v = get(name);
        if (!v) throw UsageError(command + " needs --" + name);
        return *v;
    }
    bool flag(const std::string& name) {
        used_.push_back(name);
        return values_.count(name) != 0;
    }
    const std::vector<std::string>& positional() const { return positional_; }
    // Unknown options are usage errors, not silently ignored.
    void check_all_used() const {
        for (const auto& [name, value] : values_)
            if (std::find(used_.begin(), used_.end(), name) == used_.end()) throw UsageError("unknown option --" + name);
    }

private:
    std::map<std::string, std::string> values_;
    std::vector<std::string> positional_;
    std::vector<std::string> used_;
};

std::string read_file(const std::string& path);
// "a,b,,c" -> {"a", "b", "c"}
std::vector<std::string> split_list(const std::string& text);
long long parse_int(const std::string& text, const std::string& option, long long min, long long max);
double parse_double(const std::string& text, const std::string& option, double min, double max);
std::vector<cc::token_id> parse_ids(const std::string& text);
void print_json(const ordered_json& j);
std::string ids_text(const std::vector<cc::token_id>& ids);
// --system S | --system-file F (empty when neither)
std::string system_prompt(Args& args);
// --tools FILE as a ToolSet (an empty set when absent and not required)
cc::ToolSet tools_arg(Args& args, const std::string& command, bool required);
// --tool-choice auto|none|required|NAME (default auto); the engine checks it against the tools.
cc::ToolChoice tool_choice_arg(Args& args);
// Whether `--backend` (auto, cpu or cuda) runs this model on the GPU: cuda, or auto where a CUDA
// device takes it.
bool plans_gpu(const std::string& model_spec, const std::string& backend);
// The --weights a server gets when none is given: bf16dot where the CPU backend runs it (AVX-512
// BF16; the fastest exact path the CPU has, docs/server.md), else stored.
std::string serve_default_weights(const std::string& model_spec, const std::string& backend);
// The --kv-dtype when none is given: bf16 for the server and on the GPU (half the bytes to store,
// upload and read; the device's attention takes it as it is), f32 for the research commands on the
// CPU (the reference the NoPE experiment's RoPE check is exact in).
std::string default_kv_dtype(const std::string& model_spec, const std::string& backend, bool serve);
// The global engine options (--threads, --kv-dtype, --chat-format, --cache-dir, budgets).
// `default_kv_dtype` applies when --kv-dtype is not given (default_kv_dtype() above).

// `default_remote_warm_mb`: --remote-warm-mb when not given (serve: 256; one-shot commands: 0);
// `default_kv_warm_mb`: --kv-warm-mb likewise (serve: cc::serve::kDefaultKvWarmMb; one-shot commands: 0).
cc::EngineOptions engine_options(Args& args, const std::string& model_spec, const std::string& backend,
                                 const std::string& default_kv_dtype = "f32",
                                 const std::string& default_weights = "stored", int64_t default_remote_warm_mb = 0,
                                 int64_t default_kv_warm_mb = 0);
// Cache problems (a damaged file quarantined, a failed write) are warnings: one line each on stderr.
void report_warnings(cc::Engine& engine);

// Command families in their own files (app/cli_<name>.cpp).
int cmd_chat(Args& args, const cc::EngineOptions& options, bool json);  // cli_chat.cpp
int cmd_bench(Args& args, const cc::EngineOptions& options, bool json);  // cli_bench.cpp
int cmd_eval(Args& args, const cc::EngineOptions& options, bool json);  // app/cli_eval.cpp
int cmd_bfcl_import(Args& args, bool json);  // app/cli_bfcl.cpp
int cmd_selftest(Args& args, const cc::EngineOptions& options, bool json);  // cli_selftest.cpp
int cmd_serve(Args& args, const cc::EngineOptions& options, bool json);  // cli_serve.cpp
int cmd_chunk_reuse(Args& args, const cc::EngineOptions& options, bool json);  // cli_chunk_reuse.cpp

}  // namespace cli
