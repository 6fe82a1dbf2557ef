// Runs an evaluation dataset (core/research/eval.h) through an Engine: for each example set_tools (the group
// cache makes a repeated tool set a hit) and query, then scores the parsed tool call.
//
// Modes: "cached", "full", "both" (the engine's compare mode: the full prefill and the cached path
// on the same query; both are scored and the runner counts the outputs that are identical token
// for token), or any other engine QueryMode name (cc::parse_query_mode). When an engine mode
// returns a full-prefill reference alongside (QueryResult.full), it is scored and compared the same
// way as in "both".
#pragma once

#include "core/engine/engine.h"
#include "core/research/eval.h"
#include "core/research/nope.h"

#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cc {

struct EvalRunOptions {
    std::string mode = "cached";  // cached | full | both | any QueryMode name
    QueryOptions query;           // mode is set from `mode`; the rest (max_new_tokens, sampling) is used as given
    size_t limit = 0;             // the first N examples; 0 = all
    std::string system_prompt;    // for examples without their own "system"
};

// One mode's answer to one example.
struct EvalOutput {
    std::string mode;  // "cached", "full", ...
    std::string text;
    std::vector<token_id> tokens;
    std::optional<ToolCall> tool_call;
    // A call whose arguments parse and satisfy its tool's parameters schema (json_schema_valid;
    // a call to a tool not offered is not); null when no call was made.
    std::optional<bool> schema_valid;
    ExampleScore score;
    StopReason stop_reason = StopReason::max_new_tokens;
    bool cache_hit = false;
    Tier tier = Tier::miss;
    size_t prefix_tokens = 0;
    size_t suffix_tokens = 0;
    Timings timings;
};

struct EvalRecord {
    size_t index = 0;  // position in the dataset
    std::string id;
    std::string source;  // file:line
    std::string query;
    std::string tools_label;
    size_t n_tools = 0;
    std::optional<ExpectedCall> expected;
    bool compile_hit = false;  // set_tools found the group in the cache
    Tier compile_tier = Tier::miss;
    double compile_ms = 0;
    std::vector<EvalOutput> outputs;       // one per mode, the primary mode first
    std::optional<bool> identical_tokens;  // when two outputs were compared
    std::optional<bool> identical_logits;  // the engine's compare verdict (bit-identical logits)
    std::optional<size_t> first_difference;
    std::optional<NopeReport> nope;        // per_tool_nope: the composed run against the full prefill
};

struct EvalModeSummary {
    std::string mode;
    EvalMetrics metrics;
    double mean_ttft_ms = 0;
    double mean_total_ms = 0;
    size_t n_calls = 0;         // outputs with a parsed call
    size_t n_schema_valid = 0;  // of those, schema-valid (EvalOutput::schema_valid)
};

struct EvalRunResult {
    std::string dataset;
    std::string mode;  // as requested
    std::string model;
    bool synthetic_weights = false;
    std::vector<EvalRecord> records;
    std::vector<EvalModeSummary> summaries;  // one per mode, in output order
    size_t n_compared = 0;                   // records with two outputs compared
    size_t n_identical_tokens = 0;
    size_t n_identical_logits = 0;
    bool cancelled = false;  // stopped early: records and summaries cover the finished examples
};

struct EvalProgress {
    size_t done = 0;  // examples finished
    size_t total = 0;
    const EvalRecord* last = nullptr;  // the example just finished
};

// The warning every output of a run on synthetic weights carries.
extern const char* const kSyntheticEvalWarning;

// The per-tool NoPE experiment as a runner mode (core/research/nope.h): the composed run is the
// primary output, the full prefill the second.
inline constexpr const char* kPerToolNopeMode = "per_tool_nope";

// The QueryMode a runner mode name stands for ("both" = compare, per_tool_nope = its full
// reference run); throws std::invalid_argument.
QueryMode eval_query_mode(const std::string& mode);

// Runs the examples one by one on the calling thread (the engine's owner). `cancel` is checked
// between examples; to stop the query in flight as well, also call engine.cancel(). A query that
// comes back cancelled is not scored. Throws what the engine throws, with the example's file:line.
EvalRunResult run_eval(Engine& engine, const EvalDataset& dataset, const EvalRunOptions& options,
                       const std::function<void(const EvalProgress&)>& on_progress = {},
                       const std::atomic<bool>* cancel = nullptr);

// Summaries recomputed from records (used by run_eval; exposed for tests and partial results).
std::vector<EvalModeSummary> summarize_records(const std::vector<EvalRecord>& records);

ordered_json to_json(const EvalOutput& o);
ordered_json to_json(const EvalRecord& r);
ordered_json to_json(const EvalModeSummary& s);
// Means of the per_tool_nope comparisons (records with `nope`): first-token logit cosine and
// KL(full || composed), mean cosine and top-1 agreement over the teacher-forced steps. NaN
// figures (e.g. a cosine with an all-zero logit row) are left out of their mean and counted.
struct NopeMeans {
    size_t n = 0;
    double logit_cosine_first = 0, kl_first = 0, logit_cosine_mean = 0, top1_agreement = 0;
    size_t nan_figures = 0;
};
NopeMeans nope_means(const std::vector<EvalRecord>& records);

// The summary: dataset, mode, counts, per-mode metrics, identical counts, the synthetic warning,
// and for per_tool_nope the NopeMeans ("nope").
ordered_json eval_summary_json(const EvalRunResult& r);

}  // namespace cc
