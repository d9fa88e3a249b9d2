#include "core/nccl_backend.h"

#include <stdexcept>

#ifdef NORMLAB_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace normlab::core {

#ifdef NORMLAB_WITH_NCCL
bool have_nccl() { return true; }

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                    int size, std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
}
#else
bool have_nccl() { return false; }

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>&, int, int,
                                                    std::chrono::milliseconds) {
  throw std::invalid_argument("this normlab was built without NCCL (it needs a CUDA LibTorch and nccl.h when built)");
}
#endif

}  // namespace normlab::core
