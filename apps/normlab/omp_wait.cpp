#include "omp_wait.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>

namespace normlab::app {
namespace {

// libgomp spins GOMP_SPINCOUNT times (300,000 by default) at a barrier before it sleeps. On a
// machine where another process takes a core, the spinning thread keeps the core from the thread
// it waits for; docs/runtime.md has the measurements behind this value.
constexpr const char* kSpinCount = "1000";

}  // namespace

void apply_omp_wait_default(char** argv, bool restart) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  // The restarted process finds the variable set and returns above: one restart at most.
  if (setenv("GOMP_SPINCOUNT", kSpinCount, /*overwrite=*/0) != 0 || !restart) return;
  execv("/proc/self/exe", argv);
  std::cerr << "normlab: note: could not restart with GOMP_SPINCOUNT=" << kSpinCount << " (" << std::strerror(errno)
            << "); OpenMP keeps its default spinning\n";
}

}  // namespace normlab::app
