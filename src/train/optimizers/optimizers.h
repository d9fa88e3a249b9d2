// The built-in optimisers' makers, one per file of this folder, for the registry's table
// (registry.cpp). docs/optimisers.md says what each computes.
#pragma once

#include <cstddef>
#include <memory>

#include "train/optimizer_algorithm.h"

namespace normlab::train {

std::unique_ptr<OptimizerAlgorithm> make_sgd(const OptimizerConfig& config, size_t parameters);    // sgd.cpp
std::unique_ptr<OptimizerAlgorithm> make_adam(const OptimizerConfig& config, size_t parameters);   // adam.cpp
std::unique_ptr<OptimizerAlgorithm> make_adamw(const OptimizerConfig& config, size_t parameters);  // adam.cpp
std::unique_ptr<OptimizerAlgorithm> make_radam(const OptimizerConfig& config, size_t parameters);  // radam.cpp
std::unique_ptr<OptimizerAlgorithm> make_lion(const OptimizerConfig& config, size_t parameters);   // lion.cpp
std::unique_ptr<OptimizerAlgorithm> make_muon(const OptimizerConfig& config, size_t parameters);   // muon.cpp
std::unique_ptr<OptimizerAlgorithm> make_adamw_schedulefree(const OptimizerConfig& config,
                                                            size_t parameters);  // schedule_free.cpp

}  // namespace normlab::train
