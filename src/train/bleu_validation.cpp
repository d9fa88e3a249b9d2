#include "train/bleu_validation.h"

#include <nlohmann/json.hpp>

#include "data/corpus.h"

namespace normlab::train {

std::vector<std::string> BleuValidation::problems(const TrainConfig&, const core::ProcessGroup&) const {
  return on_ ? validator_.problems() : std::vector<std::string>{};
}

void BleuValidation::add_settings(nlohmann::json& config) const { validator_.add_settings(config["eval"]); }

void BleuValidation::train_begins(const RunContext& run) {
  if (!on_) return;
  run_ = &run;
  net_ = model::as_encoder_decoder(run.net, "--eval-bleu");  // the kinds that decode
  const auto& c = run.config;
  validator_.prepare(run.vocab, data::read_parallel(c.valid_prefix, c.src_lang, c.tgt_lang).tgt);
}

// Pairs the filter dropped are not decoded (an empty hypothesis), so every reference line
// counts. Each rank decodes every WORLD_SIZE-th sentence; all ranks score the gathered translations.
void BleuValidation::validation_done(nlohmann::json& record) {
  if (!on_) return;
  auto& group = run_->group;
  const auto& corpus = run_->valid;
  const auto size = static_cast<size_t>(group.size()), rank = static_cast<size_t>(group.rank());
  std::vector<data::Sentence> sources(corpus.src.size());
  for (auto i : corpus.kept)
    if (static_cast<size_t>(i) % size == rank) sources[static_cast<size_t>(i)] = corpus.src[static_cast<size_t>(i)];
  auto hyps = validator_.translate(net_, sources);
  if (size > 1) {
    const auto all = group.all_gather(nlohmann::json(hyps).dump());
    for (size_t r = 0; r < size; ++r) {
      const auto theirs = nlohmann::json::parse(all[r]).get<std::vector<std::string>>();
      for (size_t i = r; i < hyps.size(); i += size) hyps[i] = theirs.at(i);
    }
  }
  record["valid_bleu"] = validator_.score(hyps);
}

}  // namespace normlab::train
