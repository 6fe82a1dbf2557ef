// Tool-calling quality: the dataset format and the paper's metrics.
//
// Dataset: JSONL, one example per line (blank lines are skipped):
//   {"id"?: "...", "tools": [...] | "tools_file": "...", "system"?: "...", "query": "...",
//    "expected": {"name": "...", "arguments": {...}} | {"name": "...", "accepted": {...}} | null}
// "accepted" is BFCL's form: per parameter the list of accepted values, "" marking an optional
// parameter (core/research/accepted_values.h); the BFCL importer (core/research/bfcl.h) writes it.
// `tools_file` is relative to the dataset file. Parsing is strict: an unknown key, a wrong type, an
// expected tool that is not in the example's tool set, or a duplicate id is an error naming
// `file:line` and the problem.
//
// Metrics, as the paper defines them (its scripts/eval/eval_context_cache.py computes the same
// counts; tests/research/test_eval_metrics.cpp recomputes its published summaries from its per-example files):
//   TSA = correct tool / tool-call examples
//   PF1 = mean parameter F1 over the examples where the tool is correct
//   EM  = (correct tool and F1 == 1) / tool-call examples
//   FPR = no-call examples where a call was made / no-call examples
//   FNR = tool-call examples where no call was made / tool-call examples
// A call to the wrong tool is neither correct nor a false negative (as in the paper).
// Parameter F1 compares the sets of (key, canonical JSON value) pairs of the predicted and the
// expected arguments; both empty = 1, exactly one empty = 0. See canonical_value() for what counts
// as equal. A ratio with a zero denominator is undefined: std::nullopt here, null in JSON (the
// paper's script divides by max(n, 1) and so prints 0).
// With an "accepted" expectation, F1 is accepted_parameter_f1 (accepted_values.h) instead: a
// parameter is correct when its value is one of the accepted ones, optional ones may be omitted.
#pragma once

#include "core/research/accepted_values.h"
#include "core/text/chat_format.h"
#include "core/base/json_text.h"
#include "core/text/tool_set.h"

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cc {

struct ExpectedCall {
    std::string name;
    ordered_json arguments = ordered_json::object();  // with `accepted`: representative_arguments(*accepted)
    std::optional<ordered_json> accepted = std::nullopt;  // BFCL form: parameter -> [accepted values]
};

struct EvalExample {
    std::string id;      // "id" from the line, else "line N"
    std::string source;  // "file:line", for messages
    ToolSet tools;
    std::string tools_label;            // the tools_file as written, or "inline"
    std::optional<std::string> system;  // absent = the runner's default system prompt
    std::string query;
    std::optional<ExpectedCall> expected;  // nullopt: the right answer is no tool call
};

struct EvalDataset {
    std::string source;  // the file name (or the label given to parse_eval_dataset)
    std::vector<EvalExample> examples;
    size_t n_tool_call() const;
    size_t n_no_call() const;
};

// Throws std::runtime_error "<file>:<line>: <problem>".
EvalDataset load_eval_dataset(const std::filesystem::path& path);
// `base_dir` resolves tools_file; `source` names the text in messages.
EvalDataset parse_eval_dataset(std::string_view text, const std::string& source, const std::filesystem::path& base_dir);
// The tool set a "tools_file" value names (called once per distinct value; throws when it cannot).
// The app passes one that reads its bundled resources.
using ToolsFileLoader = std::function<ToolSet(const std::string& tools_file)>;
EvalDataset parse_eval_dataset(std::string_view text, const std::string& source, const ToolsFileLoader& load_tools);

// The text a value is compared by: the project's compact JSON (py_json_dumps, i.e. Python's
// json.dumps with ", " / ": " separators) of the value with object keys sorted at every level.
// So key order inside objects does not matter, array order does, and the JSON type does:
// 1, 1.0 and "1" are three different values (json.dumps writes 1, 1.0 and "1"), true is not 1.
std::string canonical_value(const ordered_json& value);

// Parameter F1 of two argument objects (non-objects throw std::invalid_argument).
double parameter_f1(const ordered_json& predicted_arguments, const ordered_json& expected_arguments);

// How one output scores against its example. `predicted` is the chat format's parsed call
// (QueryResult.tool_call): a call the parser could not read a name from is no call. A call whose
// name was read but whose arguments were not a valid JSON object (ToolCall.arguments_valid false)
// is a call to that tool with F1 = 0, since its arguments cannot match.
struct ExampleScore {
    bool expects_call = false;
    bool made_call = false;
    bool correct_tool = false;    // expects_call && made_call && names equal
    std::optional<double> f1;     // only when correct_tool
    bool exact = false;           // correct_tool && f1 == 1
    bool false_positive = false;  // !expects_call && made_call
    bool false_negative = false;  // expects_call && !made_call
};
ExampleScore score_example(const std::optional<ExpectedCall>& expected, const std::optional<ToolCall>& predicted);

struct EvalMetrics {
    size_t n_examples = 0;
    size_t n_tool_call = 0;  // examples that expect a call
    size_t n_no_call = 0;    // examples that expect none
    size_t n_correct_tool = 0;
    size_t n_exact = 0;
    size_t n_false_positive = 0;
    size_t n_false_negative = 0;
    size_t n_wrong_tool = 0;                       // a call to another tool where one was expected
    double f1_sum = 0;                             // over the correct-tool examples
    std::optional<double> tsa, pf1, em, fpr, fnr;  // nullopt: zero denominator
};
EvalMetrics summarize(std::span<const ExampleScore> scores);

// {"n_examples", ..., "tsa", "pf1", "em", "fpr", "fnr"} (undefined ratios are null)
ordered_json to_json(const EvalMetrics& m);
ordered_json to_json(const ExampleScore& s);

}  // namespace cc
