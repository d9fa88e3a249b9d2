// One writer per folder: an exclusive flock(2) on DIR/.lock, held while the object lives. A
// second process gets one error naming the folder and the holder's pid; a lock left by a
// killed process never blocks, since the kernel drops a dead process's flocks.
#pragma once

#include <stdexcept>
#include <string>

namespace normlab::core {

// The folder is locked by another process (other failures, e.g. an unwritable folder, are
// std::runtime_error of their own).
struct DirInUse : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class DirLock {
 public:
  // Creates `dir` if needed and locks it for `what` (e.g. "normlab train"), else throws
  // DirInUse: "DIR is in use by another normlab process (pid N): ...", or std::runtime_error
  // when the lock file cannot be opened or locked.
  DirLock(const std::string& dir, const std::string& what);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace normlab::core
