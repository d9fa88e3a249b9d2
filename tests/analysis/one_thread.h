// Tiny models run fastest on one intra-op thread: on a loaded machine, waiting for a busy
// second thread made these tests 40x slower. Restores the previous count.
#pragma once

#include <ATen/Parallel.h>

namespace normlab::test {

class OneThread {
 public:
  OneThread() : before_(at::get_num_threads()) { at::set_num_threads(1); }
  ~OneThread() { at::set_num_threads(before_); }

 private:
  int before_;
};

}  // namespace normlab::test
