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
  // Each launcher's names for the same four facts (REFERENCE §8). srun sets the tasks per node
  // only under --ntasks-per-node; without it (and likewise without LOCAL_WORLD_SIZE) each
  // process is taken to have the machine to itself, and its local rank is bounded by the world.
  struct Names {
    const char *launcher, *rank, *world, *local_world, *local_rank;
  };
  static constexpr Names kLaunchers[] = {
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "LOCAL_RANK"},  // or any env:// launcher
      {"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE", "SLURM_LOCALID"},
  };
  const Names* names = nullptr;
  for (const auto& n : kLaunchers)
    if (names == nullptr && get(n.rank) != nullptr) names = &n;
  if (names == nullptr) return std::nullopt;
  constexpr long kMaxRanks = 1 << 20;
  LaunchEnv env;
  env.launcher = names->launcher;
  env.world_size = parse_int(names->world, need(names->world, env.launcher), 1, kMaxRanks);
  env.rank = parse_int(names->rank, get(names->rank), 0, env.world_size - 1);
  const char* local_world = get(names->local_world);
  env.local_world_size = local_world ? parse_int(names->local_world, local_world, 1, env.world_size) : 1;
  if (const char* local_rank = get(names->local_rank))
    env.local_rank = parse_int(names->local_rank, local_rank, 0, (local_world ? env.local_world_size : env.world_size) - 1);
  env.master_addr = need("MASTER_ADDR", env.launcher);
  env.master_port = parse_int("MASTER_PORT", need("MASTER_PORT", env.launcher), 1, 65535);
  if (const char* v = get("TORCHELASTIC_USE_AGENT_STORE")) env.agent_store = std::string(v) == "True";
  if (const char* v = get("TORCHELASTIC_RESTART_COUNT"))
    env.restart_count = parse_int("TORCHELASTIC_RESTART_COUNT", v, 0, 1L << 30);
  return env;
}

}  // namespace normlab::core
