// The processes of one data-parallel job, on c10d (REFERENCE.md §8): a TCPStore for the
// rendezvous and a Gloo (CPU) or NCCL (CUDA) process group for the collectives. Without a launcher it is one
// process, and every collective returns at once. docs/distributed.md.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "core/launch_env.h"

namespace normlab::core {

// auto: NCCL with a CUDA device, Gloo with the CPU, as torch.distributed's default. `nccl` is
// refused when parsed by a build without NCCL, and with a CPU device when connecting.
enum class DistBackend { kAuto, kGloo, kNccl };
DistBackend parse_dist_backend(const std::string& name);

struct DistOptions {
  DistBackend backend = DistBackend::kAuto;
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};  // PyTorch's default
};

class ProcessGroup {
 public:
  ProcessGroup();  // one process: rank 0 of 1

  // Joins the job `env` describes: rank 0 serves the store (or torchrun's agent does), every
  // rank checks in, and a rank missing, started twice or with another WORLD_SIZE is one clear
  // error on the ranks that see it within `options.timeout`.
  static ProcessGroup connect(const LaunchEnv& env, const DistOptions& options, const c10::Device& device);
  // connect() when a launcher set the environment (read_launch_env), else one process.
  static ProcessGroup from_environment(const DistOptions& options, const c10::Device& device);

  int rank() const;
  int size() const;
  bool is_main() const { return rank() == 0; }  // rank 0 writes the files

  // In place, every rank a contiguous tensor of the same shape and dtype, on any device (NCCL:
  // a CPU tensor goes through the GPU). A rank lost during a collective becomes
  // std::runtime_error naming it, on every rank left (never a hang).
  void all_reduce_sum(at::Tensor& tensor);

  // A collective started and not yet waited for.
  class Pending {
   public:
    // Waits for it; a failure as the blocking collectives'. Nothing when none is pending.
    void wait();

   private:
    friend class ProcessGroup;
    std::function<void()> wait_;
  };
  // all_reduce_sum that returns once the collective is queued (c10d's async work): `tensor`
  // must stay alive and untouched until wait(). Every rank must start its collectives in the
  // same order.
  Pending start_all_reduce_sum(at::Tensor& tensor);
  void broadcast(at::Tensor& tensor, int root = 0);
  // Every rank's `bytes`, indexed by rank.
  std::vector<std::string> all_gather(const std::string& bytes);
  void barrier();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace normlab::core
