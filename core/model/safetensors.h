// The safetensors format: an 8-byte little-endian header length N, N bytes of JSON header
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the data.
// Parsing is as strict as the reference implementation (huggingface/safetensors): header length at
// most 100 MiB and inside the file, a JSON object with no duplicate keys, dtype F32/F16/BF16 (others
// refused by name), shapes of non-negative integers, data_offsets in range with end - begin equal
// to the shape's size, and the tensors covering the data section exactly (no overlap, no gap, no
// trailing bytes). Every error names the file, and the tensor when there is one:
//   model.safetensors: tensor "x": dtype "I64" is not supported (F32, F16, BF16)
#pragma once

#include "core/base/mapped_file.h"

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
// the full file's size, used to check that every tensor lies inside the data section. Tensors are
// returned in header order; `*data_start` receives 8 + N.
// Throws std::runtime_error "<source>: <problem>".
std::vector<TensorInfo> parse_safetensors_header(std::span<const std::byte> bytes, size_t file_size,
                                                 const std::string& source, size_t* data_start = nullptr);

class SafetensorsFile {
public:
    explicit SafetensorsFile(const std::filesystem::path& path);  // mmaps and parses
    // A file's bytes that are already in memory (a checkpoint embedded in the program) and outlive
    // this object; `source` names it in errors. Parsed as strictly as a file on disk.
    SafetensorsFile(std::span<const std::byte> bytes, const std::string& source);
    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const TensorInfo* find(const std::string& name) const;
    std::span<const std::byte> data(const TensorInfo& t) const;
    const std::filesystem::path& path() const { return path_; }
    bool mapped() const { return file_.data() != nullptr; }  // bytes lie in a file mapping of ours

private:
    MappedFile file_;
    std::filesystem::path path_;
    std::span<const std::byte> bytes_;
    size_t data_start_ = 0;
    std::vector<TensorInfo> tensors_;
    std::map<std::string, size_t> by_name_;
};

}  // namespace cc
