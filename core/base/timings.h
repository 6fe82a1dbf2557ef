// Steady-clock timing helpers; every duration is in milliseconds (DESIGN §8).
#pragma once

#include <chrono>
#include <cstdint>

namespace cc {

// Wall-clock milliseconds since the Unix epoch: the creation and last-use times the cache records.
inline int64_t unix_ms_now() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// Steady-clock durations (what every *_ms timing is measured with).
class Stopwatch {
public:
    Stopwatch() : start_(std::chrono::steady_clock::now()) {}
    void restart() { start_ = std::chrono::steady_clock::now(); }
    double elapsed_ms() const {
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
    }

private:
    std::chrono::steady_clock::time_point start_;
};

// The timing split of one query. link = lookup + disk_load + remote_load + upload + conversation_link; ttft is measured from submit
// to the first sampled token; decode covers the tokens after the first.
struct Timings {
    double tokenize_ms = 0;
    double lookup_ms = 0;
    double disk_load_ms = 0;
    double remote_load_ms = 0;        // the shared remote tier (Redis): fetch + verification of the group file
    double upload_ms = 0;
    double conversation_link_ms = 0;  // finding and copying a stored conversation state's K/V (chat)
    double link_ms = 0;
    double compile_ms = 0;   // prefix computed inside this query (a cached-mode miss), else 0
    double prefill_ms = 0;   // the suffix in cached mode, the whole prompt in full mode
    double ttft_ms = 0;
    double decode_ms = 0;
    double total_ms = 0;
    double prefill_tok_s = 0;
    double decode_tok_s = 0;
    double disk_load_gb_s = 0;
    double remote_load_gb_s = 0;      // group file bytes / remote_load_ms
    double upload_gb_s = 0;  // KV bytes / upload_ms when they were copied to the device (0 when linked in place)
};

}  // namespace cc
