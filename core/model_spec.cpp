#include "core/model_spec.h"

#include "core/chat_format.h"
#include "core/embedded_resources.h"
#include "core/sha256.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace cc {
namespace {

namespace fs = std::filesystem;

constexpr const char* kBuiltinPrefix = "builtin:";

// The built-in models' config.json. Their weights are synthetic (seeded), generated at load.
nlohmann::json builtin_config(const std::string& name) {
    if (name == "qwen3-demo") {
        return {{"model_type", "qwen3"},
                {"architectures", {"Qwen3ForCausalLM"}},
                {"contextcache_builtin", name},
                {"contextcache_note", "synthetic weights: timings and exactness are real, text is not"}};
    }
    throw std::runtime_error("builtin:" + name + ": unknown built-in model (known: builtin:qwen3-demo)");
}

std::string read_text(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(path.string() + ": cannot open");
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

std::vector<std::string> builtin_model_names() { return {"qwen3-demo"}; }

ModelSource resolve_model(const std::string& spec) {
    ModelSource m;
    m.spec = spec;
    if (spec.starts_with(kBuiltinPrefix)) {
        m.builtin = true;
        m.builtin_name = spec.substr(std::char_traits<char>::length(kBuiltinPrefix));
        m.config = builtin_config(m.builtin_name);
        return m;
    }
    m.dir = spec;
    std::error_code ec;
    if (!fs::is_directory(m.dir, ec))
        throw std::runtime_error(spec + ": not a model directory (expected builtin:NAME or a folder with config.json)");
    const fs::path config_path = m.dir / "config.json";
    if (!fs::exists(config_path)) throw std::runtime_error(config_path.string() + ": missing (every model directory needs config.json)");
    try {
        m.config = nlohmann::json::parse(read_text(config_path));
    } catch (const nlohmann::json::parse_error& e) {
        throw std::runtime_error(config_path.string() + ": invalid JSON: " + e.what());
    }
    if (!m.config.is_object()) throw std::runtime_error(config_path.string() + ": must hold a JSON object");
    for (const auto& entry : fs::directory_iterator(m.dir)) {
        const auto name = entry.path().filename().string();
        if (entry.path().extension() == ".safetensors") m.weight_files.push_back(entry.path());
        else if (name == "tokenizer.json" || name == "tokenizer_config.json" || name == "special_tokens_map.json")
            m.tokenizer_files.push_back(entry.path());
    }
    std::sort(m.weight_files.begin(), m.weight_files.end());
    std::sort(m.tokenizer_files.begin(), m.tokenizer_files.end());
    return m;
}

Tokenizer load_model_tokenizer(const ModelSource& model, const std::optional<fs::path>& override_path) {
    if (override_path) return Tokenizer::from_file(*override_path);
    if (model.builtin) return Tokenizer::from_json(embedded::qwen3_tokenizer_json(), "builtin:qwen3 tokenizer.json");
    const fs::path path = model.dir / "tokenizer.json";
    if (!fs::exists(path))
        throw std::runtime_error(path.string() + ": missing (this model directory has no tokenizer; pass --tokenizer PATH or use --prompt-ids)");
    return Tokenizer::from_file(path);
}

std::string model_fingerprint(const ModelSource& model) {
    if (model.builtin) return sha256_hex("contextcache builtin model\n" + model.config.dump());
    std::vector<fs::path> files{model.dir / "config.json"};
    files.insert(files.end(), model.tokenizer_files.begin(), model.tokenizer_files.end());
    files.insert(files.end(), model.weight_files.begin(), model.weight_files.end());
    std::string listing;
    for (const auto& f : files)
        listing += f.filename().string() + " " + std::to_string(fs::file_size(f)) + " " + sha256_file_hex(f) + "\n";
    return sha256_hex(listing);
}

std::string model_chat_format(const ModelSource& model, const Tokenizer& tokenizer) {
    const std::string source = model.builtin ? model.spec : (model.dir / "config.json").string();
    return choose_chat_format(model.config, tokenizer, source);
}

}  // namespace cc
