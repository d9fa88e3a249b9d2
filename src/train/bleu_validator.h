// Validation BLEU of `normlab train --eval-bleu` (docs/translate.md). Beam search (decode/)
// and BLEU (metrics/) live above train/ (docs/architecture.md, "Layers"): the caller builds the
// validator from them (apps/normlab/cmd_train.cpp), the trainer only calls it.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "data/batch.h"
#include "data/vocab.h"
#include "model/seq2seq.h"

namespace normlab::train {

class BleuValidator {
 public:
  virtual ~BleuValidator() = default;
  // The decoder's resolved options, added to config.json's "eval" section (with or without
  // --eval-bleu, like every option).
  virtual void add_settings(nlohmann::json& eval) const = 0;
  // Every problem of those options, naming the option; reported with TrainConfig::problems()
  // under --eval-bleu.
  virtual std::vector<std::string> problems() const = 0;
  // Before the first update, once the vocabulary is known: `references` are the validation
  // targets, one per line as read (UTF-8); their errors come before any training. `vocab`
  // lives until train() returns.
  virtual void prepare(const data::Vocab& vocab, const std::vector<std::string>& references) = 0;
  // `net`'s translations of `sources`, one per reference line (an empty sentence is not
  // decoded: a pair the length filter dropped, or another rank's share).
  virtual std::vector<std::string> translate(model::Seq2Seq& net, const std::vector<data::Sentence>& sources) = 0;
  // Corpus BLEU (0..100) of `hyps` against the references.
  virtual double score(const std::vector<std::string>& hyps) = 0;
};

}  // namespace normlab::train
