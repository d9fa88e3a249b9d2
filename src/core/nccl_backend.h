// The one place that includes c10d's ProcessGroupNCCL.hpp (and so NCCL's nccl.h, which the
// wheel does not ship: the nvidia-nccl package beside a CUDA PyTorch has it; docs/gpu.md). Built
// only where CMake finds a CUDA LibTorch and nccl.h (NORMLAB_WITH_NCCL).
#pragma once

#include <chrono>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace normlab::core {

// Whether this build has NCCL (NORMLAB_WITH_NCCL).
bool have_nccl();

// An NCCL group over `store` for CUDA tensors, one GPU per rank (NCCL refuses two ranks on one
// GPU); its communicator is made at the first collective, on that tensor's device.
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                    int size, std::chrono::milliseconds timeout);

}  // namespace normlab::core
