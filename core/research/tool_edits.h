// Exact tool-set edits: how much of a stored group's prefix a single-tool edit
// (remove one, add one, change one's description) can reuse, and how that depends on the order the
// tools are rendered in. Token level only: the reusable part of an edited prefix is the common
// leading run of the two rendered token-id lists (what GroupStore::longest_prefix finds and
// Engine::set_tools reuses), so this needs the tokenizer and the chat format, no forward pass.
//
// The product renders in canonical order (ToolSet::tools(): sorted by canonical text, which for
// tools written {"type", "function": {"name", ...}} is byte order of the names). The other orders
// here are candidates for the order study (docs/tool-edits.md); none of them is used by the engine.
#pragma once

#include "core/text/chat_format.h"
#include "core/text/token_prefix.h"
#include "core/text/tokenizer.h"
#include "core/text/tool_set.h"

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cc {

enum class RenderOrder {
    canonical,      // the product's: by canonical text (= by name)
    family,         // families (name before the first '_' or '.') largest first, then by name inside
    schema_hash,    // by SHA-256 of the canonical text: stable, content-addressed, spreads edits evenly
    longest_first,  // by canonical text length, longest first (ties by canonical text)
    history,        // the order the list grew in: a new tool goes last (not content-addressed)
};
const char* render_order_name(RenderOrder order);  // "canonical", "family", ...
std::vector<RenderOrder> all_render_orders();

// The family of a tool name: the part before the first '_' or '.', or the whole name.
std::string_view tool_family(std::string_view name);

// `tools` in a content-addressed order (every order but history, which only the caller's list
// knows: pass it as given). Deterministic: ties are broken by canonical text.
std::vector<Tool> order_tools(std::vector<Tool> tools, RenderOrder order);

// The prefix ids of `tools` rendered in exactly the order given (the chat format renders a
// ToolSet in canonical order; the tools block is rearranged in its text before tokenizing).
// Throws std::runtime_error naming the chat format when it does not render the tools as one
// contiguous block of canonical texts.
std::vector<token_id> prefix_ids_in_order(const ChatFormat& format, const Tokenizer& tokenizer,
                                          std::span<const Tool> tools, std::string_view system_prompt);

// `tools` without the one at `index`, in the same order.
std::vector<Tool> without_tool(std::span<const Tool> tools, size_t index);
// A copy of `tool` with " " + `suffix` appended to its description (the field is created when
// absent): the "change one tool's description" edit.
Tool with_changed_description(const Tool& tool, std::string_view suffix);
// A copy of `tool` under another name (validated as any tool name is).
Tool renamed_tool(const Tool& tool, const std::string& name);

// Distinct functions pooled from BFCL files (one JSON object per line with a "function" list),
// in order of first appearance, each made a Tool ("type": "dict" read as "object", as BFCL's own
// OpenAI handler does); functions that still do not validate (a name with other characters, a
// duplicate name) are skipped and counted. Throws naming the file when one cannot be read or a line
// is not JSON.
struct PooledTools {
    std::vector<Tool> tools;
    size_t skipped = 0;
};
PooledTools pool_bfcl_functions(std::span<const std::filesystem::path> files);

// The order study: for `n_edits` seeded random edits of each kind applied to `start` (the tools in
// the order the list grew in), the reused fraction (common prefix / edited prefix tokens) in each
// render order.
enum class EditKind { remove, add, add_to_family, change_description };
const char* edit_kind_name(EditKind kind);  // "remove", "add", "add_to_family", "change_description"
std::vector<EditKind> all_edit_kinds();

struct OrderStudyCell {
    RenderOrder order;
    EditKind kind;
    std::vector<double> reused_percent;  // one per edit
};
struct OrderStudyOptions {
    size_t n_edits = 100;     // per edit kind
    uint64_t seed = 1;
};
// Each edit starts from `start` (not cumulative). add: a copy of a random tool of the set under a
// new random name of lowercase letters; add_to_family: the same, named after the family of a
// random tool of the set (family + "_" + letters: a new tool of a server already there); remove
// and change_description: a uniformly random tool.
std::vector<OrderStudyCell> run_order_study(const ChatFormat& format, const Tokenizer& tokenizer,
                                            std::span<const Tool> start, std::string_view system_prompt,
                                            const OrderStudyOptions& options);

}  // namespace cc
