// One request's cancel flag, shared by whoever may cancel the request (any thread) and the work
// that runs for it. A token cancelled before its work starts stops that work at once; a new
// request takes a new token, so a cancel never reaches past the request it was meant for.
#pragma once

#include <atomic>
#include <memory>

namespace cc {

class CancelToken {
public:
    CancelToken() : flag_(std::make_shared<std::atomic<bool>>(false)) {}
    void cancel() const { flag_->store(true); }
    bool cancelled() const { return flag_->load(); }
    // What long steps check (Backend::forward, weight generation); valid while a copy of the token lives.
    const std::atomic<bool>* flag() const { return flag_.get(); }

private:
    std::shared_ptr<std::atomic<bool>> flag_;
};

}  // namespace cc
