// Where this process sits among the processes a launcher started (REFERENCE.md §8):
// torchrun sets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT;
// SLURM's srun sets SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID (MASTER_ADDR/MASTER_PORT are
// the user's to export, as for PyTorch's env:// rendezvous). docs/distributed.md.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace normlab::core {

struct LaunchEnv {
  int rank = 0;              // 0 .. world_size-1
  int world_size = 1;
  int local_rank = 0;        // on this machine; picks cuda:local_rank
  int local_world_size = 1;  // processes on this machine; shares its CPUs among them
  std::string master_addr;   // where rank 0's TCPStore listens (or torchrun's agent store)
  int master_port = 0;
  bool agent_store = false;  // TORCHELASTIC_USE_AGENT_STORE: torchrun's agent serves the store
  int restart_count = 0;     // TORCHELASTIC_RESTART_COUNT: keys of a restarted attempt are fresh
  std::string launcher;      // "torchrun" or "srun", for messages
};

// Reads the launcher's variables through `getenv` (std::getenv by default). Returns nullopt
// when neither launcher's RANK/SLURM_PROCID is set (one process, as without a launcher).
// Throws std::invalid_argument naming the variable when one is missing or malformed.
std::optional<LaunchEnv> read_launch_env(
    const std::function<const char*(const char*)>& getenv = [](const char* k) { return std::getenv(k); });

}  // namespace normlab::core
