#include "core/research/nope.h"

#include "core/backend/deferred_rope.h"
#include "core/engine/compare.h"
#include "core/engine/logit_metrics.h"
#include "core/base/json_text.h"
#include "core/base/kernel_math.h"

#include <algorithm>
#include <numeric>
#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace cc {

NopeLayout nope_layout(const Tokenizer& tokenizer, std::span<const token_id> prefix_ids, const std::string& prefix_text,
                       const ToolSet& tools, const std::string& format_id) {
    const std::string what = "per_tool_nope (" + format_id + " format): ";
    if (tools.empty()) throw std::runtime_error(what + "the tool set is empty: there is nothing to compile per tool");

    // byte offset where each token ends; a boundary is exact when it is 0 or one of these
    const std::vector<size_t> token_end = tokenizer.token_end_offsets(prefix_ids);
    const size_t offset = token_end.empty() ? 0 : token_end.back();
    if (offset != prefix_text.size())
        throw std::runtime_error(what + "the prefix tokens decode to " + std::to_string(offset) + " bytes, the prefix text has " +
                                 std::to_string(prefix_text.size()) + ": token spans cannot be located");
    auto token_at = [&](size_t byte, const std::string& where) -> size_t {
        if (byte == 0) return 0;
        const auto it = std::lower_bound(token_end.begin(), token_end.end(), byte);
        if (it == token_end.end() || *it != byte)
            throw std::runtime_error(what + where + " does not fall between two tokens (a token straddles it), so a "
                                     "per-tool compile could not see the tokens the full prompt has");
        return size_t(it - token_end.begin()) + 1;
    };

    std::vector<size_t> start_byte;  // where each tool's text begins
    size_t from = 0, last_end = 0;
    for (const auto& tool : tools.tools()) {
        size_t at = std::string::npos, len = 0;
        for (const std::string& candidate : {tool.canonical_text, py_json_dumps(tool.schema, 4)}) {
            at = prefix_text.find(candidate, from);
            if (at != std::string::npos) {
                len = candidate.size();
                break;
            }
        }
        if (at == std::string::npos)
            throw std::runtime_error(what + "tool \"" + tool.name + "\": its JSON text is not in the rendered prefix");
        start_byte.push_back(at);
        last_end = at + len;
        from = last_end;
    }
    while (last_end < prefix_text.size() && prefix_text[last_end] == '\n') ++last_end;

    NopeLayout out;
    const auto& list = tools.tools();
    out.header_tokens = token_at(start_byte[0], "the start of tool \"" + list[0].name + "\"");
    for (size_t i = 0; i < list.size(); ++i) {
        const size_t b = token_at(start_byte[i], "the start of tool \"" + list[i].name + "\"");
        const size_t e = i + 1 < list.size() ? token_at(start_byte[i + 1], "the start of tool \"" + list[i + 1].name + "\"")
                                             : token_at(last_end, "the end of the last tool \"" + list[i].name + "\"");
        if (e <= b) throw std::runtime_error(what + "tool \"" + list[i].name + "\" has no tokens of its own");
        out.tool_begin.push_back(b);
        out.tool_tokens.push_back(e - b);
    }
    out.footer_begin = out.tool_begin.back() + out.tool_tokens.back();
    out.footer_tokens = prefix_ids.size() - out.footer_begin;
    return out;
}

double kv_image_element(std::span<const std::byte> image, size_t i, bool bf16) {
    if (bf16) {
        uint16_t h;
        std::memcpy(&h, image.data() + 2 * i, 2);
        return km::bf16_to_f32(h);
    }
    float f;
    std::memcpy(&f, image.data() + 4 * i, 4);
    return f;
}

size_t KvImageShape::bytes(int n_tokens) const {
    return size_t(n_layers) * 2 * size_t(n_kv_heads) * size_t(n_tokens) * size_t(head_dim) * elem_bytes;
}

std::vector<std::byte> kv_image_slice(std::span<const std::byte> image, int n_tokens, int first, int count,
                                      const KvImageShape& shape) {
    if (image.size() != shape.bytes(n_tokens))
        throw std::invalid_argument("kv_image_slice: the image is " + std::to_string(image.size()) + " bytes, expected " +
                                    std::to_string(shape.bytes(n_tokens)));
    if (first < 0 || count < 0 || first + count > n_tokens)
        throw std::invalid_argument("kv_image_slice: positions [" + std::to_string(first) + ", " + std::to_string(first + count) +
                                    ") are outside [0, " + std::to_string(n_tokens) + ")");
    const size_t row = size_t(shape.head_dim) * shape.elem_bytes;
    std::vector<std::byte> out(shape.bytes(count));
    std::byte* dst = out.data();
    // parts: (layer, K|V, head), each n_tokens rows in the image
    const size_t n_parts = size_t(shape.n_layers) * 2 * size_t(shape.n_kv_heads);
    for (size_t p = 0; p < n_parts; ++p) {
        std::memcpy(dst, image.data() + (p * size_t(n_tokens) + size_t(first)) * row, size_t(count) * row);
        dst += size_t(count) * row;
    }
    return out;
}

std::vector<std::byte> kv_image_concat(std::span<const std::vector<std::byte>> images, std::span<const int> n_tokens,
                                      const KvImageShape& shape) {
    const std::vector<std::span<const std::byte>> spans(images.begin(), images.end());
    return kv_image_concat(std::span<const std::span<const std::byte>>(spans), n_tokens, shape);
}

std::vector<std::byte> kv_image_concat(std::span<const std::span<const std::byte>> images, std::span<const int> n_tokens,
                                      const KvImageShape& shape) {
    int total = 0;
    for (int n : n_tokens) total += n;
    std::vector<std::byte> out(shape.bytes(total));
    kv_image_concat_into(out, images, n_tokens, shape);
    return out;
}

void kv_image_concat_into(std::span<std::byte> out, std::span<const std::span<const std::byte>> images,
                          std::span<const int> n_tokens, const KvImageShape& shape) {
    if (images.size() != n_tokens.size()) throw std::invalid_argument("kv_image_concat: one token count per image");
    int total = 0;
    for (size_t i = 0; i < images.size(); ++i) {
        if (images[i].size() != shape.bytes(n_tokens[i]))
            throw std::invalid_argument("kv_image_concat: image " + std::to_string(i) + " is " + std::to_string(images[i].size()) +
                                        " bytes, expected " + std::to_string(shape.bytes(n_tokens[i])));
        total += n_tokens[i];
    }
    if (out.size() != shape.bytes(total))
        throw std::invalid_argument("kv_image_concat: the output is " + std::to_string(out.size()) + " bytes, expected " +
                                    std::to_string(shape.bytes(total)));
    const size_t row = size_t(shape.head_dim) * shape.elem_bytes;
    std::byte* dst = out.data();
    const size_t n_parts = size_t(shape.n_layers) * 2 * size_t(shape.n_kv_heads);
    for (size_t p = 0; p < n_parts; ++p)
        for (size_t i = 0; i < images.size(); ++i) {
            const size_t n = size_t(n_tokens[i]) * row;
            std::memcpy(dst, images[i].data() + p * n, n);
            dst += n;
        }
}

std::vector<double> kv_image_max_abs_diff_per_layer(std::span<const std::byte> a, std::span<const std::byte> b,
                                                    int n_tokens, const KvImageShape& shape, bool bf16) {
    if (a.size() != shape.bytes(n_tokens) || b.size() != shape.bytes(n_tokens))
        throw std::invalid_argument("kv_image_max_abs_diff_per_layer: the images are not " +
                                    std::to_string(shape.bytes(n_tokens)) + " bytes each");
    const size_t layer_elems = 2 * size_t(shape.n_kv_heads) * size_t(n_tokens) * size_t(shape.head_dim);
    auto at = [&](std::span<const std::byte> img, size_t i) { return kv_image_element(img, i, bf16); };
    std::vector<double> out(size_t(shape.n_layers), 0.0);
    for (int l = 0; l < shape.n_layers; ++l)
        for (size_t i = size_t(l) * layer_elems; i < size_t(l + 1) * layer_elems; ++i) {
            const double d = std::abs(at(a, i) - at(b, i));
            // NaN compares false: count it as an infinite difference rather than none
            out[size_t(l)] = std::isnan(d) ? INFINITY : std::max(out[size_t(l)], d);
        }
    return out;
}

std::string nope_report_text(const NopeReport& r) {
    std::ostringstream o;
    o << "per-tool NoPE (experiment, paper 3.2-3.3): " << r.n_tools << " tools compiled alone and composed with deferred RoPE\n"
      << "  layout: header " << r.header_tokens << " + tools";
    for (size_t i = 0; i < r.tool_tokens.size(); ++i) o << (i ? "," : " ") << r.tool_tokens[i];
    o << " = " << r.composed_tokens << " composed tokens; footer " << r.footer_tokens << " tokens prefilled with the query; kv "
      << r.kv_dtype << (r.reused ? "; composition reused" : "") << "\n"
      << "  RoPE check (deferred vs standard rotation, every per-tool compile): max |diff| " << r.rope_check_max_abs_diff
      << " across " << r.rope_check_per_layer.size() << " layers\n"
      << "  vs full prefill: first token: logit cosine " << r.logit_cosine_first << ", KL(full || nope) " << r.kl_first
      << " nats; over the full run's " << r.compared_steps << " steps (teacher-forced): mean cosine " << r.logit_cosine_mean
      << ", top-1 agreement " << r.top1_agreement << "\n"
      << "  output: " << (r.identical_tokens ? "identical tokens" : "different tokens")
      << (r.identical_logits ? " and bit-identical logits" : "");
    if (r.first_difference) o << ", first difference at generated token " << *r.first_difference;
    o << ", max |d logit| " << r.max_abs_logit_diff << "; same tool called: " << (r.tool_name_match ? "yes" : "no") << "\n";
    return o.str();
}

nlohmann::ordered_json to_json(const ApproxComparison& c) {
    using nlohmann::ordered_json;
    const auto num = json_number_or_null;
    return ordered_json{{"logit_cosine_first", num(c.logit_cosine_first)},
                        {"logit_cosine_mean", num(c.logit_cosine_mean)},
                        {"kl_first", num(c.kl_first)},
                        {"compared_steps", c.compared_steps},
                        {"top1_agreement", c.top1_agreement},
                        {"identical_tokens", c.identical_tokens},
                        {"identical_logits", c.identical_logits},
                        {"max_abs_logit_diff", c.max_abs_logit_diff},
                        {"first_difference", c.first_difference ? ordered_json(*c.first_difference) : ordered_json(nullptr)},
                        {"tool_name_match", c.tool_name_match}};
}

nlohmann::ordered_json to_json(const NopeReport& n) {
    using nlohmann::ordered_json;
    const auto num = json_number_or_null;
    ordered_json j{{"n_tools", n.n_tools},
                        {"header_tokens", n.header_tokens},
                        {"tool_tokens", n.tool_tokens},
                        {"footer_tokens", n.footer_tokens},
                        {"composed_tokens", n.composed_tokens},
                        {"kv_dtype", n.kv_dtype},
                        {"rope_check_max_abs_diff", num(n.rope_check_max_abs_diff)},
                        {"rope_check_per_layer", n.rope_check_per_layer}};
    j.update(to_json(static_cast<const ApproxComparison&>(n)));
    j["build_ms"] = n.build_ms;
    j["reused"] = n.reused;
    return j;
}

void kv_image_write(std::span<std::byte> image, int n_tokens, int first, std::span<const std::byte> part, int count,
                    const KvImageShape& shape, int layer_begin, int layer_end) {
    if (layer_end < 0) layer_end = shape.n_layers;
    if (image.size() != shape.bytes(n_tokens) || part.size() != shape.bytes(count))
        throw std::invalid_argument("kv_image_write: the images are not " + std::to_string(shape.bytes(n_tokens)) + " and " +
                                    std::to_string(shape.bytes(count)) + " bytes");
    if (first < 0 || count < 0 || first + count > n_tokens)
        throw std::invalid_argument("kv_image_write: positions [" + std::to_string(first) + ", " + std::to_string(first + count) +
                                    ") are outside [0, " + std::to_string(n_tokens) + ")");
    if (layer_begin < 0 || layer_begin > layer_end || layer_end > shape.n_layers)
        throw std::invalid_argument("kv_image_write: layers [" + std::to_string(layer_begin) + ", " + std::to_string(layer_end) +
                                    ") are outside [0, " + std::to_string(shape.n_layers) + ")");
    const size_t row = size_t(shape.head_dim) * shape.elem_bytes;
    const size_t parts_per_layer = 2 * size_t(shape.n_kv_heads);
    for (size_t p = size_t(layer_begin) * parts_per_layer; p < size_t(layer_end) * parts_per_layer; ++p)
        std::memcpy(image.data() + (p * size_t(n_tokens) + size_t(first)) * row, part.data() + p * size_t(count) * row,
                    size_t(count) * row);
}

// ---- the chunk library -----------------------------------------------------------------------

struct ChunkLibrary::Chunk {
    std::vector<std::byte> image;  // the header: rotated K/V from position 0; a tool: K before RoPE, and V
    int n_tokens = 0;
    std::vector<double> rope_check_per_layer;  // tools only
};

ChunkLibrary::ChunkLibrary() = default;
ChunkLibrary::~ChunkLibrary() = default;
size_t ChunkLibrary::size() const { return chunks_.size(); }

// The key: header ids, a separator that is no token id, then the tool's ids (none for the header).
const ChunkLibrary::Chunk& ChunkLibrary::chunk(Engine& engine, std::span<const token_id> header_ids,
                                               std::span<const token_id> tool_ids, const KvBlock* header, size_t& computed,
                                               double& compute_ms) {
    std::vector<token_id> key(header_ids.begin(), header_ids.end());
    key.push_back(-1);
    key.insert(key.end(), tool_ids.begin(), tool_ids.end());
    auto& slot = chunks_[key];
    if (slot) return *slot;

    Stopwatch clock;
    Backend& be = engine.backend();
    const std::atomic<bool>* cancel = &engine.cancel_flag();
    auto c = std::make_unique<Chunk>();
    const int H = int(header_ids.size());
    if (tool_ids.empty()) {
        auto block = be.allocate_kv(H);
        be.forward(header_ids, KvView{nullptr, 0, block.get()}, {}, cancel);
        c->n_tokens = H;
        c->image.resize(be.kv_bytes(H));
        be.export_kv(*block, H, c->image);
    } else {
        // the tool right after the header (its reference position), keys captured before RoPE
        DeferredRope& rope = require_deferred_rope(be);
        const ModelConfig& cfg = be.config();
        const bool bf16 = be.kv_dtype() == KvDType::bf16;
        const KvImageShape shape{cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, size_t(bf16 ? 2 : 4)};
        const int L = int(tool_ids.size());
        auto rotated = be.allocate_kv(L);
        auto unrotated = be.allocate_kv(L);
        rope.forward_capture_unrotated(tool_ids, KvView{header, H, rotated.get()}, {}, *unrotated, cancel);
        std::vector<std::byte> rot(be.kv_bytes(L));
        c->image.resize(be.kv_bytes(L));
        be.export_kv(*rotated, L, rot);
        be.export_kv(*unrotated, L, c->image);
        c->n_tokens = L;
        // RoPE algebra check: deferred rotation at the positions of this forward must give its keys.
        std::vector<std::byte> check = c->image;
        std::vector<int> positions(static_cast<size_t>(L));
        std::iota(positions.begin(), positions.end(), H);
        rope.rope_rotate_kv(check, L, positions);
        c->rope_check_per_layer = kv_image_max_abs_diff_per_layer(check, rot, L, shape, bf16);
    }
    ++computed;
    compute_ms += clock.elapsed_ms();
    slot = std::move(c);
    return *slot;
}

// What is composed, for prefix ids P laid out as header | tool_0 .. tool_{n-1} | footer:
//   header: P[header], a plain forward from position 0 (rotated K, as in any prefill).
//   tool i: P[tool i] forwarded after the header alone (positions H .. H + L_i - 1), capturing its
//           K before RoPE and its V: it attends to the header and itself, never to other tools.
//   composed image: header K/V, then the tools' K/V one after the other, their K rotated at the
//           positions H + L_0 + ... + L_{i-1} + t they have in the full prompt.
// With one tool the composition is the full prompt's prefix K/V bit for bit (f32 KV).
ChunkLibrary::Composition ChunkLibrary::compose(Engine& engine, const NopeLayout& lay, std::vector<std::byte> buffer) {
    Backend& be = engine.backend();
    if (backend_ != &be) {
        chunks_.clear();
        backend_ = &be;
    }
    const Engine::PrefixRef prefix = engine.current_prefix();
    const std::span<const token_id> ids = prefix.ids;
    const ModelConfig& c = be.config();
    const bool bf16 = be.kv_dtype() == KvDType::bf16;
    const KvImageShape shape{c.n_layers, c.n_kv_heads, c.head_dim, size_t(bf16 ? 2 : 4)};
    const int H = int(lay.header_tokens);
    const size_t n_tools = lay.tool_tokens.size();

    Composition out;
    const std::span<const token_id> header_ids = ids.first(size_t(H));
    const Chunk& header = chunk(engine, header_ids, {}, nullptr, out.computed_chunks, out.compute_ms);
    std::unique_ptr<KvBlock> header_block;  // linked only when a tool must be computed
    std::vector<const Chunk*> tools;
    out.rope_check_per_layer.assign(size_t(c.n_layers), 0.0);
    for (size_t i = 0; i < n_tools; ++i) {
        const auto tool_ids = ids.subspan(lay.tool_begin[i], lay.tool_tokens[i]);
        if (!header_block) header_block = be.link_kv(header.image, H, nullptr);
        tools.push_back(&chunk(engine, header_ids, tool_ids, header_block.get(), out.computed_chunks, out.compute_ms));
        for (size_t l = 0; l < tools.back()->rope_check_per_layer.size(); ++l)
            out.rope_check_per_layer[l] = std::max(out.rope_check_per_layer[l], tools.back()->rope_check_per_layer[l]);
        engine.report_progress(EngineProgress{"nope_compile", i + 1, n_tools});
        if (engine.cancel_flag().load()) throw Cancelled();  // chunks from the library run no forward that would see it
    }

    // Compose: header, then every tool's pre-RoPE K/V, into one image (the caller's buffer when it
    // is given, so a repeated composition touches no fresh memory); then the tools' keys rotated in
    // place at their composed positions.
    Stopwatch clock;
    std::vector<std::span<const std::byte>> parts{header.image};
    std::vector<int> part_tokens{H};
    for (const Chunk* t : tools) {
        parts.push_back(t->image);
        part_tokens.push_back(t->n_tokens);
    }
    const int N = std::accumulate(part_tokens.begin(), part_tokens.end(), 0);
    out.image = std::move(buffer);
    out.image.resize(shape.bytes(N));
    kv_image_concat_into(out.image, parts, part_tokens, shape);
    std::vector<int> positions(static_cast<size_t>(N - H));
    std::iota(positions.begin(), positions.end(), H);
    require_deferred_rope(be).rope_rotate_kv_range(out.image, N, H, positions);
    out.n_tokens = N;
    out.compose_ms = clock.elapsed_ms();
    return out;
}

// ---- comparison with the full prefill -----------------------------------------------------------

ApproxComparison compare_with_full(Engine& engine, const QueryResult& full, const QueryResult& result,
                                   std::span<const token_id> ids, const KvBlock& prefix, int prefix_tokens) {
    ApproxComparison out;
    // free-running outputs: compared while both runs condition on the same tokens
    const StepDiff diff = compare_steps(full, result);
    out.identical_logits = diff.identical;
    out.max_abs_logit_diff = diff.max_abs_logit_diff;
    out.first_difference = diff.first_difference;
    if (!full.step_logits.empty() && !result.step_logits.empty()) {
        out.logit_cosine_first = cosine_similarity(full.step_logits[0], result.step_logits[0]);
        out.kl_first = kl_divergence(full.step_logits[0], result.step_logits[0]);
    }
    // teacher-forced: the approximate prefix given the full run's tokens, one batch; row r's
    // logits are those a decode step would compute (a row's result does not depend on the batching).
    const size_t n_full = full.step_logits.size();
    if (result.stop_reason != StopReason::cancelled && n_full > 0) {
        Backend& be = engine.backend();
        std::vector<token_id> forced_ids(ids.begin(), ids.end());
        forced_ids.insert(forced_ids.end(), full.tokens.begin(), full.tokens.begin() + std::ptrdiff_t(n_full - 1));
        std::vector<int> rows(n_full);
        std::iota(rows.begin(), rows.end(), int(ids.size()) - 1);
        auto block = be.allocate_kv(int(forced_ids.size()));
        try {
            const auto forced = be.forward(forced_ids, KvView{&prefix, prefix_tokens, block.get()}, rows, &engine.cancel_flag());
            const size_t V = full.step_logits[0].size();
            double cos_sum = 0;
            size_t agree = 0;
            for (size_t i = 0; i < n_full; ++i) {
                const std::span<const float> got(forced.data() + i * V, V);
                cos_sum += cosine_similarity(full.step_logits[i], got);
                if (top1(full.step_logits[i]) == top1(got)) ++agree;
            }
            out.compared_steps = n_full;
            out.logit_cosine_mean = cos_sum / double(n_full);
            out.top1_agreement = double(agree) / double(n_full);
        } catch (const Cancelled&) {
            // cancelled while comparing: the first-position metrics stand, no step metrics
        }
    }
    out.identical_tokens = full.tokens == result.tokens;
    out.tool_name_match = full.tool_call.has_value() == result.tool_call.has_value() &&
                          (!full.tool_call || full.tool_call->name == result.tool_call->name);
    return out;
}

// ---- the experiment ------------------------------------------------------------------------------

// The composed prefix of one tool set on one backend, kept while both stay.
struct NopeExperiment::State {
    std::string group_key;
    const Backend* backend = nullptr;
    NopeLayout layout;
    std::unique_ptr<KvBlock> composed;      // header + every tool span, deferred RoPE applied
    int composed_tokens = 0;
    std::vector<double> rope_check_per_layer;
    double build_ms = 0;
};

NopeExperiment::NopeExperiment() = default;
NopeExperiment::~NopeExperiment() = default;

std::unique_ptr<NopeExperiment::State> NopeExperiment::build(Engine& engine) {
    const Engine::PrefixRef prefix = engine.current_prefix();
    Backend& be = engine.backend();
    require_deferred_rope(be);
    auto state = std::make_unique<State>();
    state->group_key = prefix.compile.group_key;
    state->backend = &be;
    state->layout = nope_layout(engine.tokenizer(), prefix.ids, prefix.text, prefix.tools, engine.model_info().chat_format);
    ChunkLibrary::Composition composition = library_.compose(engine, state->layout);
    state->composed_tokens = composition.n_tokens;
    state->composed = be.import_kv(composition.image, composition.n_tokens, composition.n_tokens, composition.n_tokens);
    state->rope_check_per_layer = std::move(composition.rope_check_per_layer);
    state->build_ms = composition.compute_ms + composition.compose_ms;
    return state;
}

NopeRun NopeExperiment::run(Engine& engine, const std::string& query, const QueryOptions& options,
                            const std::function<void(const TokenEvent&)>& on_token) {
    QueryOptions opts = options;
    opts.keep_logits = true;  // every step's logits, for the comparison
    NopeRun out;
    // The reference first (as compare mode does).
    opts.mode = QueryMode::full;
    out.full = engine.query(query, opts, {});
    if (out.full.stop_reason == StopReason::cancelled) throw Cancelled();

    Stopwatch submit;
    Stopwatch tokenize_clock;
    const std::vector<token_id> suffix_ids = engine.query_suffix_ids(query);
    const double tokenize_ms = tokenize_clock.elapsed_ms();

    NopeReport& report = out.report;
    const Engine::PrefixRef prefix = engine.current_prefix();
    if (state_ && state_->group_key == prefix.compile.group_key && state_->backend == &engine.backend()) {
        report.reused = true;
    } else {
        state_.reset();
        state_ = build(engine);
        report.build_ms = state_->build_ms;
    }
    const State& st = *state_;

    // footer + query, prefilled against the composed header + tools
    std::vector<token_id> ids(prefix.ids.begin() + std::ptrdiff_t(st.layout.footer_begin), prefix.ids.end());
    ids.insert(ids.end(), suffix_ids.begin(), suffix_ids.end());
    Backend& be = engine.backend();
    auto suffix_block = be.allocate_kv(int(ids.size()) + options.max_new_tokens);
    out.composed = engine.continue_from(ids, KvView{st.composed.get(), st.composed_tokens, suffix_block.get()}, opts, on_token,
                                        submit);
    out.composed.mode = "per_tool_nope";
    out.composed.timings.tokenize_ms = tokenize_ms;
    out.composed.group_key = prefix.compile.group_key;
    out.composed.prefix_tokens = size_t(st.composed_tokens);
    out.composed.suffix_tokens = ids.size();

    // ---- the report
    report.n_tools = st.layout.tool_tokens.size();
    report.header_tokens = st.layout.header_tokens;
    report.tool_tokens = st.layout.tool_tokens;
    report.footer_tokens = st.layout.footer_tokens;
    report.composed_tokens = size_t(st.composed_tokens);
    report.kv_dtype = kv_dtype_name(be.kv_dtype());
    report.rope_check_per_layer = st.rope_check_per_layer;
    for (double d : st.rope_check_per_layer) report.rope_check_max_abs_diff = std::max(report.rope_check_max_abs_diff, d);

    static_cast<ApproxComparison&>(report) =
        compare_with_full(engine, out.full, out.composed, ids, *st.composed, st.composed_tokens);
    if (!options.keep_logits) {
        out.full.step_logits.clear();
        out.composed.step_logits.clear();
    }
    return out;
}

}  // namespace cc
