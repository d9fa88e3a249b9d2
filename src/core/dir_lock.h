// One writer per folder: an exclusive flock(2) on DIR/.lock, held while the object lives. A
// second process gets one error naming the folder and the holder's pid; a lock left by a
// killed process never blocks, since the kernel drops a dead process's flocks.
#pragma once

#include <string>

namespace normlab::core {

class DirLock {
 public:
  // Creates `dir` if needed and locks it for `what` (e.g. "normlab train"), else throws
  // std::runtime_error: "DIR is in use by another normlab process (pid N): ...".
  DirLock(const std::string& dir, const std::string& what);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace normlab::core
