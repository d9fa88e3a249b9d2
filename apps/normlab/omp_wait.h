// How long OpenMP's idle threads spin before they sleep (docs/runtime.md, "A busy machine").
#pragma once

#include <string>

namespace normlab::app {

// Unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is in the environment, sets GOMP_SPINCOUNT to normlab's
// default for the processes this one starts (a recipe's cells) and, with `restart`, replaces this
// process by the same command line (execv of /proc/self/exe) so that its own OpenMP runtime reads
// it too: libgomp reads the variable once, when it is loaded, before main(). Returns when nothing
// is to be done or the restart failed (the run then keeps libgomp's default, with a note).
void apply_omp_wait_default(char** argv, bool restart);

}  // namespace normlab::app
