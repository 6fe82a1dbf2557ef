// Comparing two runs of the same prompt step by step: compare mode (cached vs full prefill) and
// the research experiments (per-tool NoPE vs full prefill) share this one definition of
// "identical" and of the first difference.
#pragma once

#include "core/engine/engine.h"

#include <cstddef>
#include <optional>

namespace cc {

struct StepDiff {
    bool identical = false;                  // the same tokens, and every step's logits bit for bit
    double max_abs_logit_diff = 0;           // over the steps up to the first differing token
    std::optional<size_t> first_difference;  // first generated position whose logits or token differ
};

// The free-running outputs of two runs (each with step_logits kept), compared while both
// condition on the same tokens: past a differing token the runs see different text, so the
// comparison stops there.
StepDiff compare_steps(const QueryResult& reference, const QueryResult& other);

}  // namespace cc
