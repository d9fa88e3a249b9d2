#include "core/launch_env.h"

#include <cerrno>
#include <cstdlib>
#include <stdexcept>

namespace normlab::core {
namespace {

// A whole decimal number in [lo, hi], else an error naming `name`.
int parse_int(const char* name, const char* text, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || v < lo || v > hi)
    throw std::invalid_argument(std::string(name) + "=" + text + ": expected a whole number in [" +
                                std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return static_cast<int>(v);
}

}  // namespace

std::optional<LaunchEnv> read_launch_env(const std::function<const char*(const char*)>& getenv) {
  auto get = [&](const char* name) -> const char* {
    const char* v = getenv(name);
    return v != nullptr && *v != '\0' ? v : nullptr;
  };
  auto need = [&](const char* name, const std::string& launcher) -> const char* {
    const char* v = get(name);
    if (v == nullptr)
      throw std::invalid_argument(std::string(name) + " is not set (a " + launcher +
                                  " launch sets it; see docs/distributed.md)");
    return v;
  };
  LaunchEnv env;
  constexpr long kMaxRanks = 1 << 20;
  if (get("RANK") != nullptr) {  // torchrun, or any env:// launcher
    env.launcher = "torchrun";
    env.world_size = parse_int("WORLD_SIZE", need("WORLD_SIZE", env.launcher), 1, kMaxRanks);
    env.rank = parse_int("RANK", get("RANK"), 0, env.world_size - 1);
    env.local_world_size = get("LOCAL_WORLD_SIZE")
                               ? parse_int("LOCAL_WORLD_SIZE", get("LOCAL_WORLD_SIZE"), 1, env.world_size)
                               : 1;
    env.local_rank = get("LOCAL_RANK") ? parse_int("LOCAL_RANK", get("LOCAL_RANK"), 0, env.local_world_size - 1) : 0;
  } else if (get("SLURM_PROCID") != nullptr) {
    env.launcher = "srun";
    env.world_size = parse_int("SLURM_NTASKS", need("SLURM_NTASKS", env.launcher), 1, kMaxRanks);
    env.rank = parse_int("SLURM_PROCID", get("SLURM_PROCID"), 0, env.world_size - 1);
    // Set by srun only under --ntasks-per-node; without it each task is taken to have the node
    // to itself (its CPU share is then --threads' or --cpus-per-task's business).
    env.local_world_size = get("SLURM_NTASKS_PER_NODE")
                               ? parse_int("SLURM_NTASKS_PER_NODE", get("SLURM_NTASKS_PER_NODE"), 1, env.world_size)
                               : 1;
    env.local_rank = get("SLURM_LOCALID")
                         ? parse_int("SLURM_LOCALID", get("SLURM_LOCALID"), 0, env.world_size - 1)
                         : 0;
  } else {
    return std::nullopt;
  }
  env.master_addr = need("MASTER_ADDR", env.launcher);
  env.master_port = parse_int("MASTER_PORT", need("MASTER_PORT", env.launcher), 1, 65535);
  if (const char* v = get("TORCHELASTIC_USE_AGENT_STORE")) env.agent_store = std::string(v) == "True";
  if (const char* v = get("TORCHELASTIC_RESTART_COUNT"))
    env.restart_count = parse_int("TORCHELASTIC_RESTART_COUNT", v, 0, 1L << 30);
  return env;
}

}  // namespace normlab::core
