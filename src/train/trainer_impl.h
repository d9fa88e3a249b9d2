// The Trainer behind train::train() (trainer.h): its state and its phases, named as the step
// reads (docs/architecture.md). The set-up phases are in trainer_setup.cpp, the loop in trainer.cpp.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/callback.h"
#include "train/data_parallel.h"
#include "train/position.h"
#include "train/run_dir.h"
#include "train/scaled_optimizer.h"
#include "train/trainer.h"

namespace normlab::train::detail {

using Clock = std::chrono::steady_clock;
using BatchOrder = std::vector<std::vector<int64_t>>;

class Trainer {
 public:
  // `base`: the --init-from checkpoint, whose (grown) model `config` already holds (load_init_from).
  Trainer(const TrainConfig& config, std::optional<model::LoadedModel> base, TrainCallbacks callbacks,
          const torch::Device& device, core::ProcessGroup& group)
      : c_(config), callbacks_(std::move(callbacks)), device_(device), dp_(group), base_(std::move(base)) {}
  TrainResult run();

 private:
  // Set-up (run_setup.h): true when the run has work left.
  bool open_run();
  bool resume_before_last_update();
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
  void validate_and_save(bool end_of_epoch, bool last);  // last: the run's final validation
  bool update_checkpoint_due() const;                     // --save-interval-updates at this update
  bool validation_due() const;                            // --validate-interval-updates at this update
  double rate(int64_t update, int64_t epoch) const;  // the schedule's times the callbacks' rate_factor
  bool last_update(int64_t n_batches) const;  // no update follows this one (of an epoch of n_batches)
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
  model::Model net_{nullptr};
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

}  // namespace normlab::train::detail
