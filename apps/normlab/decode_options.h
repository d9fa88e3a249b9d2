// What translate, evaluate and `train --eval-bleu` share: the beam search flags, and the
// vocabulary that belongs to a checkpoint (also hessian's).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "data/vocab.h"
#include "decode/beam_search.h"
#include "model/checkpoint.h"

namespace normlab::app {

// --beam, --lenpen, --max-len-a, --max-len-b into `config`; with `translate` also --nbest
// and --min-len.
void add_beam_options(CLI::App& command, decode::BeamSearchConfig& config, bool translate,
                      const std::string& group = "Beam search");

// `vocab_path` when given; else the SentencePiece model that `normlab train` stores inside
// its checkpoints; else RUN_DIR/vocab/spm.model for a checkpoint in RUN_DIR/checkpoints/.
// Throws std::invalid_argument when none is found or its size differs from the model's.
data::Vocab checkpoint_vocab(const model::LoadedModel& loaded, const std::string& checkpoint,
                             const std::string& vocab_path);
// The last two of those: nullopt when neither exists. `source` names the one found
// (CHECKPOINT:vocab/spm.model or the file).
std::optional<data::Vocab> checkpoint_own_vocab(const model::LoadedModel& loaded, const std::string& checkpoint,
                                                std::string& source);
// Throws std::invalid_argument when `vocab`'s size differs from the checkpoint model's.
void check_vocab_size(const data::Vocab& vocab, const model::LoadedModel& loaded, const std::string& checkpoint);

// decode::translate's progress callback: "normlab NAME: done/total sentences" on stderr, at
// most every 10 s and at the end.
std::function<void(size_t, size_t)> progress_printer(const std::string& name);

}  // namespace normlab::app
