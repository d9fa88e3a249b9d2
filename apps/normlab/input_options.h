// The input flags shared by the instruments (probe, perturb, advise): --train/--vocab for real
// mini-batches, or random tokens (docs/probe.md, "Inputs").
#pragma once

#include <CLI/CLI.hpp>

#include "analysis/inputs.h"

namespace normlab::app {

void add_input_options(CLI::App& command, analysis::InputConfig& inputs);

}  // namespace normlab::app
