// Fuzz entry point: safetensors files (outside input). Any input must give a list of tensors that
// lie inside the data section, or a std::runtime_error, never a crash, a hang or another exception.
#include "core/model/safetensors.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
    try {
        size_t data_start = 0;
        const auto tensors = cc::parse_safetensors_header(bytes, size, "fuzz.safetensors", &data_start);
        // Whatever parses must be safe to read: every tensor inside the file, sized by its shape.
        for (const auto& t : tensors) {
            if (data_start + t.offset + t.n_bytes > size) __builtin_trap();
            size_t n = cc::dtype_bytes(t.dtype);
            for (const int64_t d : t.shape) n *= static_cast<size_t>(d);
            if (n != t.n_bytes) __builtin_trap();
        }
    } catch (const std::runtime_error&) {
    }
    return 0;
}
