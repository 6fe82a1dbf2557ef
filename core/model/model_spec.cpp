#include "core/model/model_spec.h"

#include "core/model/builtin_model.h"
#include "core/text/chat_format.h"
#include "core/base/embedded_resources.h"
#include "core/model/model_config.h"
#include "core/model/weights.h"
#include "core/base/sha256.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <sys/stat.h>
#include <unistd.h>

namespace cc {
namespace {

namespace fs = std::filesystem;

constexpr const char* kBuiltinPrefix = "builtin:";

BuiltinRecipe builtin_recipe(const std::string& name) {
    if (auto r = find_builtin(name)) return *r;
    if (name == "toolcaller")
        throw std::runtime_error("builtin:toolcaller: this program was built without the embedded trained model "
                                 "(cc_bundled_models); load its directory instead: --model resources/models/toolcaller");
    std::string known;
    for (const auto& n : builtin_model_names()) known += (known.empty() ? "builtin:" : ", builtin:") + n;
    throw std::runtime_error("builtin:" + name + ": unknown built-in model (known: " + known + ")");
}

std::string read_text(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(path.string() + ": cannot open");
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

std::vector<std::string> builtin_model_names() {
    std::vector<std::string> names;
    for (const auto& r : builtin_recipes()) names.push_back(r.name);
    return names;
}

ModelSource resolve_model(const std::string& spec) {
    ModelSource m;
    m.spec = spec;
    if (spec.starts_with(kBuiltinPrefix)) {
        m.builtin = true;
        m.builtin_name = spec.substr(std::char_traits<char>::length(kBuiltinPrefix));
        const BuiltinRecipe recipe = builtin_recipe(m.builtin_name);
        m.config = recipe.config.to_json();
        m.config["architectures"] = {"Qwen3ForCausalLM"};
        m.generation_eos_ids = recipe.generation_eos_ids;
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
    const fs::path generation_path = m.dir / "generation_config.json";
    if (fs::exists(generation_path)) {
        nlohmann::json generation;
        try {
            generation = nlohmann::json::parse(read_text(generation_path));
        } catch (const nlohmann::json::parse_error& e) {
            throw std::runtime_error(generation_path.string() + ": invalid JSON: " + e.what());
        }
        m.generation_eos_ids = generation_eos_token_ids(generation, generation_path.string());
    }
    return m;
}

std::string default_model_spec() {
    return find_builtin("toolcaller") ? "builtin:toolcaller" : "builtin:qwen3-demo";
}

ModelWeights load_model_weights(const std::string& spec) {
    const ModelSource source = resolve_model(spec);
    if (source.builtin) {
        const auto recipe = find_builtin(source.builtin_name);
        if (!recipe) throw std::runtime_error(spec + ": unknown built-in model");
        return generate_builtin_weights(*recipe);
    }
    return load_weights(source.dir, ModelConfig::from_json(source.config, (source.dir / "config.json").string()));
}

Tokenizer load_model_tokenizer(const ModelSource& model, const std::optional<fs::path>& override_path) {
    if (override_path) return Tokenizer::from_file(*override_path);
    if (model.builtin) {
        const BuiltinRecipe recipe = builtin_recipe(model.builtin_name);
        return Tokenizer::from_json(builtin_tokenizer_json(recipe), "builtin:" + recipe.name + " tokenizer.json");
    }
    const fs::path path = model.dir / "tokenizer.json";
    if (!fs::exists(path))
        throw std::runtime_error(path.string() + ": missing (this model directory has no tokenizer; pass --tokenizer PATH or use --prompt-ids)");
    return Tokenizer::from_file(path);
}

namespace {

// The files a fingerprint covers, in order.
std::vector<fs::path> fingerprint_files(const ModelSource& model) {
    std::vector<fs::path> files{model.dir / "config.json"};
    files.insert(files.end(), model.tokenizer_files.begin(), model.tokenizer_files.end());
    files.insert(files.end(), model.weight_files.begin(), model.weight_files.end());
    return files;
}

// One line per file, "name size sha256"; `file_hash` gives a file's SHA-256 hex.
template <class FileHash>
std::string fingerprint_with(const ModelSource& model, FileHash&& file_hash) {
    if (model.builtin) return sha256_hex(builtin_recipe_text(builtin_recipe(model.builtin_name)));
    std::string listing;
    for (const auto& f : fingerprint_files(model))
        listing += f.filename().string() + " " + std::to_string(fs::file_size(f)) + " " + file_hash(f) + "\n";
    return sha256_hex(listing);
}

struct FileStamp {
    uint64_t size_bytes = 0;
    int64_t mtime_ns = 0;
};

FileStamp stamp_of(const fs::path& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        throw std::runtime_error(path.string() + ": cannot stat: " + std::strerror(errno));
    return {static_cast<uint64_t>(st.st_size), int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec};
}

constexpr int kFingerprintMemoVersion = 1;

// fingerprints.json: {"version": 1, "files": {ABS_PATH: {"size": N, "mtime_ns": T, "sha256": HEX}}}.
// Anything else (unreadable, not JSON, another version, odd entries) counts as an empty memo.
nlohmann::json load_memo(const fs::path& path) {
    nlohmann::json empty = {{"version", kFingerprintMemoVersion}, {"files", nlohmann::json::object()}};
    std::ifstream in(path, std::ios::binary);
    if (!in) return empty;
    std::ostringstream ss;
    ss << in.rdbuf();
    auto memo = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
    if (!memo.is_object() || memo.value("version", nlohmann::json()) != kFingerprintMemoVersion ||
        !memo.contains("files") || !memo["files"].is_object())
        return empty;
    return memo;
}

bool memo_entry_matches(const nlohmann::json& e, const FileStamp& s) {
    return e.is_object() && e.contains("size") && e["size"].is_number_unsigned() &&
           e["size"].get<uint64_t>() == s.size_bytes && e.contains("mtime_ns") && e["mtime_ns"].is_number_integer() &&
           e["mtime_ns"].get<int64_t>() == s.mtime_ns && e.contains("sha256") && e["sha256"].is_string() &&
           e["sha256"].get_ref<const std::string&>().size() == 64;
}

void write_atomically(const fs::path& path, const std::string& text) {
    fs::path tmp = path;
    tmp += ".tmp." + std::to_string(::getpid());
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw std::runtime_error(tmp.string() + ": cannot write: " + std::strerror(errno));
        out << text;
        out.flush();
        if (!out) throw std::runtime_error(tmp.string() + ": cannot write: " + std::strerror(errno));
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) {
        fs::remove(tmp, ec);
        throw std::runtime_error(path.string() + ": cannot replace: " + ec.message());
    }
}

}  // namespace

std::string model_fingerprint(const ModelSource& model) {
    return fingerprint_with(model, [](const fs::path& f) { return sha256_file_hex(f); });
}

std::string model_fingerprint(const ModelSource& model, const fs::path& cache_dir) {
    if (model.builtin) return model_fingerprint(model);
    const fs::path memo_path = cache_dir / "fingerprints.json";
    nlohmann::json memo = load_memo(memo_path);
    auto& files = memo["files"];
    bool changed = false;
    const std::string result = fingerprint_with(model, [&](const fs::path& f) {
        // Keyed by the real file (symlinks resolved), so snapshots sharing a blob share the hash.
        const std::string key = fs::weakly_canonical(fs::absolute(f)).string();
        const FileStamp s = stamp_of(f);
        if (const auto it = files.find(key); it != files.end() && memo_entry_matches(*it, s))
            return (*it)["sha256"].get<std::string>();
        std::string hash = sha256_file_hex(f);
        files[key] = {{"size", s.size_bytes}, {"mtime_ns", s.mtime_ns}, {"sha256", hash}};
        changed = true;
        return hash;
    });
    if (changed) {
        // Forget files that are gone, so the memo does not grow with every model ever opened.
        std::error_code ec;
        for (auto it = files.begin(); it != files.end();) {
            if (!fs::exists(it.key(), ec))
                it = files.erase(it);
            else
                ++it;
        }
        fs::create_directories(cache_dir, ec);
        if (ec) throw std::runtime_error(cache_dir.string() + ": cannot create: " + ec.message());
        write_atomically(memo_path, memo.dump(1) + "\n");
    }
    return result;
}

std::string model_chat_format(const ModelSource& model, const Tokenizer& tokenizer) {
    const std::string source = model.builtin ? model.spec : (model.dir / "config.json").string();
    return choose_chat_format(model.config, tokenizer, source);
}

}  // namespace cc
