// Resolving a --model SPEC (builtin:NAME or an HF directory) to its files, tokenizer, chat format
// and fingerprint. The weights themselves are loaded by core/model/weights.h.
#pragma once

#include "core/model/weights.h"
#include "core/text/tokenizer.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace cc {

// The default --model of a program: builtin:toolcaller where the program carries it (the app and the
// CLI link cc_bundled_models), else builtin:qwen3-demo. The trained model writes real tool calls and
// picks the right tool for most requests at 5, 10 and 50 tools, and its full prefills (~0.19 s on two
// cores, against ~8 ms from the cache) still show what the cache saves; qwen3-demo (synthetic
// weights, ~1 s for the same prefill) is the default of programs without it, such as the tests.
// docs/models.md gives the reasons.
std::string default_model_spec();

struct ModelSource {
    std::string spec;                // as given by the user
    bool builtin = false;
    std::string builtin_name;        // e.g. "qwen3-demo"
    std::filesystem::path dir;       // HF directory (empty for builtin models)
    nlohmann::json config;           // config.json (a synthesised one for builtin models)
    std::vector<std::filesystem::path> weight_files;     // *.safetensors, sorted
    std::vector<std::filesystem::path> tokenizer_files;  // tokenizer.json, tokenizer_config.json, ...
    // generation_config.json's eos_token_id (an int or a list), when the file is there: stop ids
    // that the engine merges with config.json's and the chat format's.
    std::vector<int> generation_eos_ids;
};

// Names of the built-in models (without the "builtin:" prefix).
std::vector<std::string> builtin_model_names();

// Throws std::runtime_error naming the spec/file and the problem (unknown builtin, missing
// directory, missing or malformed config.json).
ModelSource resolve_model(const std::string& spec);

// The weights of a --model SPEC: a built-in model's generated (or embedded) weights, else the
// directory's safetensors checked against its config.json. For the self-tests and tools that
// load a model without an engine; throws naming the spec or the file.
ModelWeights load_model_weights(const std::string& spec);

// The model's tokenizer: the bundled Qwen3 one for builtin models, else DIR/tokenizer.json.
// `override_path` (tokenize --tokenizer) replaces it. Throws naming the file when it is absent.
Tokenizer load_model_tokenizer(const ModelSource& model, const std::optional<std::filesystem::path>& override_path = {});

// DESIGN §3: SHA-256 over config.json, the tokenizer files and every weight file's full content
// (each listed as "name size sha256"); for a builtin model, the hash of its recipe text.
std::string model_fingerprint(const ModelSource& model);

// The same fingerprint, with each file's SHA-256 memoised in CACHE_DIR/fingerprints.json by
// (absolute path with symlinks resolved, size, mtime in ns): an unchanged file is not read again.
// The memo is rewritten atomically (temp file + rename) when it changes, forgetting files that are
// gone; a damaged one is ignored and rewritten. A file changed without changing its size or mtime
// keeps its old hash (as with make). Throws naming CACHE_DIR when the memo cannot be written.
std::string model_fingerprint(const ModelSource& model, const std::filesystem::path& cache_dir);

// The chat format id for this model (config + tokenizer), e.g. "qwen3".
std::string model_chat_format(const ModelSource& model, const Tokenizer& tokenizer);

}  // namespace cc
