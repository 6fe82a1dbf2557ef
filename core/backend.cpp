#include "core/backend.h"

namespace cc {

const char* kv_dtype_name(KvDType t) {
    switch (t) {
        case KvDType::f32: return "f32";
        case KvDType::bf16: return "bf16";
    }
    return "?";
}

std::unique_ptr<KvBlock> Backend::link_kv(std::span<const std::byte> data, int n_tokens, std::shared_ptr<const void>) {
    return import_kv(data, n_tokens, n_tokens);
}

std::vector<float> Backend::forward_capture_unrotated(std::span<const token_id>, const KvView&, std::span<const int>,
                                                      KvBlock&, const std::atomic<bool>*) {
    throw std::runtime_error("forward_capture_unrotated (pre-RoPE key capture, per-tool NoPE) is not supported by the " +
                             name() + " backend");
}

void Backend::rope_rotate_kv(std::span<std::byte>, int, std::span<const int>) const {
    throw std::runtime_error("rope_rotate_kv (deferred RoPE, per-tool NoPE) is not supported by the " + name() +
                             " backend");
}

size_t Backend::kv_bytes(int n_tokens) const {
    const ModelConfig& c = config();
    const size_t elem_bytes = kv_dtype() == KvDType::f32 ? 4 : 2;
    // Per layer K and V, each [n_kv_heads, n_tokens, head_dim].
    return size_t(c.n_layers) * 2 * size_t(c.n_kv_heads) * size_t(n_tokens) * size_t(c.head_dim) * elem_bytes;
}

}  // namespace cc
