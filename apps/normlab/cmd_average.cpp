// `normlab average`: one checkpoint whose parameters are the mean of several (fairseq's
// scripts/average_checkpoints.py; docs/translate.md).
#include <iostream>

#include "commands.h"
#include "model/average.h"
#include "train/checkpoint_names.h"

namespace normlab::app {

Runner add_average_command(CLI::App& app, const GlobalOptions&) {
  auto* cmd = app.add_subcommand("average", "average the parameters of checkpoints (for decoding)");
  struct Options {
    std::vector<std::string> inputs;
    std::string out;
    int num_epoch_checkpoints = 0, num_update_checkpoints = 0;
    int64_t upper_bound = 0;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("--inputs", o->inputs,
                  "checkpoints to average, or one run's checkpoints folder with --num-epoch-checkpoints or "
                  "--num-update-checkpoints")
      ->required();
  cmd->add_option("--out", o->out, "checkpoint to write")->required();
  auto* epochs = cmd->add_option("--num-epoch-checkpoints", o->num_epoch_checkpoints,
                                 "the N newest checkpoint<epoch>.pt of the folder")
                    ->check(CLI::NonNegativeNumber);
  auto* updates = cmd->add_option("--num-update-checkpoints", o->num_update_checkpoints,
                                  "the N newest checkpoint_<epoch>_<update>.pt of the folder")
                     ->check(CLI::NonNegativeNumber);
  epochs->excludes(updates);
  cmd->add_option("--checkpoint-upper-bound", o->upper_bound,
                  "only checkpoints at or below this epoch (update) with --num-*-checkpoints");
  return [o] {
    std::vector<std::string> inputs = o->inputs;
    const int count = std::max(o->num_epoch_checkpoints, o->num_update_checkpoints);
    if (count > 0) {
      if (inputs.size() != 1)
        throw std::invalid_argument("--num-epoch-checkpoints/--num-update-checkpoints take one folder in --inputs, not " +
                                    std::to_string(inputs.size()) + " paths");
      inputs = train::last_checkpoints(inputs[0], count, o->num_update_checkpoints > 0, o->upper_bound);
    } else if (o->upper_bound != 0) {
      throw std::invalid_argument("--checkpoint-upper-bound needs --num-epoch-checkpoints or --num-update-checkpoints");
    }
    model::average_checkpoints(inputs, o->out);
    std::cerr << "normlab average: " << o->out << " = mean of " << inputs.size() << " checkpoints:";
    for (const auto& p : inputs) std::cerr << " " << p;
    std::cerr << "\n";
  };
}

}  // namespace normlab::app
