// --dist-backend and --dist-timeout, for the subcommands that run as one rank of a job started
// by torchrun or srun (docs/distributed.md).
#pragma once

#include <string>

#include <CLI/CLI.hpp>
#include <c10/core/Device.h>

#include "core/process_group.h"

namespace normlab::app {

struct DistCliOptions {
  std::string backend = "auto";  // auto | gloo | nccl
  double timeout_s = 1800;       // PyTorch's default
};

void add_dist_options(CLI::App& command, DistCliOptions& options);

// The job this process belongs to (one process without a launcher's environment), and its
// device: a bare "cuda" becomes cuda:LOCAL_RANK, one GPU per rank as torchrun users expect.
struct Joined {
  core::ProcessGroup group;
  c10::Device device;
};
Joined join_job(const DistCliOptions& options, c10::Device device);

}  // namespace normlab::app
