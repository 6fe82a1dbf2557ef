// Runs a fuzz entry point without libFuzzer, so every ordinary build exercises it in ctest:
// each seed file as is, then a fixed number of seeded mutations of each (bit flips, byte
// insertions/deletions, truncations, splices). Deterministic: the same seed gives the same inputs.
//   usage: fuzz_replay_X [--mutations N] [--budget M] [--seed S] CORPUS_DIR_OR_FILE...
// --budget caps the mutated inputs over all seeds (each seed gets min(N, M / n_seeds), at least
// one), so a corpus that grows with libFuzzer runs keeps the ctest time bounded.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::vector<uint8_t> read_bytes(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void mutate(std::vector<uint8_t>& b, std::mt19937_64& rng, const std::vector<std::vector<uint8_t>>& seeds) {
    static const char* tokens[] = {"{", "}", "[", "]", "\"", ",", ":", "null", "1e999", "-0", "\\u0000", "\\ud800",
                                   "\"name\"", "\"parameters\"", "\"type\"", "\"function\"", "\"tools\""};
    const int n_ops = 1 + static_cast<int>(rng() % 4);
    for (int op = 0; op < n_ops; ++op) {
        const size_t pos = b.empty() ? 0 : rng() % (b.size() + 1);
        switch (rng() % 6) {
            case 0: if (!b.empty()) b[pos % b.size()] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
            case 1: b.insert(b.begin() + static_cast<long>(pos), static_cast<uint8_t>(rng())); break;
            case 2: if (!b.empty()) b.erase(b.begin() + static_cast<long>(pos % b.size())); break;
            case 3: b.resize(pos); break;
            case 4: {
                const std::string t = tokens[rng() % std::size(tokens)];
                b.insert(b.begin() + static_cast<long>(pos), t.begin(), t.end());
                break;
            }
            default: {
                const auto& other = seeds[rng() % seeds.size()];
                if (other.empty()) break;
                const size_t from = rng() % other.size();
                const size_t len = std::min<size_t>(other.size() - from, 1 + rng() % 64);
                b.insert(b.begin() + static_cast<long>(pos), other.begin() + static_cast<long>(from),
                         other.begin() + static_cast<long>(from + len));
            }
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    int n_mutations = 200;
    long budget = -1;
    uint64_t seed = 1;
    std::vector<std::filesystem::path> files;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--mutations" && i + 1 < argc) n_mutations = std::atoi(argv[++i]);
        else if (a == "--budget" && i + 1 < argc) budget = std::atol(argv[++i]);
        else if (a == "--seed" && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
        else if (std::filesystem::is_directory(a)) {
            for (const auto& e : std::filesystem::directory_iterator(a)) files.push_back(e.path());
        } else files.emplace_back(a);
    }
    std::sort(files.begin(), files.end());
    std::vector<std::vector<uint8_t>> seeds;
    for (const auto& f : files) seeds.push_back(read_bytes(f));
    if (seeds.empty()) {
        std::fprintf(stderr, "fuzz replay: no seed inputs given\n");
        return 2;
    }
    if (budget >= 0)
        n_mutations = std::max(1, static_cast<int>(std::min<long>(n_mutations, budget / static_cast<long>(seeds.size()))));
    std::mt19937_64 rng(seed);
    size_t n_runs = 0;
    for (const auto& s : seeds) {
        LLVMFuzzerTestOneInput(s.data(), s.size());
        ++n_runs;
        for (int m = 0; m < n_mutations; ++m) {
            auto b = s;
            mutate(b, rng, seeds);
            LLVMFuzzerTestOneInput(b.data(), b.size());
            ++n_runs;
        }
    }
    std::printf("fuzz replay: %zu inputs from %zu seeds, no crash\n", n_runs, seeds.size());
    return 0;
}
