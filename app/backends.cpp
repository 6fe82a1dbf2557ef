#include "app/backends.h"

#include "core/cpu/cpu_backend.h"
#ifdef CC_HAVE_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace cc::app {

std::shared_ptr<const BackendRegistry> available_backends() {
    auto r = std::make_shared<BackendRegistry>();
    r->add(cpu_backend_entry());
#ifdef CC_HAVE_CUDA
    r->add(cuda::cuda_backend_entry());
#endif
    return r;
}

}  // namespace cc::app
