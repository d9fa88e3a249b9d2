// `normlab train`'s options (docs/training.md): the run's whole configuration, its checks, its
// config.json form, and what may change between the runs of one RUN_DIR.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "data/batching.h"
#include "data/masking.h"
#include "data/vocab.h"
#include "model/config.h"
#include "model/precision.h"
#include "model/stacking.h"
#include "train/grad_reducer.h"
#include "train/instrument_config.h"
#include "train/criterion.h"
#include "train/loss_scaler.h"
#include "train/optimizer.h"
#include "train/schedule.h"

namespace normlab::train {

// --init-from: fine-tuning a trained normlab model, with layers added on top of its stacks
// (docs/training.md, "Layers on a trained model"; model/stacking.h).
// Also fine-tuning a classifier on a trained encoder-only model (--num-classes; docs/finetune.md).
struct InitFromConfig {
  std::string checkpoint;          // empty: a model of `model`, freshly initialised
  int64_t update = 0;              // > 0: `checkpoint` is a checkpoints folder, its checkpoint_<E>_<update>.pt
  model::AddedLayers added;        // --add-encoder-layers, --add-decoder-layers, --init
  double pretrained_lr_scale = 1;  // the trained parameters' lr multiplier (0: frozen)
  // --num-classes K (a command line's model flag, recorded here): a classification head of K
  // classes on the checkpoint's encoder; 0: the checkpoint's own head.
  int64_t classes = 0;
  // --classifier-pooling with --num-classes: what the new head reads (unset: cls, <s>).
  std::optional<model::ClassifierPooling> pooling;
  std::vector<std::string> problems() const;  // every problem, naming the option
};

// What checkpoint_best.pt is best at.
enum class BestMetric { kLoss, kBleu };  // lowest valid_loss | highest valid_bleu
BestMetric parse_best_metric(const std::string& s);

struct TrainConfig {
  // Data
  std::string train_prefix;          // PREFIX.SRC / PREFIX.TGT (plain or .gz); decoder-only: a text file
  std::string valid_prefix;          // validated after every epoch
  std::string test_prefix;           // optional: scored once when training ends
  double max_length_ratio = 0.0;     // drop training pairs with max(n,m)/min(n,m) above (0: off)
  int64_t max_pairs = 0;             // train on the first N pairs of the training text (0: all)
  // A single-stack model reads --train/--valid/--test as running text (data/text_stream.h), cut
  // into blocks of this many positions; 0: --max-positions (run_clm's default block size).
  int64_t block_size = 0;
  data::MaskingConfig masking;       // an encoder-only model's masked-LM corruption (data/masking.h)
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
  // fairseq's --validate-interval-updates: also validate every N updates, then write
  // checkpoint_last (and best) as at an epoch's end (0: validate at epoch ends only).
  int64_t validate_interval_updates = 0;
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
  // The schedule of the rate the trainer gives the optimiser: `schedule`, without its warm-up for
  // an optimiser that warms up itself (kOwnWarmupOption: adamw-schedulefree ramps over
  // optimizer.warmup_steps, the command's copy of --warmup-steps).
  ScheduleConfig rate_schedule() const;
  // The positions of a block of running text (single-stack kinds): block_size, else max_positions.
  int64_t text_block_size() const { return block_size > 0 ? block_size : model.max_positions; }
};

// config.json without the BleuValidator's settings (train() adds them).
void to_json(nlohmann::json& j, const TrainConfig& c);

// Options whose change makes resuming a different experiment (model, data, optimiser kind,
// batching, seed...). Others (limits, logging, device) may change between runs.
std::vector<std::string> incompatible_changes(const nlohmann::json& saved, const nlohmann::json& now);

}  // namespace normlab::train
