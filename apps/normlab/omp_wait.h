// How long OpenMP's idle threads spin before they sleep, on a machine that other processes share
// (docs/runtime.md, "A busy machine").
#pragma once

namespace normlab::app {

// For a process of several threads (main.cpp asks): when neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT is in the environment and other processes kept
// at least half a CPU busy over a short look at /proc/stat, replaces this process by the same
// command line (execv of /proc/self/exe) with GOMP_SPINCOUNT=1000: libgomp reads the variable once,
// when it is loaded, before main(). Returns when nothing is to be done or the restart failed (the
// run then keeps libgomp's default, with a note on stderr).
void spin_less_when_busy(char** argv);

}  // namespace normlab::app
