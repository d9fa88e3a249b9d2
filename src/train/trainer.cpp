#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <sstream>

#include <torch/torch.h>

#include "core/problems.h"
#include "train/checkpoint_names.h"
#include "train/corpus_loss.h"
#include "train/records.h"
#include "train/run_setup.h"
#include "train/trainer_impl.h"

namespace normlab::train {
namespace detail {

// The run: set-up (trainer_setup.cpp), epochs of updates, the test set.
TrainResult Trainer::run() {
  if (open_run()) {
    load_data();
    make_model();
    make_optimizer();
    begin();
    while (!done_ && (c_.max_epochs == 0 || pos_.epoch <= c_.max_epochs))
      run_epoch(data::make_batches(train_.sizes, train_.kept, c_.batching, c_.seed, pos_.epoch));
  }
  TrainResult result;
  result.updates = pos_.update;
  result.epochs = pos_.epoch - 1;
  result.diverged = diverged_;
  result.best_valid_loss = pos_.best_valid_loss;
  return result;
}

// Validation and checkpoints: at the end of an epoch, or where a limit stops inside one
// (fairseq at --max-update; its record says mid_epoch).
void Trainer::run_epoch(const BatchOrder& batches) {
  const auto n = static_cast<int64_t>(batches.size());
  while (!done_ && pos_.next_batch < n) update(batches);
  if (diverged_) return;
  const bool end_of_epoch = pos_.next_batch >= n, last = last_update(n);
  if (last) each([](TrainCallback& cb) { cb.training_ends(); });
  validate_and_save(end_of_epoch, last);
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
  const double lr = rate(pos_.update, pos_.epoch);
  each([&](TrainCallback& cb) { cb.gradients_ready(pos_.update); });
  scaled_->step(lr, record_updates);
  const UpdateReport report{pos_.update, pos_.epoch,  pos_.next_batch,        static_cast<int64_t>(batches.size()),
                            lr,          *grad_norm,  sums.loss,              sums.nll,
                            sums.tokens, scaled_->loss_scale(), sync_s_,   overlapped_,
                            reduced_,    *optimizer_};
  each([&](TrainCallback& cb) { cb.update_done(report); });
  sync_s_ = 0;
  overlapped_ = reduced_ = 0;
  done_ = stop_after(sums);
  // The last update's checkpoint waits for the final validation (validate_and_save): a run
  // killed in between resumes before it and writes the last records again (issue 34). So does
  // a --validate-interval-updates validation's (the epoch's end validates anyway).
  const auto n = static_cast<int64_t>(batches.size());
  if (last_update(n)) return;
  if (validation_due() && pos_.next_batch < n) {
    validate_and_save(/*end_of_epoch=*/false, /*last=*/false);
  } else if (update_checkpoint_due()) {
    save({update_checkpoint_name(pos_.epoch, pos_.update), "checkpoint_last.pt"});
    dir_->prune(c_.keep_last);
  }
}

double Trainer::rate(int64_t update, int64_t epoch) const {
  double lr = learning_rate(c_.rate_schedule(), update, epoch);
  for (const auto& cb : callbacks_) lr *= cb->rate_factor(update);
  return lr;
}

bool Trainer::last_update(int64_t n_batches) const {
  return done_ || (pos_.next_batch >= n_batches && c_.max_epochs > 0 && pos_.epoch == c_.max_epochs);
}

bool Trainer::update_checkpoint_due() const {
  return c_.save_interval_updates > 0 && pos_.update % c_.save_interval_updates == 0;
}

bool Trainer::validation_due() const {
  return c_.validate_interval_updates > 0 && pos_.update % c_.validate_interval_updates == 0;
}

Sums Trainer::forward_backward(const BatchOrder& batches) {
  Sums sums;
  const int64_t span = std::min(update_batches_, static_cast<int64_t>(batches.size()) - pos_.next_batch);
  const int64_t last = dp_.last_owned(span);
  for (int64_t j = 0; j < span; ++j) {
    if (!dp_.shard().owns(j)) continue;
    if (j == last) dp_.reducer().arm();  // this backward's hooks start the gradient all-reduce
    const auto b = gather(train_, batches[static_cast<size_t>(pos_.next_batch + j)], pos_.epoch);
    each([&](TrainCallback& cb) { cb.batch_ready(b); });
    const auto l = loss(net_, b, c_.loss);
    each([&](TrainCallback& cb) { cb.output_ready(l.logits, b.target); });
    scaled_->backward(l.sums.loss);
    sums.loss += l.sums.loss.item<double>();
    sums.nll += l.sums.nll.item<double>();
    sums.tokens += l.sums.tokens;
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

// The last validation is followed by --test, and the checkpoint comes after both: a run killed
// before it resumes from the previous checkpoint and writes both records again.
void Trainer::validate_and_save(bool end_of_epoch, bool last) {
  const AtEvaluationPoint evaluated(*optimizer_);  // validation, BLEU, the test set and the checkpoints
  const auto v = validate(valid_);
  auto record = validation_record(pos_, v, wall(), end_of_epoch, c_.model.classifier());
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
  // update() has written the update's checkpoint unless this is the last update or a validation
  // inside an epoch (--validate-interval-updates): then it comes here, after the validation.
  if ((last || !end_of_epoch) && update_checkpoint_due())
    names.push_back(update_checkpoint_name(pos_.epoch, pos_.update));
  if (last && !c_.test_prefix.empty()) test();
  if (end_of_epoch) {
    ++pos_.epoch;  // the saved position is the start of the next epoch
    pos_.next_batch = 0;
  }
  save(names);
  dir_->prune(c_.keep_last);
}

// Every rank takes every WORLD_SIZE-th batch of the corpus; the sums are all ranks'.
Sums Trainer::validate(const Corpus& corpus) {
  const auto l = corpus_loss(net_, corpus, c_.batching, c_.seed, c_.loss, dp_.shard());
  return dp_.all_reduced({l.loss, l.nll, l.tokens, 0, l.correct});
}

// Every rank's dropout stream (a collective), then rank 0 writes the checkpoints: the model at
// the optimiser's evaluation point (schedule-free's x), every rank moving its parameters alike.
void Trainer::save(const std::vector<std::string>& names) {
  const AtEvaluationPoint evaluated(*optimizer_);
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
  event(test_record(pos_, t, c_.model.classifier()), test_line(c_.test_prefix, t, c_.model.classifier()));
}

// A record of metrics.jsonl and its progress line.
void Trainer::event(nlohmann::json record, const std::string& line) {
  dir_->record(record);
  dir_->line(line);
}

}  // namespace detail

namespace {

// The problems of the options, the callbacks' and the precision's on `device`, all at once.
void check(const TrainConfig& config, const TrainCallbacks& callbacks, const torch::Device& device,
           const core::ProcessGroup& group) {
  auto problems = config.problems();
  for (const auto& cb : callbacks)
    for (auto& p : cb->problems(config, group)) problems.push_back(p);
  for (auto& p : model::precision_problems(config.precision, device)) problems.push_back(p);
  core::throw_if_problems(problems);
}

}  // namespace

TrainResult train(const TrainConfig& config, TrainCallbacks callbacks, const torch::Device& device,
                  core::ProcessGroup& group) {
  // --init-from: the model is the checkpoint's (grown), and the options are checked against it
  // (a decoder-only checkpoint's --block-size, an optimiser its parametrisation refuses).
  core::throw_if_problems(config.init_from.problems());  // the options before the file
  TrainConfig resolved = config;
  auto base = load_init_from(resolved);
  check(resolved, callbacks, device, group);
  return detail::Trainer(resolved, std::move(base), std::move(callbacks), device, group).run();
}

}  // namespace normlab::train
