// CUDA graphs for the backend's small chunks (decode steps, short cached suffixes), opt-in
// (CudaBackendOptions::graphs): a chunk's kernel sequence, launched once per layer and op, costs
// a few microseconds of host time per launch (~15 launches a layer: 540 for a 36-layer model) when
// the GPU needs a few milliseconds for the whole step; one graph launch replaces them.
//
// StepGraphs::run(key, enqueue) runs `enqueue` (which only enqueues work on the stream: kernels
// and cuBLASLt calls, no synchronisation, no host copies):
//   - the first time a key is seen, eagerly (anything loaded lazily is loaded outside a capture);
//   - afterwards captured into a graph (cudaStreamCaptureModeRelaxed, so the launch code may set a
//     kernel's shared-memory attribute while capturing) that updates the key's instantiated graph in
//     place (cudaGraphExecUpdate: the same kernels in the same order, their arguments and grids
//     changed, e.g. attention over one more position), or is instantiated anew when the update is
//     refused; then the instantiated graph is launched.
// The key names the chunk's shape (rows, pieces and their rows: what decides which kernels run),
// so replays of one key share a topology. A graph runs exactly the kernels with exactly the
// arguments of the eager run, so the bits are the same (the self-test's "graphs" rows check it).
//
// StepGraphs::replay(key, enqueue) is the form without a capture per step, for an `enqueue` whose
// launches read everything that changes between steps (tokens, positions, KV blocks) from device
// buffers that the caller rewrites before the call (CudaBackendOptions::graph_replay): the first
// time a key is seen eagerly, the second time captured and instantiated, then launched, and from
// then on only launched. Its keys must differ from run()'s (the caller marks them).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

namespace cc::cuda {

class StepGraphs {
public:
    explicit StepGraphs(size_t max_graphs = 512) : max_graphs_(max_graphs) {}
    ~StepGraphs() { clear(); }  // the owner synchronises its stream first
    StepGraphs(const StepGraphs&) = delete;
    StepGraphs& operator=(const StepGraphs&) = delete;

    void run(const std::vector<int>& key, cudaStream_t stream, const std::function<void()>& enqueue);
    void replay(const std::vector<int>& key, cudaStream_t stream, const std::function<void()>& enqueue);
    void clear();  // no launch of these graphs may be in flight (the caller has synchronised)
    bool empty() const { return exec_.empty(); }

private:
    // The key's entry; nullptr when it is new (then `enqueue` has run eagerly and it is kept, as
    // seen, with no graph yet).
    cudaGraphExec_t* find_or_run_eagerly(const std::vector<int>& key, cudaStream_t stream,
                                         const std::function<void()>& enqueue);
    size_t max_graphs_;
    std::map<std::vector<int>, cudaGraphExec_t> exec_;  // nullptr: seen once, run eagerly
};

}  // namespace cc::cuda
