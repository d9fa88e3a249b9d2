#include "dist_options.h"

#include <chrono>
#include <stdexcept>

namespace normlab::app {

void add_dist_options(CLI::App& command, DistCliOptions& options) {
  const std::string group = "Several processes (torchrun, srun; docs/distributed.md)";
  command.add_option("--dist-backend", options.backend, "collectives: auto|gloo|nccl (auto: gloo for CPU tensors)")
      ->capture_default_str()->group(group);
  command.add_option("--dist-timeout", options.timeout_s,
                     "seconds to wait for the other ranks (joining, every collective) before failing")
      ->capture_default_str()->group(group);
}

Joined join_job(const DistCliOptions& options, c10::Device device) {
  // At most a year: more would overflow the milliseconds c10d counts in (inf became -2^63 ms).
  constexpr double kLongest = 365.0 * 24 * 3600;
  if (!(options.timeout_s > 0 && options.timeout_s <= kLongest))
    throw std::invalid_argument("--dist-timeout must be > 0 seconds and at most " +
                                std::to_string(static_cast<int64_t>(kLongest)) + " (a year), got " +
                                std::to_string(options.timeout_s));
  core::DistOptions o;
  o.backend = core::parse_dist_backend(options.backend);
  o.timeout = std::chrono::milliseconds(static_cast<int64_t>(options.timeout_s * 1000));
  const auto env = core::read_launch_env();
  if (env && device.is_cuda() && !device.has_index())
    device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(env->local_rank));
  return {env ? core::ProcessGroup::connect(*env, o, device) : core::ProcessGroup(), device};
}

}  // namespace normlab::app
