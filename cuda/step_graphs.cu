#include "cuda/step_graphs.h"

#include "cuda/context.h"

namespace cc::cuda {

namespace {

// Ends a capture that `enqueue` left by throwing, so that the stream is usable again.
struct CaptureGuard {
    cudaStream_t stream;
    bool open = true;
    ~CaptureGuard() {
        if (!open) return;
        cudaGraph_t g = nullptr;
        cudaStreamEndCapture(stream, &g);
        if (g != nullptr) cudaGraphDestroy(g);
        cudaGetLastError();
    }
};

// The work of `enqueue`, captured (not run).
cudaGraph_t capture(cudaStream_t stream, const std::function<void()>& enqueue) {
    cudaGraph_t graph = nullptr;
    CC_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
    CaptureGuard guard{stream};
    enqueue();
    guard.open = false;
    CC_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    return graph;
}

struct GraphGuard {
    cudaGraph_t g;
    ~GraphGuard() { cudaGraphDestroy(g); }
};

}  // namespace

cudaGraphExec_t* StepGraphs::find_or_run_eagerly(const std::vector<int>& key, cudaStream_t stream,
                                                 const std::function<void()>& enqueue) {
    auto it = exec_.find(key);
    if (it != exec_.end()) return &it->second;
    if (exec_.size() >= max_graphs_) {                 // bounded: shapes seen long ago are captured again
        CC_CUDA_CHECK(cudaStreamSynchronize(stream));  // no launch of a graph destroyed below is in flight
        clear();
    }
    exec_.emplace(key, nullptr);
    enqueue();
    return nullptr;
}

void StepGraphs::run(const std::vector<int>& key, cudaStream_t stream, const std::function<void()>& enqueue) {
    cudaGraphExec_t* entry = find_or_run_eagerly(key, stream, enqueue);
    if (entry == nullptr) return;
    GraphGuard graph{capture(stream, enqueue)};
    cudaGraphExec_t& exec = *entry;
    if (exec != nullptr) {
        cudaGraphExecUpdateResultInfo info{};
        if (cudaGraphExecUpdate(exec, graph.g, &info) != cudaSuccess) {
            cudaGetLastError();                            // a refused update is not an error: instantiate anew
            CC_CUDA_CHECK(cudaStreamSynchronize(stream));  // the previous launch of `exec` has ended
            cudaGraphExecDestroy(exec);
            exec = nullptr;
        }
    }
    if (exec == nullptr) {
        CC_CUDA_CHECK(cudaGraphInstantiate(&exec, graph.g, 0));
    }
    CC_CUDA_CHECK(cudaGraphLaunch(exec, stream));
}

void StepGraphs::replay(const std::vector<int>& key, cudaStream_t stream, const std::function<void()>& enqueue) {
    cudaGraphExec_t* entry = find_or_run_eagerly(key, stream, enqueue);
    if (entry == nullptr) return;
    if (*entry == nullptr) {
        GraphGuard graph{capture(stream, enqueue)};
        cudaGraphExec_t exec = nullptr;
        CC_CUDA_CHECK(cudaGraphInstantiate(&exec, graph.g, 0));
        *entry = exec;
    }
    CC_CUDA_CHECK(cudaGraphLaunch(*entry, stream));
}

void StepGraphs::clear() {
    for (auto& [key, exec] : exec_)
        if (exec != nullptr) cudaGraphExecDestroy(exec);
    exec_.clear();
}

}  // namespace cc::cuda
