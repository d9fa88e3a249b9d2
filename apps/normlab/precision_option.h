// --precision fp32|bf16|fp16 (and int8 for the commands that only decode), shared by the
// subcommands that run the model (docs/precision.md).
#pragma once

#include <string>

#include <CLI/CLI.hpp>
#include <c10/core/Device.h>
#include <torch/types.h>

#include "model/precision.h"

namespace normlab::app {

// `decoding`: the command only decodes (translate, evaluate, generate), so int8 is offered.
void add_precision_option(CLI::App& command, std::string& value, bool decoding = false);
// The parsed --precision, checked against the device, the weights' dtype and whether the command
// only decodes (int8); throws std::invalid_argument with every problem.
model::Precision resolve_precision(const std::string& value, const c10::Device& device,
                                   torch::Dtype master = torch::kFloat32, bool decoding = false);

// Prints model::precision_warning's line, if any, to stderr.
void warn_if_emulated(model::Precision p, const c10::Device& device);

// For the commands whose measurement the low precision would swamp (hessian, perturb): throws
// std::invalid_argument with `why` unless `value` is fp32 (or auto, which is fp32 there).
void require_fp32(const std::string& value, const std::string& why);

}  // namespace normlab::app
