// `normlab train`: the training loop and its run folder (docs/training.md).
//
// RUN_DIR/config.json      the fully resolved configuration
// RUN_DIR/vocab/spm.model  the joint SentencePiece vocabulary (trained once)
// RUN_DIR/metrics.jsonl    one JSON object per logged update, per validation, per event
// RUN_DIR/train.log        the progress lines also printed on stderr
// RUN_DIR/checkpoints/     checkpoint_last.pt, checkpoint_best.pt, checkpoint<epoch>.pt,
//                          checkpoint_<epoch>_<update>.pt
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <nlohmann/json_fwd.hpp>

#include "core/process_group.h"
#include "data/batching.h"
#include "data/vocab.h"
#include "model/config.h"
#include "model/precision.h"
#include "model/stacking.h"
#include "train/bleu_validator.h"
#include "train/grad_reducer.h"
#include "train/criterion.h"
#include "train/loss_scaler.h"
#include "train/optimizer.h"
#include "train/schedule.h"
#include "train/step_observer.h"

namespace normlab::train {

// --init-from: fine-tuning a trained normlab model, with layers added on top of its stacks
// (docs/training.md, "Layers on a trained model"; model/stacking.h).
struct InitFromConfig {
  std::string checkpoint;          // empty: a model of `model`, freshly initialised
  model::AddedLayers added;        // --add-encoder-layers, --add-decoder-layers, --init
  double pretrained_lr_scale = 1;  // the trained parameters' lr multiplier (0: frozen)
};

// What checkpoint_best.pt is best at.
enum class BestMetric { kLoss, kBleu };  // lowest valid_loss | highest valid_bleu
BestMetric parse_best_metric(const std::string& s);

struct TrainConfig {
  // Data
  std::string train_prefix;          // PREFIX.SRC / PREFIX.TGT (plain or .gz)
  std::string valid_prefix;          // validated after every epoch
  std::string test_prefix;           // optional: scored once when training ends
  double max_length_ratio = 0.0;     // drop training pairs with max(n,m)/min(n,m) above (0: off)
  int64_t max_pairs = 0;             // train on the first N pairs of the training text (0: all)
  std::string src_lang = "de";
  std::string tgt_lang = "en";
  std::string cache_dir;             // encoded corpora; empty: RUN_DIR/cache
  data::VocabTrainOptions vocab;     // the joint BPE model trained on the training text
  data::BatchingConfig batching;     // --max-tokens, --max-sentences
  int64_t update_freq = 1;           // batches accumulated per optimiser step
  double bucket_cap_mb = kBucketCapMb;  // several ranks: gradient all-reduce buckets (grad_reducer.h)
  InitFromConfig init_from;          // --init-from and its options
  // Model (vocabulary sizes come from the vocabulary)
  model::ModelConfig model;
  model::Precision precision = model::Precision::kFp32;  // of the matrix products (precision.h)
  LossScalerConfig loss_scaler;      // fp16's dynamic loss scaling (loss_scaler.h)
  // Optimisation
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  double clip_norm = 0.0;            // 0: no clipping (the norm is still logged)
  LossOptions loss;                  // --label-smoothing, --ls-formula, --z-loss (criterion.h)
  // Limits: training stops at whichever comes first; at least one must be set.
  int64_t max_epochs = 0;
  int64_t max_steps = 0;
  // fairseq's --stop-time-hours: stop after the update at which the run's training wall time
  // (all runs of this RUN_DIR, checkpoint position wall_s) reaches this many hours; 0: no limit.
  // A cap on top of --max-epochs/--max-steps, not instead of them (schedules need those).
  double stop_time_hours = 0.0;
  // Output
  std::string out;                   // RUN_DIR
  int64_t log_interval = 100;        // updates between metrics records
  int64_t save_interval = 1;         // keep checkpoint<E>.pt every N epochs (last/best: every epoch)
  int64_t save_interval_updates = 0; // also checkpoint every N updates (0: only at epoch ends)
  int64_t keep_last = 0;             // keep the N newest per-epoch/per-update checkpoints (0: all)
  uint64_t seed = 1;
  bool fail_on_divergence = false;   // exit non-zero when the loss becomes NaN or infinite
  bool valid_at_init = false;        // validate the initial model: an init_valid_loss record
  TraceConfig trace;                 // --trace-steps/--trace-params: RUN_DIR/trace/ (docs/probe.md)
  CurvatureConfig curvature;         // --curvature-*: RUN_DIR/curvature.jsonl (docs/curvature.md)
  // Validation BLEU (docs/translate.md); the decoder's options are the BleuValidator's
  bool eval_bleu = false;            // beam-search the validation set every epoch: valid_bleu
  BestMetric best_metric = BestMetric::kLoss;

  // Every problem at once, naming the option.
  std::vector<std::string> problems() const;
};

// config.json without the BleuValidator's settings (train() adds them).
void to_json(nlohmann::json& j, const TrainConfig& c);

// Options whose change makes resuming a different experiment (model, data, optimiser kind,
// batching, seed...). Others (limits, logging, device) may change between runs.
std::vector<std::string> incompatible_changes(const nlohmann::json& saved, const nlohmann::json& now);

struct TrainResult {
  int64_t updates = 0;
  int64_t epochs = 0;
  bool diverged = false;
  double best_valid_loss = 0.0;  // per token, nats
};

// What the trainer calls but does not own: the parts of a run that live above train/ in
// GUIDE.md's data flow (analysis/, decode/, metrics/). apps/normlab/cmd_train.cpp wires them in.
struct TrainHooks {
  MakeStepObserver make_observer;  // required when config.trace.steps > 0 (analysis::Tracer)
  MakeLogitObserver make_logit_observer;  // required when config.trace.logits (analysis::LogitTracer)
  MakeCurvatureObserver make_curvature;  // required when config.curvature.every > 0 (analysis::CurvatureSeries)
  // Its options go into config.json (cmd_train always gives one); required under --eval-bleu.
  BleuValidator* bleu = nullptr;
};

// Trains, or resumes from RUN_DIR's newest intact checkpoint when there is one; a run that has
// reached its limits is left as it is. With several ranks in `group` (docs/distributed.md), each
// takes every WORLD_SIZE-th batch and rank 0 alone writes RUN_DIR.
TrainResult train(const TrainConfig& config, const TrainHooks& hooks, const c10::Device& device,
                  core::ProcessGroup& group);

}  // namespace normlab::train
