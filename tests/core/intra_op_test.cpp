// normlab's own kernels split their rows with at::parallel_for, a header template that runs on
// OpenMP's threads only where normlab is compiled with OpenMP (CMakeLists.txt). Without it every
// such loop ran on one thread whatever --threads said; this test fails then.
#include <mutex>
#include <set>

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

TEST(IntraOpThreads, NormlabsParallelLoopsRunOnAtensThreads) {
  const int before = at::get_num_threads();
  at::set_num_threads(2);
  std::mutex m;
  std::set<int> seen;
  at::parallel_for(0, 64, 1, [&](int64_t, int64_t) {
    std::lock_guard<std::mutex> lock(m);
    seen.insert(at::get_thread_num());
  });
  at::set_num_threads(before);
  EXPECT_EQ(seen, (std::set<int>{0, 1}));
}
