// The set-up phases of the Trainer (trainer_impl.h), before its first update.
#include <iostream>

#include <torch/torch.h>

#include "core/same_job.h"
#include "train/width_lr.h"
#include "train/progress.h"
#include "train/records.h"
#include "train/run_setup.h"
#include "train/trainer_impl.h"

namespace normlab::train::detail {

// The folder, its lock and configuration, and where a resumed run is. A run that reached its
// limits changes nothing when started again with them, train.log included.
bool Trainer::open_run() {
  dir_.emplace(c_.out, dp_.writer());
  config_json_ = c_;
  each([&](TrainCallback& cb) { cb.add_settings(config_json_); });
  resumed_ = dir_->newest_checkpoint();
  if (resumed_) pos_ = resume_position(*resumed_, config_json_, c_.out);
  stop_time_s_ = c_.stop_time_hours * 3600.0;
  const bool out_of_time = stop_time_s_ > 0 && pos_.wall_s >= stop_time_s_;
  const bool reached = (c_.max_steps > 0 && pos_.update >= c_.max_steps) || (c_.max_epochs > 0 && pos_.epoch > c_.max_epochs);
  if (reached && !out_of_time && !dir_->validated(pos_.update) && resume_before_last_update()) return true;
  if (reached || out_of_time) {
    if (dp_.writer()) std::cerr << complete_line(c_.out, pos_, out_of_time) << "\n";
    return false;
  }
  return true;
}

// A run that reached its limits has validated its last update, unless a normlab older than
// 2026-11-26 was stopped between that update's checkpoint and the validation (issue 34; now the
// checkpoint waits for it): the run then goes on from an earlier checkpoint and writes the last
// records again, as an interrupted run does today. Whether there was one to go on from.
bool Trainer::resume_before_last_update() {
  const int64_t last = pos_.update;
  auto earlier = dir_->newest_checkpoint(last);
  std::string what = c_.out + " has no validation record of its last update " + std::to_string(last) +
                     " (a run stopped before it by an older normlab)";
  if (!earlier) {
    dir_->line("normlab train: " + what + " and no earlier checkpoint to go on from");
    return false;
  }
  pos_ = resume_position(*earlier, config_json_, c_.out);
  resumed_ = std::move(earlier);
  dir_->line("normlab train: " + what + ": going on from update " + std::to_string(pos_.update) + " to write it");
  return true;
}

// The vocabulary, the corpora, the check that every rank runs the same job, config.json.
void Trainer::load_data() {
  vocab_bytes_ = run_vocab(c_, *dir_, resumed_ ? &*resumed_ : nullptr, base_ ? &*base_ : nullptr, dp_.group());
  vocab_.emplace(data::Vocab::from_bytes(vocab_bytes_, (dir_->path() / "vocab" / data::kVocabModelFile).string()));
  train_ = load(c_.train_prefix, /*training=*/true);
  valid_ = load(c_.valid_prefix, /*training=*/false);
  model_config_ = c_.model;
  model_config_.src_vocab_size = model_config_.tgt_vocab_size = model::model_vocab_size(model_config_.kind, vocab_->size());
  config_json_["model"] = model_config_;
  if (dp_.ranks() > 1)
    core::check_same_job(job_fingerprint(config_json_, train_, valid_, vocab_bytes_, resumed_ ? pos_.update : -1),
                         dp_.group());
  dir_->write_config(config_json_);
}

// Rank 0 encodes and caches the corpus first, the others then read its cache.
Corpus Trainer::load(const std::string& prefix, bool training) {
  const std::string cache_dir = c_.cache_dir.empty() ? (dir_->path() / "cache").string() : c_.cache_dir;
  Corpus corpus;
  dp_.in_turn([&] {
    corpus = load_corpus(prefix, c_, *vocab_, cache_dir, training, [&](const std::string& s) { dir_->line(s); });
  });
  return corpus;
}

void Trainer::make_model() {
  if (!resumed_) {
    // A new run (no checkpoint, or none intact) starts its records afresh: those of an earlier
    // start describe updates it makes again.
    dir_->cut_records(/*update=*/-1, /*epoch=*/0);
    net_ = new_model(c_, model_config_, base_ ? &*base_ : nullptr, train_, *dir_);
    return;
  }
  net_ = resumed_->model;
  dir_->cut_records(pos_.update, pos_.epoch);
  dir_->line("normlab train: resuming at update " + std::to_string(pos_.update) + ", epoch " +
             std::to_string(pos_.epoch) + ", batch " + std::to_string(pos_.next_batch));
  const int saved_ranks = resumed_->meta.at("position").value("world_size", 1);
  if (saved_ranks != dp_.ranks())
    dir_->line("normlab train: the checkpoint was written by " + std::to_string(saved_ranks) + " ranks, this run has " +
               std::to_string(dp_.ranks()) +
               ": the batches per update change, and ranks without a saved dropout stream start a fresh one");
}

// The optimiser (--pretrained-lr-scale on the trained parameters, muP's per-parameter lr), fp16's
// loss scaler, the resumed state, and each rank's dropout stream.
void Trainer::make_optimizer() {
  net_->to(device_);
  net_->train();
  net_->set_precision(c_.precision);
  NamedTensors named;
  for (const auto& p : net_->named_parameters()) named.emplace_back(p.key(), p.value());
  dp_.attach(net_->parameters(), c_.bucket_cap_mb, /*broadcast=*/!resumed_);
  optimizer_ = std::make_unique<Optimizer>(named, c_.optimizer);
  const auto& model = net_->config();
  if (c_.init_from.pretrained_lr_scale != 1.0 || model.parametrisation != model::Parametrisation::kSp)
    optimizer_->set_lr_scales(parameter_lr_scales(c_, model, named));
  if (model.parametrisation != model::Parametrisation::kSp)
    optimizer_->set_weight_decay_scales(width_weight_decay_scales(model, c_.optimizer, named));
  auto scaler = c_.precision == model::Precision::kFp16
                    ? make_loss_scaler(c_.loss_scaler, dp_.ranks(), c_.update_freq)
                    : nullptr;
  scaled_ = std::make_unique<ScaledOptimizer>(*optimizer_, net_->parameters(), std::move(scaler), c_.clip_norm);
  if (resumed_) scaled_->load_state(resumed_->extra_tensors, device_);
  optimizer_->to_training_point();  // a checkpoint holds the evaluation point (schedule-free's x)
  dp_.seed_streams(c_.seed, resumed_ ? &resumed_->extra_tensors : nullptr);
}

// --valid-at-init (the loss of the initial model, dropout off, no random numbers drawn), then
// the callbacks see the run; the trainer's own progress records come first.
void Trainer::begin() {
  start_ = Clock::now();
  wall_before_ = pos_.wall_s;
  update_batches_ = c_.update_freq * dp_.ranks();
  if (c_.valid_at_init && pos_.update == 0 && !resumed_) {
    const auto v = validate(valid_);
    event(init_valid_record(v), init_valid_line(v));
  }
  // Updates this run will make, for the ETA: --max-steps, else --max-epochs of batches.
  const auto batches = static_cast<int64_t>(data::make_batches(train_.sizes, train_.kept, c_.batching, c_.seed, 1).size());
  const int64_t planned =
      c_.max_steps > 0 ? c_.max_steps : c_.max_epochs * ((batches + update_batches_ - 1) / update_batches_);
  static const model::TensorMap kNothing;
  context_.reset(new RunContext{c_, net_, dir_->path().string(), pos_.update, pos_.epoch, planned, dp_.writer(),
                                dp_.group(), device_, *vocab_, valid_, resumed_ ? resumed_->extra_tensors : kNothing,
                                *optimizer_, [this](int64_t n, int64_t e) { return rate(n, e); }});
  callbacks_.insert(callbacks_.begin(), std::make_unique<Progress>(*dir_, [this] { return wall(); }));
  each([&](TrainCallback& cb) { cb.train_begins(*context_); });
}

}  // namespace normlab::train::detail
