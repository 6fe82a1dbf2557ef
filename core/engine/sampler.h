// Choosing the next token from a step's logits: greedy, or temperature + top-p with an explicit
// generator, so a seed gives the same token on every platform.
#pragma once

#include "core/text/tokenizer.h"

#include <random>
#include <vector>

namespace cc {

// The first index of the maximum (ties go to the lower id, as torch.argmax does; NaN never wins:
// km::argmax_row, the rule every backend's greedy tokens follow).
token_id argmax_token(const std::vector<float>& logits);

// temperature <= 0: argmax_token. Otherwise softmax(logits / temperature) in double; with
// top_p < 1 the smallest set of most likely tokens whose mass reaches top_p (ties by lower id) and
// one draw from it, walking it most likely first; with top_p >= 1 one draw from the whole
// distribution, walking it in id order (no sort: the same distribution). One 53-bit draw from
// `rng` per call, converted here (std::*_distribution are not portable), so a seed gives the same
// token on every platform. Thread-safe (its scratch is per thread).
token_id sample_token(const std::vector<float>& logits, float temperature, float top_p, std::mt19937_64& rng);

}  // namespace cc
