// The records of metrics.jsonl that the trainer writes itself (validation, test, the initial
// model, events) and their progress lines; the training records are Progress's (progress.h).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "train/data_parallel.h"
#include "train/position.h"

namespace normlab::train {

// A validation of the model at `pos`: per-token loss, nll, perplexity; mid_epoch when a limit
// stopped the epoch; with `accuracy` (a classifier) the share of examples whose argmax is their
// class, valid_accuracy.
nlohmann::json validation_record(const Position& pos, const Sums& v, double wall_s, bool end_of_epoch,
                                 bool accuracy = false);
// "epoch E | valid loss ... [| accuracy A] [| bleu B] [| best]"; A and B from the record (callbacks add B).
std::string validation_line(const Position& pos, const Sums& v, bool end_of_epoch, const nlohmann::json& record,
                            bool best);

// --valid-at-init: the initial model's loss (LR sensitivity's "loss at init", REFERENCE §9).
nlohmann::json init_valid_record(const Sums& v);
std::string init_valid_line(const Sums& v);

// --test, scored once with the final model (test_accuracy with `accuracy`, as above).
nlohmann::json test_record(const Position& pos, const Sums& t, bool accuracy = false);
std::string test_line(const std::string& prefix, const Sums& t, bool accuracy = false);

// A finished run started again with the same limits.
std::string complete_line(const std::string& out, const Position& pos, bool out_of_time);

}  // namespace normlab::train
