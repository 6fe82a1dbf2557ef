// Fuzz entry point: evaluation datasets (outside input, core/research/eval). Any input must give a dataset
// or a std::runtime_error, never a crash, a hang or another exception type. Every tools_file
// resolves to one fixed tool set, so no file is read.
#include "core/research/eval.h"

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const cc::ToolSet tools = cc::ToolSet::from_json_text(
        R"([{"name": "get_weather", "description": "Weather.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
            {"name": "send_email", "description": "Mail.", "parameters": {"type": "object", "properties": {"to": {"type": "array"}}}}])",
        "fuzz-tools.json");
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        const auto ds = cc::parse_eval_dataset(text, "fuzz.jsonl", [](const std::string&) { return tools; });
        for (const auto& ex : ds.examples) {
            if (!ex.expected) continue;
            // An expected call scored against itself is an exact match.
            cc::ToolCall call;
            call.name = ex.expected->name;
            call.arguments = ex.expected->arguments;
            if (!cc::score_example(ex.expected, call).exact) __builtin_trap();
        }
    } catch (const std::runtime_error&) {
    }
    return 0;
}
