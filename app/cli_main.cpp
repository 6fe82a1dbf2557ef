// contextcache-cli: the headless face of ContextCache (DESIGN §9).
// Every command prints one JSON object with --json (human text otherwise). Errors: one line on
// stderr naming the file and the problem; exit 1 for bad input, 2 for bad usage.
#include "core/chat_format.h"
#include "core/keys.h"
#include "core/model_spec.h"
#include "core/tokenizer.h"
#include "core/tool_set.h"
#ifdef CC_HAVE_CUDA
#include "cuda/cuda_backend.h"
#endif

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using nlohmann::ordered_json;

struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

const char* kUsage = R"(usage: contextcache-cli [global options] COMMAND [options]

global options:
  --model SPEC        builtin:qwen3-demo (default) or an HF model directory
  --backend B         auto | cpu | cuda (default auto)
  --json              print one JSON object (JSON lines for --jsonl)
  --help              this text

commands:
  info                                        model, tokenizer, chat format, fingerprint, CUDA devices
  tokenize (--text T | --file F | --jsonl F)  token ids; [--mode plain|template] [--add-special-tokens]
           [--tokenizer PATH] [--decode]      (--jsonl: one {"text": ...} per line in, {"ids": [...]} out)
  key --tools FILE [--system S | --system-file F]
                                              tools_hash and group_key of a tool set
  render --tools FILE --query Q [--system S | --system-file F]
                                              prefix/suffix text and ids exactly as the model sees them
)";

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

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(path + ": cannot open");
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
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

cc::ToolSet tools_arg(Args& args, const std::string& command, bool required) {
    auto path = args.get("tools");
    if (!path) {
        if (required) throw UsageError(command + " needs --tools FILE");
        return cc::ToolSet();
    }
    return cc::ToolSet::from_file(*path);
}

std::string backend_numerics(const std::string& backend) {
    // The KV dtype is f32 on every backend until the engine issue adds the BF16 option.
    if (backend == "cpu" || backend == "auto") return "cpu/f32";
    if (backend == "cuda") return "cuda/f32";
    throw UsageError("--backend must be auto, cpu or cuda, not \"" + backend + "\"");
}

// ---- commands ---------------------------------------------------------------------------------

int cmd_info(Args& args, const cc::ModelSource& model, bool json) {
    args.check_all_used();
    ordered_json out;
    out["model"] = model.spec;
    out["builtin"] = model.builtin;
    const auto tokenizer = cc::load_model_tokenizer(model);
    out["tokenizer"] = {{"source", tokenizer.source_name()}, {"kind", tokenizer.model_kind()}, {"vocab_size", tokenizer.vocab_size()}};
    out["chat_format"] = cc::model_chat_format(model, tokenizer);
    out["fingerprint"] = cc::model_fingerprint(model);
#ifdef CC_HAVE_CUDA
    const auto probe = cc::cuda::probe();
    out["cuda"] = {{"compiled", true}, {"available", probe.available}, {"message", probe.message}};
#else
    out["cuda"] = {{"compiled", false}, {"available", false}, {"message", "built without the CUDA backend"}};
#endif
    if (model.builtin) out["note"] = "built-in model: synthetic weights; timings and exactness are real, text is not";
    if (json) {
        print_json(out);
    } else {
        std::cout << "model        " << model.spec << (model.builtin ? "  (synthetic weights: text is not meaningful)" : "") << "\n"
                  << "tokenizer    " << tokenizer.source_name() << " (" << tokenizer.model_kind() << ", "
                  << tokenizer.vocab_size() << " tokens)\n"
                  << "chat format  " << out["chat_format"].get<std::string>() << "\n"
                  << "fingerprint  " << out["fingerprint"].get<std::string>() << "\n"
                  << "cuda         " << out["cuda"]["message"].get<std::string>() << "\n";
    }
    return 0;
}

int cmd_tokenize(Args& args, const cc::ModelSource& model, bool json) {
    std::optional<std::filesystem::path> tokenizer_path;
    if (auto t = args.get("tokenizer")) tokenizer_path = *t;
    const std::string mode_name = args.get_or("mode", "plain");
    cc::EncodeMode mode;
    if (mode_name == "plain") mode = cc::EncodeMode::plain;
    else if (mode_name == "template") mode = cc::EncodeMode::template_;
    else throw UsageError("--mode must be plain or template, not \"" + mode_name + "\"");
    const bool add_special = args.flag("add-special-tokens");
    const bool decode = args.flag("decode");
    auto text = args.get("text");
    auto file = args.get("file");
    auto jsonl = args.get("jsonl");
    if ((text ? 1 : 0) + (file ? 1 : 0) + (jsonl ? 1 : 0) != 1)
        throw UsageError("tokenize needs exactly one of --text, --file, --jsonl");
    args.check_all_used();
    const auto tokenizer = tokenizer_path ? cc::Tokenizer::from_file(*tokenizer_path) : cc::load_model_tokenizer(model);

    auto encode_one = [&](const std::string& t) {
        ordered_json out;
        const auto ids = tokenizer.encode(t, mode, add_special);
        out["ids"] = ids;
        if (decode) out["text"] = tokenizer.decode(ids);
        return out;
    };
    if (jsonl) {
        std::ifstream in(*jsonl, std::ios::binary);
        if (!in) throw std::runtime_error(*jsonl + ": cannot open");
        std::string line;
        size_t line_no = 0;
        while (std::getline(in, line)) {
            ++line_no;
            if (line.empty()) continue;
            nlohmann::json item;
            try {
                item = nlohmann::json::parse(line);
            } catch (const nlohmann::json::parse_error& e) {
                throw std::runtime_error(*jsonl + ": line " + std::to_string(line_no) + ": invalid JSON");
            }
            if (!item.is_object() || !item.contains("text") || !item["text"].is_string())
                throw std::runtime_error(*jsonl + ": line " + std::to_string(line_no) + ": expected {\"text\": \"...\"}");
            print_json(encode_one(item["text"].get<std::string>()));
        }
        return 0;
    }
    const std::string input = text ? *text : read_file(*file);
    auto out = encode_one(input);
    if (json) {
        out["n_tokens"] = out["ids"].size();
        print_json(out);
    } else {
        std::cout << ids_text(out["ids"].get<std::vector<cc::token_id>>()) << "\n";
        if (decode) std::cout << out["text"].get<std::string>() << "\n";
        std::cerr << out["ids"].size() << " tokens\n";
    }
    return 0;
}

struct KeyInfo {
    std::string chat_format;
    cc::GroupKeyInputs inputs;
};

KeyInfo key_info(const cc::ModelSource& model, const cc::Tokenizer& tokenizer, const cc::ToolSet& tools,
                 const std::string& system, const std::string& backend) {
    KeyInfo k;
    k.chat_format = cc::model_chat_format(model, tokenizer);
    k.inputs.model_fingerprint = cc::model_fingerprint(model);
    k.inputs.chat_format = k.chat_format;
    k.inputs.backend_numerics = backend_numerics(backend);
    k.inputs.system_prompt = system;
    k.inputs.tools_hash = tools.tools_hash();
    return k;
}

int cmd_key(Args& args, const cc::ModelSource& model, bool json, const std::string& backend) {
    const auto tools = tools_arg(args, "key", true);
    const std::string system = system_prompt(args);
    args.check_all_used();
    const auto tokenizer = cc::load_model_tokenizer(model);
    const auto k = key_info(model, tokenizer, tools, system, backend);
    ordered_json out;
    out["tools_hash"] = tools.tools_hash();
    out["group_key"] = cc::group_key(k.inputs);
    out["n_tools"] = tools.size();
    out["tool_names"] = tools.names();
    out["chat_format"] = k.chat_format;
    out["model_fingerprint"] = k.inputs.model_fingerprint;
    out["backend_numerics"] = k.inputs.backend_numerics;
    out["key_text"] = cc::group_key_text(k.inputs);
    if (json) print_json(out);
    else
        std::cout << "tools_hash  " << out["tools_hash"].get<std::string>() << "\n"
                  << "group_key   " << out["group_key"].get<std::string>() << "\n"
                  << "n_tools     " << tools.size() << "\n";
    return 0;
}

int cmd_render(Args& args, const cc::ModelSource& model, bool json, const std::string& backend) {
    const auto tools = tools_arg(args, "render", false);
    const std::string query = args.require("query", "render");
    const std::string system = system_prompt(args);
    args.check_all_used();
    const auto tokenizer = cc::load_model_tokenizer(model);
    const auto k = key_info(model, tokenizer, tools, system, backend);
    const auto format = cc::make_chat_format(k.chat_format);
    const auto r = cc::render_prompt(*format, tokenizer, tools, system, query);
    ordered_json out;
    out["chat_format"] = k.chat_format;
    out["tools_hash"] = tools.tools_hash();
    out["group_key"] = cc::group_key(k.inputs);
    out["n_tools"] = tools.size();
    out["prefix_tokens"] = r.prefix_ids.size();
    out["suffix_tokens"] = r.suffix_ids.size();
    out["prefix_text"] = r.prefix_text;
    out["suffix_text"] = r.suffix_text;
    out["prefix_ids"] = r.prefix_ids;
    out["suffix_ids"] = r.suffix_ids;
    out["full_ids"] = r.full_ids();
    if (json) {
        print_json(out);
    } else {
        std::cout << "----- prefix (" << r.prefix_ids.size() << " tokens, cacheable) -----\n" << r.prefix_text
                  << "\n----- suffix (" << r.suffix_ids.size() << " tokens, per query) -----\n" << r.suffix_text
                  << "\n-----\ntools_hash " << out["tools_hash"].get<std::string>() << "\ngroup_key  "
                  << out["group_key"].get<std::string>() << "\n";
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        Args args(argc, argv, {"json", "help", "add-special-tokens", "decode"});
        if (args.flag("help") || args.positional().empty()) {
            std::cout << kUsage;
            return args.flag("help") ? 0 : 2;
        }
        const std::string command = args.positional()[0];
        if (args.positional().size() > 1) throw UsageError("unexpected argument \"" + args.positional()[1] + "\"");
        const bool json = args.flag("json");
        const std::string backend = args.get_or("backend", "auto");
        backend_numerics(backend);  // validates the name
        const auto model = cc::resolve_model(args.get_or("model", cc::kDefaultModelSpec));
        if (command == "info") return cmd_info(args, model, json);
        if (command == "tokenize") return cmd_tokenize(args, model, json);
        if (command == "key") return cmd_key(args, model, json, backend);
        if (command == "render") return cmd_render(args, model, json, backend);
        throw UsageError("unknown command \"" + command + "\"");
    } catch (const UsageError& e) {
        std::cerr << "contextcache-cli: usage error: " << e.what() << " (see --help)\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "contextcache-cli: error: " << e.what() << "\n";
        return 1;
    }
}
