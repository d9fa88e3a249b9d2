#include "omp_wait.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

namespace normlab::app {
namespace {

// libgomp spins GOMP_SPINCOUNT times (300,000 by default) at a barrier before it sleeps. Beside a
// CPU-bound process on 2 cores, 1,000 made a 2-thread training step 1.8x faster than the default,
// and 15-25% slower on a quiet machine (docs/runtime.md): hence only when the machine is busy.
constexpr const char* kSpinCount = "1000";
constexpr double kBusyCpus = 0.5;  // other processes' CPUs that count as busy
constexpr auto kLook = std::chrono::milliseconds(200);

// Jiffies all CPUs spent busy (/proc/stat's first line: user nice system idle iowait irq softirq
// steal ...), -1 when unreadable.
long long busy_jiffies() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) || cpu != "cpu") return -1;
  return user + nice + system + irq + softirq + steal;
}

// The CPUs other processes kept busy while this one slept for kLook (it uses none meanwhile).
double others_busy_cpus() {
  const long long before = busy_jiffies();
  std::this_thread::sleep_for(kLook);
  const long long after = busy_jiffies();
  if (before < 0 || after < before) return 0.0;
  const double seconds = std::chrono::duration<double>(kLook).count();
  return static_cast<double>(after - before) / static_cast<double>(sysconf(_SC_CLK_TCK)) / seconds;
}

}  // namespace

void spin_less_when_busy(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (others_busy_cpus() < kBusyCpus) return;
  // The restarted process finds the variable set and returns above: one restart at most.
  if (setenv("GOMP_SPINCOUNT", kSpinCount, /*overwrite=*/0) != 0) return;
  execv("/proc/self/exe", argv);
  std::cerr << "normlab: note: could not restart with GOMP_SPINCOUNT=" << kSpinCount << " (" << std::strerror(errno)
            << "); OpenMP keeps its default spinning\n";
}

}  // namespace normlab::app
