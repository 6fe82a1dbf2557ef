// The safetensors format: an 8-byte little-endian header length N, N bytes of JSON header
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the data.
// Parsing is strict (header length bound, JSON validity, known dtype, offsets in range, sizes
// matching shapes, no overlap); every error names the file and the tensor.
#pragma once

#include "core/mapped_file.h"

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace cc {

enum class DType { f32, f16, bf16 };
const char* dtype_name(DType t);  // "F32", "F16", "BF16" as in safetensors
size_t dtype_bytes(DType t);

struct TensorInfo {
    std::string name;
    DType dtype = DType::f32;
    std::vector<int64_t> shape;
    size_t offset = 0;   // from the start of the data section
    size_t n_bytes = 0;
};

// Parses a header (the bytes of a whole file, or at least its first 8 + N bytes); `file_size` is
// the full file's size, used to check that every tensor lies inside the data section.
// Throws std::runtime_error "<source>: <problem>".
std::vector<TensorInfo> parse_safetensors_header(std::span<const std::byte> bytes, size_t file_size,
                                                 const std::string& source, size_t* data_start = nullptr);

class SafetensorsFile {
public:
    explicit SafetensorsFile(const std::filesystem::path& path);  // mmaps and parses
    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const TensorInfo* find(const std::string& name) const;
    std::span<const std::byte> data(const TensorInfo& t) const;
    const std::filesystem::path& path() const { return file_.path(); }

private:
    MappedFile file_;
    size_t data_start_ = 0;
    std::vector<TensorInfo> tensors_;
    std::map<std::string, size_t> by_name_;
};

}  // namespace cc
