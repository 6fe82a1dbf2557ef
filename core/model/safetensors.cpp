#include "core/model/safetensors.h"

#include "core/base/json_text.h"

#include <algorithm>
#include <limits>
#include <set>
#include <stdexcept>

namespace cc {
namespace {

// The reference implementation (huggingface/safetensors) refuses headers over 100 MB; a header
// of a real checkpoint is tens of kilobytes.
constexpr uint64_t kMaxHeaderBytes = 100ull * 1024 * 1024;
// A valid header nests three levels ({name: {"shape": [..]}}); anything deeper is not a header.
constexpr int kMaxHeaderDepth = 4;

[[noreturn]] void fail(const std::string& source, const std::string& problem) {
    throw std::runtime_error(source + ": " + problem);
}

[[noreturn]] void fail_tensor(const std::string& source, const std::string& name, const std::string& problem) {
    throw std::runtime_error(source + ": tensor \"" + name + "\": " + problem);
}

std::string shape_text(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

// A non-negative integer that fits in int64 (JSON floats such as 2.0 are refused).
bool as_count(const ordered_json& v, uint64_t& out) {
    if (v.is_number_unsigned())
        out = v.get<uint64_t>();
    else if (v.is_number_integer() && v.get<int64_t>() >= 0)
        out = static_cast<uint64_t>(v.get<int64_t>());
    else
        return false;
    return out <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
}

// nlohmann keeps the last of duplicate keys silently; a header naming a tensor twice is ambiguous,
// so the keys are checked in a second pass over the (already depth-checked, valid) text.
void check_duplicate_keys(std::string_view text, const std::string& source) {
    std::vector<std::set<std::string>> open;
    std::string duplicate;
    int duplicate_depth = 0;
    auto cb = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        using E = nlohmann::json::parse_event_t;
        if (event == E::object_start)
            open.emplace_back();
        else if (event == E::object_end)
            open.pop_back();
        else if (event == E::key && duplicate.empty() && !open.empty() &&
                 !open.back().insert(parsed.get<std::string>()).second) {
            duplicate = parsed.get<std::string>();
            duplicate_depth = depth;
        }
        return true;
    };
    [[maybe_unused]] const auto reparsed = nlohmann::json::parse(text.begin(), text.end(), cb);
    if (duplicate.empty()) return;
    if (duplicate_depth <= 1) fail_tensor(source, duplicate, "appears twice in the header");
    fail(source, "header has the key \"" + duplicate + "\" twice in one object");
}

DType parse_dtype(const ordered_json& v, const std::string& source, const std::string& name) {
    if (!v.is_string()) fail_tensor(source, name, "\"dtype\" must be a string");
    const auto& s = v.get_ref<const std::string&>();
    if (s == "F32") return DType::f32;
    if (s == "F16") return DType::f16;
    if (s == "BF16") return DType::bf16;
    fail_tensor(source, name, "dtype \"" + s + "\" is not supported (F32, F16, BF16)");
}

}  // namespace

const char* dtype_name(DType t) {
    switch (t) {
        case DType::f32:
            return "F32";
        case DType::f16:
            return "F16";
        case DType::bf16:
            return "BF16";
    }
    return "?";
}

size_t dtype_bytes(DType t) {
    switch (t) {
        case DType::f32:
            return 4;
        case DType::f16:
            return 2;
        case DType::bf16:
            return 2;
    }
    return 0;
}

std::vector<TensorInfo> parse_safetensors_header(std::span<const std::byte> bytes, size_t file_size,
                                                 const std::string& source, size_t* data_start) {
    if (file_size < 8)
        fail(source, "file is " + std::to_string(file_size) + " bytes, too short for a safetensors header");
    if (bytes.size() < 8 || bytes.size() > file_size)
        fail(source, "given " + std::to_string(bytes.size()) + " bytes of a " + std::to_string(file_size) +
                         "-byte file, not a prefix holding the header length");
    uint64_t n_header = 0;
    for (int i = 7; i >= 0; --i) n_header = (n_header << 8) | static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
    if (n_header > kMaxHeaderBytes)
        fail(source, "header length " + std::to_string(n_header) + " bytes is over the 100 MiB limit");
    if (8 + n_header > file_size)
        fail(source, "header length " + std::to_string(n_header) + " bytes goes beyond the end of the file (" +
                         std::to_string(file_size) + " bytes; truncated?)");
    if (8 + n_header > bytes.size())
        fail(source, "header length " + std::to_string(n_header) + " bytes, but only " +
                         std::to_string(bytes.size() - 8) + " header bytes were given");
    const size_t start = static_cast<size_t>(8 + n_header);
    const size_t data_bytes = file_size - start;

    const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8), static_cast<size_t>(n_header));
    if (text.empty() || text.front() != '{') fail(source, "header is not a JSON object (it must start with '{')");
    const ordered_json header = parse_json_text(text, source + ": header", kMaxHeaderDepth);
    if (!header.is_object()) fail(source, "header is not a JSON object");
    check_duplicate_keys(text, source);

    std::vector<TensorInfo> tensors;
    for (const auto& [name, entry] : header.items()) {
        if (name == "__metadata__") {
            if (!entry.is_object()) fail(source, "\"__metadata__\" must be an object of strings");
            for (const auto& [key, value] : entry.items())
                if (!value.is_string())
                    fail(source, "\"__metadata__\" must be an object of strings (\"" + key + "\" is " +
                                     value.type_name() + ")");
            continue;
        }
        if (!entry.is_object())
            fail_tensor(source, name, "entry must be an object {\"dtype\", \"shape\", \"data_offsets\"}");
        for (const auto& [key, value] : entry.items())
            if (key != "dtype" && key != "shape" && key != "data_offsets")
                fail_tensor(source, name, "unknown key \"" + key + "\"");
        for (const char* key : {"dtype", "shape", "data_offsets"})
            if (!entry.contains(key)) fail_tensor(source, name, std::string("missing \"") + key + "\"");

        TensorInfo t;
        t.name = name;
        t.dtype = parse_dtype(entry["dtype"], source, name);

        const auto& shape = entry["shape"];
        if (!shape.is_array()) fail_tensor(source, name, "\"shape\" must be an array of non-negative integers");
        // Products are checked against the size of the data section, which also bounds overflow:
        // n_elements never exceeds data_bytes once a factor is known to keep it there.
        uint64_t n_elements = 1;
        bool overflow = false;
        for (const auto& d : shape) {
            uint64_t v = 0;
            if (!as_count(d, v)) fail_tensor(source, name, "\"shape\" must be an array of non-negative integers");
            t.shape.push_back(static_cast<int64_t>(v));
            if (v != 0 && n_elements > std::numeric_limits<uint64_t>::max() / v)
                overflow = true;
            else
                n_elements *= v;
        }
        const uint64_t elem = dtype_bytes(t.dtype);
        if (overflow || n_elements > std::numeric_limits<uint64_t>::max() / elem)
            fail_tensor(source, name, "shape " + shape_text(t.shape) + " overflows 64 bits");
        const uint64_t n_bytes = n_elements * elem;

        const auto& off = entry["data_offsets"];
        uint64_t begin = 0, end = 0;
        if (!off.is_array() || off.size() != 2 || !as_count(off[0], begin) || !as_count(off[1], end))
            fail_tensor(source, name, "\"data_offsets\" must be [begin, end] with non-negative integers");
        if (begin > end)
            fail_tensor(source, name,
                        "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] has begin > end");
        if (end > data_bytes)
            fail_tensor(source, name,
                        "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                            "] go beyond the data section (" + std::to_string(data_bytes) + " bytes)");
        if (end - begin != n_bytes)
            fail_tensor(source, name,
                        "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] hold " +
                            std::to_string(end - begin) + " bytes, but shape " + shape_text(t.shape) + " " +
                            dtype_name(t.dtype) + " needs " + std::to_string(n_bytes));
        t.offset = static_cast<size_t>(begin);
        t.n_bytes = static_cast<size_t>(n_bytes);
        tensors.push_back(std::move(t));
    }

    // Like the reference implementation, the data section must be covered exactly: tensors sorted
    // by offset are contiguous from 0 to the end of the file (no overlap, no gap, nothing after).
    std::vector<size_t> order(tensors.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        const auto& ta = tensors[a];
        const auto& tb = tensors[b];
        return ta.offset != tb.offset ? ta.offset < tb.offset : ta.n_bytes < tb.n_bytes;
    });
    size_t expected = 0;
    const TensorInfo* previous = nullptr;
    for (const size_t i : order) {
        const auto& t = tensors[i];
        if (t.offset < expected)
            fail_tensor(source, t.name,
                        "data [" + std::to_string(t.offset) + ", " + std::to_string(t.offset + t.n_bytes) +
                            ") overlaps tensor \"" + previous->name + "\" [" + std::to_string(previous->offset) + ", " +
                            std::to_string(expected) + ")");
        if (t.offset > expected)
            fail_tensor(source, t.name,
                        "data starts at " + std::to_string(t.offset) + ", leaving a gap after byte " +
                            std::to_string(expected) + " (safetensors data must be contiguous)");
        expected = t.offset + t.n_bytes;
        previous = &t;
    }
    if (expected != data_bytes)
        fail(source, "tensors cover " + std::to_string(expected) + " of the " + std::to_string(data_bytes) +
                         " data bytes (trailing bytes after the last tensor)");

    if (data_start) *data_start = start;
    return tensors;
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : file_(path), path_(path), bytes_(file_.bytes()) {
    tensors_ = parse_safetensors_header(bytes_, bytes_.size(), path.string(), &data_start_);
    for (size_t i = 0; i < tensors_.size(); ++i) by_name_.emplace(tensors_[i].name, i);
}

SafetensorsFile::SafetensorsFile(std::span<const std::byte> bytes, const std::string& source)
    : path_(source), bytes_(bytes) {
    tensors_ = parse_safetensors_header(bytes_, bytes_.size(), source, &data_start_);
    for (size_t i = 0; i < tensors_.size(); ++i) by_name_.emplace(tensors_[i].name, i);
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
    const auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

std::span<const std::byte> SafetensorsFile::data(const TensorInfo& t) const {
    return bytes_.subspan(data_start_ + t.offset, t.n_bytes);
}

}  // namespace cc
