#include "core/model/weights.h"

#include "core/base/json_text.h"
#include "core/base/mapped_file.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

namespace cc {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

// Where a tensor lives: the mapped file (shared by all its tensors) and its header entry.
struct Located {
    std::shared_ptr<const SafetensorsFile> file;
    const TensorInfo* info = nullptr;
};

// Every tensor of the checkpoint by name, and the name to give when a tensor is missing.
struct Checkpoint {
    std::string source;  // the single file, the index, or "DIR/*.safetensors"
    std::vector<std::shared_ptr<const SafetensorsFile>> files;
    std::map<std::string, Located> tensors;
};

std::string shape_text(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

std::string read_text(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(path.string() + ": cannot open");
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void add_file(Checkpoint& ck, const fs::path& path) {
    auto file = std::make_shared<const SafetensorsFile>(path);
    for (const auto& t : file->tensors()) {
        const auto [it, inserted] = ck.tensors.emplace(t.name, Located{file, &t});
        if (!inserted)
            throw std::runtime_error(path.string() + ": tensor \"" + t.name + "\": also in " +
                                     it->second.file->path().string() + " (each tensor must be in exactly one file)");
    }
    ck.files.push_back(std::move(file));
}

// model.safetensors.index.json: {"metadata": {...}, "weight_map": {tensor name: shard file name}}.
Checkpoint open_sharded(const fs::path& dir, const fs::path& index_path) {
    Checkpoint ck;
    const std::string source = index_path.string();
    ck.source = source;
    const auto index = parse_json_text(read_text(index_path), source, 16);
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
        throw std::runtime_error(source + ": must be an object with a \"weight_map\" object");
    const auto& weight_map = index["weight_map"];
    if (weight_map.empty()) throw std::runtime_error(source + ": \"weight_map\" is empty");

    std::map<std::string, std::shared_ptr<const SafetensorsFile>> shards;
    for (const auto& [name, shard] : weight_map.items()) {
        if (!shard.is_string())
            throw std::runtime_error(source + ": tensor \"" + name + "\": shard must be a file name string");
        const auto& shard_name = shard.get_ref<const std::string&>();
        // A shard is a plain file name beside the index: the index must not reach outside DIR.
        if (shard_name.empty() || shard_name == "." || shard_name == ".." ||
            shard_name.find_first_of("/\\") != std::string::npos)
            throw std::runtime_error(source + ": tensor \"" + name + "\": shard \"" + shard_name +
                                     "\" is not a plain file name");
        if (shards.contains(shard_name)) continue;
        const fs::path shard_path = dir / shard_name;
        std::error_code ec;
        if (!fs::is_regular_file(shard_path, ec))
            throw std::runtime_error(source + ": tensor \"" + name + "\": shard \"" + shard_name +
                                     "\" does not exist (" + shard_path.string() + ")");
        shards.emplace(shard_name, std::make_shared<const SafetensorsFile>(shard_path));
    }
    for (const auto& [name, shard] : weight_map.items()) {
        const auto& file = shards.at(shard.get<std::string>());
        const TensorInfo* info = file->find(name);
        if (!info)
            throw std::runtime_error(file->path().string() + ": tensor \"" + name + "\" is missing (" + kIndexFile +
                                     " places it in this shard)");
        ck.tensors.emplace(name, Located{file, info});
    }
    for (const auto& [shard_name, file] : shards) {
        for (const auto& t : file->tensors())
            if (!weight_map.contains(t.name))
                throw std::runtime_error(file->path().string() + ": tensor \"" + t.name + "\" is not listed in " +
                                         kIndexFile);
        ck.files.push_back(file);
    }
    return ck;
}

// transformers' order: model.safetensors, then the index, then (our extension) every
// *.safetensors in DIR as one checkpoint.
Checkpoint open_checkpoint(const fs::path& dir) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw std::runtime_error(dir.string() + ": not a model directory");
    if (fs::exists(dir / kSingleFile)) {
        Checkpoint ck;
        ck.source = (dir / kSingleFile).string();
        add_file(ck, dir / kSingleFile);
        return ck;
    }
    if (fs::exists(dir / kIndexFile)) return open_sharded(dir, dir / kIndexFile);
    std::vector<fs::path> paths;
    for (const auto& entry : fs::directory_iterator(dir))
        if (entry.path().extension() == ".safetensors") paths.push_back(entry.path());
    std::sort(paths.begin(), paths.end());
    if (paths.empty())
        throw std::runtime_error(dir.string() + ": no weights (expected model.safetensors, " + kIndexFile +
                                 " or *.safetensors)");
    Checkpoint ck;
    ck.source = (dir / "*.safetensors").string();
    for (const auto& p : paths) add_file(ck, p);
    return ck;
}

// A tensor the config calls for: its HF name, its shape, and the config fields that give it.
struct Expected {
    std::string name;
    std::vector<int64_t> shape;
    std::string shape_meaning;  // e.g. "(num_key_value_heads * head_dim, hidden_size)"
    Tensor* target;
};

class Loader {
public:
    Loader(Checkpoint ck, ModelWeights& w) : ck_(std::move(ck)), w_(w) {}

    // Checks the tensor against `e` and points `*e.target` at its bytes.
    void bind(const Expected& e) {
        const auto it = ck_.tensors.find(e.name);
        if (it == ck_.tensors.end())
            throw std::runtime_error(ck_.source + ": tensor \"" + e.name + "\" is missing (expected " +
                                     shape_text(e.shape) + " " + e.shape_meaning + ")");
        const auto& [file, info] = it->second;
        if (info->shape != e.shape)
            throw std::runtime_error(file->path().string() + ": tensor \"" + e.name + "\": shape " +
                                     shape_text(info->shape) + ", expected " + shape_text(e.shape) + " " +
                                     e.shape_meaning);
        used_.insert(e.name);
        if (!e.target) return;
        Tensor& t = *e.target;
        t.dtype = info->dtype;
        t.shape = info->shape;
        t.n_bytes = info->n_bytes;
        t.data = file->data(*info).data();
        t.file_mapped = file->mapped();
        // Old files were written without padding the header to 8 bytes; kernels may assume each
        // tensor is aligned to its element size, so a misaligned one is copied (rare, small cost).
        if (reinterpret_cast<uintptr_t>(t.data) % dtype_bytes(t.dtype) != 0) {
            std::shared_ptr<std::byte[]> copy(new std::byte[t.n_bytes]);
            std::copy_n(t.data, t.n_bytes, copy.get());
            t.data = copy.get();
            t.file_mapped = false;
            w_.storage.push_back(std::move(copy));
            ++n_copied_;
        }
    }

    // Tensors in the checkpoint that no expected name claimed (rotary inv_freq buffers aside).
    void check_no_extra() const {
        std::vector<const Located*> extra;
        for (const auto& [name, loc] : ck_.tensors) {
            if (used_.contains(name) || name.ends_with("rotary_emb.inv_freq")) continue;
            extra.push_back(&loc);
        }
        if (extra.empty()) return;
        std::string list;
        for (size_t i = 0; i < extra.size() && i < 5; ++i)
            list += std::string(i ? ", " : "") + "\"" + extra[i]->info->name + "\"";
        if (extra.size() > 5) list += " and " + std::to_string(extra.size() - 5) + " more";
        throw std::runtime_error(extra[0]->file->path().string() + ": tensor \"" + extra[0]->info->name +
                                 "\": unexpected for model_type \"" + w_.config.model_type + "\" (" +
                                 std::to_string(extra.size()) + " unexpected: " + list + ")");
    }

    bool has(const std::string& name) const { return ck_.tensors.contains(name); }
    const Checkpoint& checkpoint() const { return ck_; }
    int n_copied() const { return n_copied_; }

private:
    Checkpoint ck_;
    ModelWeights& w_;
    std::set<std::string> used_;
    int n_copied_ = 0;
};

}  // namespace

namespace {

ModelWeights load_checkpoint(Checkpoint ck, const ModelConfig& config) {
    ModelWeights w;
    w.config = config;
    Loader loader(std::move(ck), w);
    const auto& c = config;
    const int64_t dim = c.dim, ffn = c.ffn_dim, vocab = c.vocab_size, hd = c.head_dim;
    const int64_t q_rows = int64_t{c.n_heads} * hd, kv_rows = int64_t{c.n_kv_heads} * hd;

    // With tie_word_embeddings the one shared matrix may be stored under either name (checkpoints
    // saved through lm_head only are common) or under both, then with the same contents.
    const bool tied = c.tie_word_embeddings;
    const bool has_embed = loader.has("model.embed_tokens.weight"), has_head = loader.has("lm_head.weight");
    if (tied && !has_embed && !has_head)
        throw std::runtime_error(loader.checkpoint().source +
                                 ": tensor \"model.embed_tokens.weight\" is missing, and so is \"lm_head.weight\" "
                                 "(tie_word_embeddings: one of them holds the shared [" + std::to_string(vocab) + ", " +
                                 std::to_string(dim) + "] (vocab_size, hidden_size) matrix)");
    if (!tied || has_embed)
        loader.bind({"model.embed_tokens.weight", {vocab, dim}, "(vocab_size, hidden_size)", &w.embed});
    w.layers.resize(static_cast<size_t>(c.n_layers));
    for (int i = 0; i < c.n_layers; ++i) {
        LayerWeights& l = w.layers[static_cast<size_t>(i)];
        const std::string p = "model.layers." + std::to_string(i) + ".";
        loader.bind({p + "input_layernorm.weight", {dim}, "(hidden_size)", &l.attn_norm});
        loader.bind(
            {p + "self_attn.q_proj.weight", {q_rows, dim}, "(num_attention_heads * head_dim, hidden_size)", &l.wq});
        loader.bind(
            {p + "self_attn.k_proj.weight", {kv_rows, dim}, "(num_key_value_heads * head_dim, hidden_size)", &l.wk});
        loader.bind(
            {p + "self_attn.v_proj.weight", {kv_rows, dim}, "(num_key_value_heads * head_dim, hidden_size)", &l.wv});
        loader.bind(
            {p + "self_attn.o_proj.weight", {dim, q_rows}, "(hidden_size, num_attention_heads * head_dim)", &l.wo});
        if (c.qkv_bias) {
            loader.bind({p + "self_attn.q_proj.bias", {q_rows}, "(num_attention_heads * head_dim)", &l.bq});
            loader.bind({p + "self_attn.k_proj.bias", {kv_rows}, "(num_key_value_heads * head_dim)", &l.bk});
            loader.bind({p + "self_attn.v_proj.bias", {kv_rows}, "(num_key_value_heads * head_dim)", &l.bv});
        }
        if (c.o_bias) loader.bind({p + "self_attn.o_proj.bias", {dim}, "(hidden_size)", &l.bo});
        if (c.qk_norm) {
            loader.bind({p + "self_attn.q_norm.weight", {hd}, "(head_dim)", &l.q_norm});
            loader.bind({p + "self_attn.k_norm.weight", {hd}, "(head_dim)", &l.k_norm});
        }
        loader.bind({p + "post_attention_layernorm.weight", {dim}, "(hidden_size)", &l.ffn_norm});
        loader.bind({p + "mlp.gate_proj.weight", {ffn, dim}, "(intermediate_size, hidden_size)", &l.w_gate});
        loader.bind({p + "mlp.up_proj.weight", {ffn, dim}, "(intermediate_size, hidden_size)", &l.w_up});
        loader.bind({p + "mlp.down_proj.weight", {dim, ffn}, "(hidden_size, intermediate_size)", &l.w_down});
    }
    loader.bind({"model.norm.weight", {dim}, "(hidden_size)", &w.final_norm});
    if (!tied) {
        loader.bind({"lm_head.weight", {vocab, dim}, "(vocab_size, hidden_size)", &w.lm_head});
    } else if (!has_embed) {
        loader.bind({"lm_head.weight", {vocab, dim}, "(vocab_size, hidden_size)", &w.lm_head});
        w.embed = w.lm_head;
        w.notes.push_back("tie_word_embeddings: the shared matrix is stored as lm_head.weight only; "
                          "it is used as model.embed_tokens.weight too");
    } else {
        if (has_head) {
            Tensor head;
            loader.bind({"lm_head.weight", {vocab, dim}, "(vocab_size, hidden_size)", &head});
            // transformers ties them after loading, so one of the two would be silently dropped:
            // when they differ the checkpoint does not say which is meant.
            if (head.dtype != w.embed.dtype || head.n_bytes != w.embed.n_bytes ||
                !std::equal(head.data, head.data + head.n_bytes, w.embed.data))
                throw std::runtime_error(loader.checkpoint().source +
                                         ": tie_word_embeddings is true but tensors \"model.embed_tokens.weight\" and "
                                         "\"lm_head.weight\" differ (" + std::string(dtype_name(w.embed.dtype)) +
                                         " vs " + dtype_name(head.dtype) + "); a tied checkpoint stores one matrix");
            w.notes.push_back("tie_word_embeddings: lm_head.weight is stored too and equals model.embed_tokens.weight");
        }
        w.lm_head = w.embed;
    }
    loader.check_no_extra();
    if (loader.n_copied() > 0)
        w.notes.push_back(std::to_string(loader.n_copied()) +
                          " tensors were not aligned to their element size in the file and were copied");
    for (const auto& f : loader.checkpoint().files) w.storage.push_back(f);
    return w;
}

}  // namespace

ModelWeights load_weights(const fs::path& dir, const ModelConfig& config) {
    return load_checkpoint(open_checkpoint(dir), config);
}

ModelWeights load_weights(std::span<const std::byte> safetensors, const std::string& source, const ModelConfig& config) {
    Checkpoint ck;
    ck.source = source;
    auto file = std::make_shared<const SafetensorsFile>(safetensors, source);
    for (const auto& t : file->tensors()) ck.tensors.emplace(t.name, Located{file, &t});
    ck.files.push_back(std::move(file));
    return load_checkpoint(std::move(ck), config);
}

void release_copied(const Tensor& t) {
    if (t.file_mapped)
        release_mapped_pages(t.data, t.n_bytes);
    else if (t.disposable)
        discard_anonymous_pages(t.data, t.n_bytes);
}

void mark_matrices_disposable(ModelWeights& w) {
    if (!w.generated) return;
    // (a backend that reads the embedding per token from the tensor keeps it; the CPU backend
    // reads a tied embedding from its packed lm_head where that holds it exactly, and gives it up)
    w.embed.disposable = true;
    for (LayerWeights& l : w.layers)
        for (Tensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) t->disposable = true;
    if (w.lm_head.data != nullptr && w.lm_head.data != w.embed.data) w.lm_head.disposable = true;
}

}  // namespace cc
