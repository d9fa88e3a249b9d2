#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/problems.h"
#include "core/same_job.h"
#include "core/tokens.h"
#include "train/checkpoint_names.h"
#include "train/corpus_loss.h"
#include "train/data_parallel.h"
#include "train/position.h"
#include "train/progress.h"
#include "train/records.h"
#include "train/run_dir.h"
#include "train/run_setup.h"
#include "train/scaled_optimizer.h"

namespace normlab::train {
namespace {
using Clock = std::chrono::steady_clock;
using BatchOrder = std::vector<std::vector<int64_t>>;

// The problems of the options, the callbacks' and the precision's on `device`, all at once.
void check(const TrainConfig& config, const TrainCallbacks& callbacks, const torch::Device& device,
           const core::ProcessGroup& group) {
  auto problems = config.problems();
  for (const auto& cb : callbacks)
    for (auto& p : cb->problems(group)) problems.push_back(p);
  for (auto& p : model::precision_problems(config.precision, device)) problems.push_back(p);
  core::throw_if_problems(problems);
}

class Trainer {
 public:
  Trainer(const TrainConfig& config, TrainCallbacks callbacks, const torch::Device& device, core::ProcessGroup& group)
      : c_(config), callbacks_(std::move(callbacks)), device_(device), dp_(group) {}
  TrainResult run();

 private:
  // Set-up (run_setup.h): true when the run has work left.
  bool open_run();
  void load_data();
  Corpus load(const std::string& prefix, bool training);
  void make_model();
  void make_optimizer();
  void begin();
  // One epoch's updates, and one update: forward and backward of its batches, the gradients
  // reduced over the ranks, unscaled and clipped, the optimiser's step.
  void run_epoch(const BatchOrder& batches);
  void update(const BatchOrder& batches);
  Sums forward_backward(const BatchOrder& batches);
  bool stop_after(const Sums& sums);
  // Validation (and BLEU), the record, the checkpoints; the test set at the end.
  void validate_and_save(bool end_of_epoch);
  Sums validate(const Corpus& corpus);
  void save(const std::vector<std::string>& names);
  void test();
  void event(nlohmann::json record, const std::string& line);
  double wall() const { return wall_before_ + std::chrono::duration<double>(Clock::now() - start_).count(); }
  template <class F>
  void each(F f) {
    for (auto& cb : callbacks_) f(*cb);
  }

  TrainConfig c_;
  TrainCallbacks callbacks_;
  torch::Device device_;
  DataParallel dp_;
  std::optional<RunDir> dir_;
  nlohmann::json config_json_;
  std::optional<model::LoadedModel> resumed_, base_;
  Position pos_;
  std::string vocab_bytes_;
  std::optional<data::Vocab> vocab_;
  Corpus train_, valid_;
  model::ModelConfig model_config_;
  model::Seq2Seq net_{nullptr};
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<ScaledOptimizer> scaled_;
  std::unique_ptr<RunContext> context_;
  Clock::time_point start_;
  double wall_before_ = 0, stop_time_s_ = 0;
  int64_t update_batches_ = 1;        // batches per update: --update-freq on each of the ranks
  // Since the last update made: waiting for the gradient all-reduce; its buckets (overlapped, all).
  double sync_s_ = 0;
  int64_t overlapped_ = 0, reduced_ = 0;
  bool done_ = false, diverged_ = false;
};

TrainResult Trainer::run() {
  if (open_run()) {
    load_data();
    make_model();
    make_optimizer();
    begin();
    while (!done_ && (c_.max_epochs == 0 || pos_.epoch <= c_.max_epochs))
      run_epoch(data::make_batches(train_.sizes, train_.kept, c_.batching, c_.seed, pos_.epoch));
    if (!diverged_ && !c_.test_prefix.empty()) test();
  }
  TrainResult result;
  result.updates = pos_.update;
  result.epochs = pos_.epoch - 1;
  result.diverged = diverged_;
  result.best_valid_loss = pos_.best_valid_loss;
  return result;
}

// The folder, its lock and configuration, and where a resumed run is. A run that reached its
// limits changes nothing when started again with them, train.log included.
bool Trainer::open_run() {
  base_ = load_init_from(c_);
  dir_.emplace(c_.out, dp_.writer());
  config_json_ = c_;
  each([&](TrainCallback& cb) { cb.add_settings(config_json_); });
  resumed_ = dir_->newest_checkpoint();
  if (resumed_) pos_ = resume_position(*resumed_, config_json_, c_.out);
  stop_time_s_ = c_.stop_time_hours * 3600.0;
  const bool out_of_time = stop_time_s_ > 0 && pos_.wall_s >= stop_time_s_;
  if ((c_.max_steps > 0 && pos_.update >= c_.max_steps) || (c_.max_epochs > 0 && pos_.epoch > c_.max_epochs) ||
      out_of_time) {
    if (dp_.writer()) std::cerr << complete_line(c_.out, pos_, out_of_time) << "\n";
    return false;
  }
  return true;
}

// The vocabulary, the corpora, the check that every rank runs the same job, config.json.
void Trainer::load_data() {
  vocab_bytes_ = run_vocab(c_, *dir_, resumed_ ? &*resumed_ : nullptr, base_ ? &*base_ : nullptr, dp_.group());
  vocab_.emplace(data::Vocab::from_bytes(vocab_bytes_, (dir_->path() / "vocab" / data::kVocabModelFile).string()));
  train_ = load(c_.train_prefix, /*training=*/true);
  valid_ = load(c_.valid_prefix, /*training=*/false);
  model_config_ = c_.model;
  model_config_.src_vocab_size = model_config_.tgt_vocab_size = vocab_->size();
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

// The optimiser (--pretrained-lr-scale on the trained parameters), fp16's loss scaler, the
// resumed state, and each rank's dropout stream.
void Trainer::make_optimizer() {
  net_->to(device_);
  net_->train();
  net_->set_precision(c_.precision);
  NamedTensors named;
  for (const auto& p : net_->named_parameters()) named.emplace_back(p.key(), p.value());
  dp_.attach(net_->parameters(), c_.bucket_cap_mb, /*broadcast=*/!resumed_);
  optimizer_ = std::make_unique<Optimizer>(named, c_.optimizer);
  if (c_.init_from.pretrained_lr_scale != 1.0) optimizer_->set_lr_scales(pretrained_lr_scales(c_, named));
  auto scaler = c_.precision == model::Precision::kFp16
                    ? make_loss_scaler(c_.loss_scaler, dp_.ranks(), c_.update_freq)
                    : nullptr;
  scaled_ = std::make_unique<ScaledOptimizer>(*optimizer_, net_->parameters(), std::move(scaler), c_.clip_norm);
  if (resumed_) scaled_->load_state(resumed_->extra_tensors, device_);
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
                                *optimizer_});
  callbacks_.insert(callbacks_.begin(), std::make_unique<Progress>(*dir_, [this] { return wall(); }));
  each([&](TrainCallback& cb) { cb.train_begins(*context_); });
}

// Validation and checkpoints: at the end of an epoch, or where a limit stops inside one
// (fairseq at --max-update; its record says mid_epoch).
void Trainer::run_epoch(const BatchOrder& batches) {
  const auto n = static_cast<int64_t>(batches.size());
  while (!done_ && pos_.next_batch < n) update(batches);
  if (diverged_) return;
  const bool end_of_epoch = pos_.next_batch >= n;
  if (done_ || (c_.max_epochs > 0 && pos_.epoch == c_.max_epochs)) each([](TrainCallback& cb) { cb.training_ends(); });
  validate_and_save(end_of_epoch);
}

// One update: the next update_freq x WORLD_SIZE batches of the epoch's order (fewer at its end),
// each rank taking every WORLD_SIZE-th; the gradient of the loss summed over all of them,
// divided by their target tokens (fairseq, REFERENCE §8).
void Trainer::update(const BatchOrder& batches) {
  const int64_t next = pos_.update + 1;
  dp_.reducer().zero_grad();
  each([&](TrainCallback& cb) { cb.update_begins(next); });
  bool record_updates = false;
  each([&](TrainCallback& cb) { record_updates = record_updates || cb.wants_updates(next); });
  auto sums = forward_backward(batches);
  sums.out_of_time = stop_time_s_ > 0 && wall() >= stop_time_s_;  // any rank's clock: every rank's last update
  const auto sync_start = Clock::now();
  dp_.reducer().finish();  // first: every rank starts its collectives in the same order
  overlapped_ += dp_.reducer().overlapped();
  reduced_ += dp_.reducer().buckets();
  sums = dp_.all_reduced(sums);
  if (!std::isfinite(sums.loss)) {
    event({{"event", "diverged"}, {"step", next}, {"epoch", pos_.epoch}, {"loss", nullptr}},
          "normlab train: the loss became " + std::string(std::isnan(sums.loss) ? "NaN" : "infinite") + " at update " +
              std::to_string(next) + "; stopping");
    diverged_ = done_ = true;
    return;
  }
  sync_s_ += std::chrono::duration<double>(Clock::now() - sync_start).count();
  const auto grad_norm = scaled_->unscale_and_clip(sums.tokens);
  if (!grad_norm) {  // fp16 overflow: the update is skipped (not counted)
    event({{"event", "overflow"}, {"step", next}, {"epoch", pos_.epoch}, {"loss_scale", scaled_->loss_scale()}},
          "normlab train: fp16 gradient overflow at update " + std::to_string(next) + ", skipped; loss scale now " +
              std::to_string(scaled_->loss_scale()));
    return;
  }
  pos_.update = next;
  const double lr = learning_rate(c_.schedule, pos_.update, pos_.epoch);
  each([&](TrainCallback& cb) { cb.gradients_ready(pos_.update); });
  scaled_->step(lr, record_updates);
  const UpdateReport report{pos_.update, pos_.epoch,  pos_.next_batch,        static_cast<int64_t>(batches.size()),
                            lr,          *grad_norm,  sums.loss,              sums.nll,
                            sums.tokens, scaled_->loss_scale(), sync_s_,   overlapped_,
                            reduced_,    *optimizer_};
  each([&](TrainCallback& cb) { cb.update_done(report); });
  sync_s_ = 0;
  overlapped_ = reduced_ = 0;
  if (c_.save_interval_updates > 0 && pos_.update % c_.save_interval_updates == 0) {
    save({update_checkpoint_name(pos_.epoch, pos_.update), "checkpoint_last.pt"});
    dir_->prune(c_.keep_last);
  }
  done_ = stop_after(sums);
}

Sums Trainer::forward_backward(const BatchOrder& batches) {
  Sums sums;
  const int64_t span = std::min(update_batches_, static_cast<int64_t>(batches.size()) - pos_.next_batch);
  const int64_t last = dp_.last_owned(span);
  for (int64_t j = 0; j < span; ++j) {
    if (!dp_.shard().owns(j)) continue;
    if (j == last) dp_.reducer().arm();  // this backward's hooks start the gradient all-reduce
    const auto b = gather(train_, batches[static_cast<size_t>(pos_.next_batch + j)]);
    each([&](TrainCallback& cb) { cb.batch_ready(b); });
    auto logits = net_->forward(b.src.to(device_), b.prev_output_tokens.to(device_));
    auto s = label_smoothed_nll(logits, b.target.to(device_), c_.label_smoothing, c_.ls_formula, kPad, c_.z_loss);
    each([&](TrainCallback& cb) { cb.output_ready(logits, b.target); });
    scaled_->backward(s.loss);
    sums.loss += s.loss.item<double>();
    sums.nll += s.nll.item<double>();
    sums.tokens += s.tokens;
  }
  pos_.next_batch += span;
  return sums;
}

// --max-steps reached, or --stop-time-hours on any rank.
bool Trainer::stop_after(const Sums& sums) {
  if (c_.max_steps > 0 && pos_.update >= c_.max_steps) return true;
  if (sums.out_of_time == 0) return false;
  std::ostringstream line;
  line << "normlab train: --stop-time-hours " << c_.stop_time_hours << " reached after update " << pos_.update << " ("
       << std::fixed << std::setprecision(1) << wall() << " s of training); stopping";
  event({{"event", "stop_time"}, {"step", pos_.update}, {"epoch", pos_.epoch}, {"wall_s", wall()}}, line.str());
  return true;
}

void Trainer::validate_and_save(bool end_of_epoch) {
  const auto v = validate(valid_);
  auto record = validation_record(pos_, v, wall(), end_of_epoch);
  each([&](TrainCallback& cb) { cb.validation_done(record); });
  const double valid_loss = v.loss / v.tokens, bleu = record.value("valid_bleu", -1.0);
  const bool best =
      c_.best_metric == BestMetric::kBleu ? bleu > pos_.best_valid_bleu : valid_loss < pos_.best_valid_loss;
  pos_.best_valid_loss = std::min(pos_.best_valid_loss, valid_loss);
  pos_.best_valid_bleu = std::max(pos_.best_valid_bleu, bleu);
  event(record, validation_line(pos_, v, end_of_epoch, record, best));
  std::vector<std::string> names = {"checkpoint_last.pt"};
  if (end_of_epoch && pos_.epoch % c_.save_interval == 0) names.push_back(epoch_checkpoint_name(pos_.epoch));
  if (best) names.push_back("checkpoint_best.pt");
  if (end_of_epoch) {
    ++pos_.epoch;  // the saved position is the start of the next epoch
    pos_.next_batch = 0;
  }
  save(names);
  dir_->prune(c_.keep_last);
}

// Every rank takes every WORLD_SIZE-th batch of the corpus; the sums are all ranks'.
Sums Trainer::validate(const Corpus& corpus) {
  const auto l = corpus_loss(net_, corpus.src, corpus.tgt, corpus.kept, c_.batching, c_.seed, c_.label_smoothing,
                             c_.ls_formula, device_, dp_.shard());
  return dp_.all_reduced({l.loss, l.nll, l.tokens});
}

// Every rank's dropout stream (a collective), then rank 0 writes the checkpoints.
void Trainer::save(const std::vector<std::string>& names) {
  model::TensorMap extra;
  dp_.save_streams(extra);
  if (!dir_->writes()) return;
  scaled_->save_state(extra);
  each([&](TrainCallback& cb) { cb.save_state(extra); });
  extra[model::kVocabTensor] = model::bytes_tensor(vocab_bytes_);
  const nlohmann::json meta = {{"config", config_json_}, {"position", position_json(pos_, wall(), dp_.ranks())}};
  dir_->save(names, net_, meta, extra);
}

void Trainer::test() {
  const auto t = validate(load(c_.test_prefix, /*training=*/false));
  event(test_record(pos_, t), test_line(c_.test_prefix, t));
}

// A record of metrics.jsonl and its progress line.
void Trainer::event(nlohmann::json record, const std::string& line) {
  dir_->record(record);
  dir_->line(line);
}

}  // namespace

TrainResult train(const TrainConfig& config, TrainCallbacks callbacks, const torch::Device& device,
                  core::ProcessGroup& group) {
  check(config, callbacks, device, group);
  return Trainer(config, std::move(callbacks), device, group).run();
}

}  // namespace normlab::train
