#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/dir_lock.h"
#include "core/file_io.h"
#include "core/hash.h"
#include "core/problems.h"
#include "core/same_job.h"
#include "core/tokens.h"
#include "data/cache.h"
#include "data/corpus.h"
#include "model/checkpoint.h"
#include "model/init.h"
#include "train/corpus_loss.h"
#include "train/checkpoint_names.h"
#include "train/grad_reducer.h"
#include "train/loss_scaler.h"

namespace normlab::train {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kLossScalerKey = "fp16/loss_scaler";
constexpr const char* kRngKey = "rng/cpu";  // rank 0's dropout stream; rank r's under kRngKey/rank<r>
constexpr const char* kOptimizerPrefix = "optimizer/";

// Progress lines to stderr and RUN_DIR/train.log; records to RUN_DIR/metrics.jsonl. The
// metrics file is opened per record: a resume replaces it (truncate_metrics renames a new file
// over it), and a stream kept open would go on writing into the replaced, unlinked file.
// Only rank 0 of a data-parallel job writes (`writes`); the others' RunLog does nothing.
class RunLog {
 public:
  RunLog(const fs::path& dir, bool writes) : writes_(writes), metrics_(dir / "metrics.jsonl") {
    if (!writes_) return;
    log_.open(dir / "train.log", std::ios::app);
    std::ofstream(metrics_, std::ios::app);  // the run folder always has it, even before a record
  }
  void line(const std::string& text) {
    if (!writes_) return;
    std::cerr << text << "\n";
    log_ << text << "\n";
    log_.flush();
  }
  void record(const nlohmann::json& j) {
    if (!writes_) return;
    std::ofstream out(metrics_, std::ios::app);
    out << j.dump() << "\n";
    if (!out.flush()) throw std::runtime_error("cannot append to " + metrics_.string());
  }

 private:
  bool writes_;
  std::ofstream log_;
  fs::path metrics_;
};

// Drops the records that the resumed run will write again: those of updates after `update`,
// and end-of-epoch validations of epoch `epoch` or later (a run killed after its last
// checkpoint logged them; a mid-epoch one, at a --max-steps stop, is kept when its update is).
// Atomic.
void truncate_metrics(const fs::path& file, int64_t update, int64_t epoch) {
  if (!fs::exists(file)) return;
  std::ifstream in(file);
  std::string kept;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;  // a line cut by the kill
    if (j.value("step", int64_t{0}) > update) continue;
    if (j.contains("valid_loss") && !j.value("mid_epoch", false) && j.value("epoch", int64_t{0}) >= epoch) continue;
    kept += line + "\n";
  }
  core::write_file_atomic(file.string(), kept);
}

// Where the loop is; saved in every checkpoint so that a resumed run continues exactly.
struct Position {
  int64_t update = 0;          // optimiser steps done
  int64_t epoch = 1;           // current epoch (1-based)
  int64_t next_batch = 0;      // index of the next batch of this epoch's order
  double best_valid_loss = std::numeric_limits<double>::infinity();
  double best_valid_bleu = -1;  // -1: none yet (--eval-bleu)
  double wall_s = 0.0;         // training time of earlier runs of this RUN_DIR
};

struct Corpus {
  std::vector<data::Sentence> src, tgt;
  std::vector<int64_t> sizes;  // data::example_sizes
  std::vector<int64_t> kept;   // indices that passed the filter
  std::vector<std::string> files;  // the text files it was read from
};

// `training`: the length-ratio filter applies to the training data only (fairseq).
Corpus load_corpus(const std::string& prefix, const TrainConfig& c, const data::Vocab& vocab,
                   const std::string& cache_dir, bool training, RunLog& log) {
  auto loaded = data::load_encoded_corpus(prefix, c.src_lang, c.tgt_lang, vocab, cache_dir);
  log.line(loaded.message);
  Corpus corpus;
  corpus.files = {loaded.src_path, loaded.tgt_path};
  corpus.src = std::move(loaded.corpus.src);
  corpus.tgt = std::move(loaded.corpus.tgt);
  data::FilterOptions filter;
  filter.max_positions = c.model.max_positions;
  filter.max_length_ratio = training ? c.max_length_ratio : 0.0;
  auto result = data::filter_pairs(corpus.src, corpus.tgt, filter);
  corpus.kept = std::move(result.kept);
  if (training && c.max_pairs > 0)  // --max-pairs: of the first N pairs, those the filter kept
    corpus.kept.erase(std::lower_bound(corpus.kept.begin(), corpus.kept.end(), c.max_pairs), corpus.kept.end());
  corpus.sizes = data::example_sizes(corpus.src, corpus.tgt);
  std::ostringstream s;
  s << prefix << ": " << corpus.kept.size() << " pairs kept of "
    << (training && c.max_pairs > 0 ? std::min<int64_t>(c.max_pairs, static_cast<int64_t>(corpus.src.size()))
                                     : static_cast<int64_t>(corpus.src.size()))
    << (training && c.max_pairs > 0 ? " (--max-pairs)" : "") << " ("
    << result.empty << " empty, " << result.too_long << " longer than --max-positions "
    << c.model.max_positions << ", " << result.bad_ratio << " beyond --max-length-ratio)";
  log.line(s.str());
  return corpus;
}

data::Batch gather(const Corpus& corpus, const std::vector<int64_t>& indices) {
  return data::gather_batch(corpus.src, corpus.tgt, indices);
}

struct Sums {
  double loss = 0, nll = 0;
  int64_t tokens = 0;
  int64_t out_of_time = 0;  // ranks whose clock passed --stop-time-hours (summed with the rest)
};

// The sums of every rank.
Sums all_reduced(const Sums& s, core::ProcessGroup& group) {
  if (group.size() == 1) return s;
  auto t = torch::tensor({s.loss, s.nll, static_cast<double>(s.tokens), static_cast<double>(s.out_of_time)},
                         torch::kDouble);
  group.all_reduce_sum(t);
  return {t[0].item<double>(), t[1].item<double>(), static_cast<int64_t>(t[2].item<double>()),
          static_cast<int64_t>(t[3].item<double>())};
}

// Every rank takes every WORLD_SIZE-th batch of the corpus; the sums are all ranks'.
Sums validate(model::Seq2Seq& net, const Corpus& corpus, const TrainConfig& c, core::ProcessGroup& group) {
  const auto l = corpus_loss(net, corpus.src, corpus.tgt, corpus.kept, c.batching, c.seed, c.loss,
                             data::Shard{group.rank(), group.size()});
  return all_reduced({l.loss, l.nll, l.tokens}, group);
}

// Corpus BLEU of the validation set (--eval-bleu): pairs the filter dropped are not decoded
// (an empty hypothesis), so every reference line counts. Each rank decodes every
// WORLD_SIZE-th sentence; all ranks score the gathered translations.
double valid_bleu(model::Seq2Seq& net, const Corpus& corpus, BleuValidator& bleu, core::ProcessGroup& group) {
  const auto size = static_cast<size_t>(group.size()), rank = static_cast<size_t>(group.rank());
  std::vector<data::Sentence> sources(corpus.src.size());
  for (auto i : corpus.kept)
    if (static_cast<size_t>(i) % size == rank) sources[static_cast<size_t>(i)] = corpus.src[static_cast<size_t>(i)];
  auto hyps = bleu.translate(net, sources);
  if (size > 1) {
    const auto all = group.all_gather(nlohmann::json(hyps).dump());
    for (size_t r = 0; r < size; ++r) {
      const auto theirs = nlohmann::json::parse(all[r]).get<std::vector<std::string>>();
      for (size_t i = r; i < hyps.size(); i += size) hyps[i] = theirs.at(i);
    }
  }
  return bleu.score(hyps);
}

std::string rng_key(int rank) { return rank == 0 ? kRngKey : std::string(kRngKey) + "/rank" + std::to_string(rank); }

// Dropout stream of rank r > 0 (rank 0 keeps --seed's, so one rank trains as one process does).
uint64_t rank_seed(uint64_t seed, int rank) {
  const uint64_t r = static_cast<uint64_t>(rank);
  return core::hash_bytes(&r, sizeof r, seed);
}

// Newest intact checkpoint of RUN_DIR (last, then the others by modification time).
std::optional<model::LoadedModel> newest_intact_checkpoint(const fs::path& dir, RunLog& log) {
  if (!fs::exists(dir)) return std::nullopt;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".pt") files.push_back(e.path());
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
    const bool a_last = a.filename() == "checkpoint_last.pt", b_last = b.filename() == "checkpoint_last.pt";
    if (a_last != b_last) return a_last;
    return fs::last_write_time(a) > fs::last_write_time(b);
  });
  for (const auto& f : files) {
    if (f.filename() == "checkpoint_best.pt") continue;  // not necessarily the newest position
    try {
      auto loaded = model::load_model(f.string());
      if (!loaded.meta.contains("position")) continue;
      if (f.filename() != "checkpoint_last.pt" && fs::exists(dir / "checkpoint_last.pt"))
        log.line("normlab train: " + (dir / "checkpoint_last.pt").string() +
                 " is unreadable; resuming from " + f.string());
      return loaded;
    } catch (const std::exception& e) {
      log.line(std::string("normlab train: skipping checkpoint: ") + e.what());
    }
  }
  return std::nullopt;
}

}  // namespace

BestMetric parse_best_metric(const std::string& s) {
  if (s == "loss") return BestMetric::kLoss;
  if (s == "bleu") return BestMetric::kBleu;
  throw std::invalid_argument("--best-metric: unknown value '" + s + "', expected loss|bleu");
}

std::vector<std::string> TrainConfig::problems() const {
  std::vector<std::string> out;
  if (train_prefix.empty()) out.push_back("--train is required");
  if (valid_prefix.empty()) out.push_back("--valid is required");
  if (out.empty() && this->out.empty()) out.push_back("--out is required");
  if (update_freq < 1) out.push_back("--update-freq must be >= 1, got " + std::to_string(update_freq));
  if (!(bucket_cap_mb > 0 && bucket_cap_mb <= 4096))
    out.push_back("--bucket-cap-mb must be in (0, 4096], got " + std::to_string(bucket_cap_mb));
  if (max_epochs < 0 || max_steps < 0) out.push_back("--max-epochs and --max-steps must be >= 0");
  if (max_epochs == 0 && max_steps == 0) out.push_back("set --max-epochs or --max-steps");
  if (!(stop_time_hours >= 0)) out.push_back("--stop-time-hours must be >= 0");
  if (log_interval < 1) out.push_back("--log-interval must be >= 1, got " + std::to_string(log_interval));
  if (save_interval < 1) out.push_back("--save-interval must be >= 1, got " + std::to_string(save_interval));
  if (save_interval_updates < 0) out.push_back("--save-interval-updates must be >= 0");
  if (keep_last < 0) out.push_back("--keep-last must be >= 0");
  if (clip_norm < 0) out.push_back("--clip-norm must be >= 0");
  for (auto& p : loss.problems()) out.push_back(p);
  for (auto& p : vocab.validate()) out.push_back(p);
  for (auto& p : batching.validate()) out.push_back(p);
  for (auto& p : optimizer.problems()) out.push_back(p);
  for (auto& p : schedule.problems()) out.push_back(p);
  for (auto& p : trace.problems()) out.push_back(p);
  for (auto& p : curvature.problems()) out.push_back(p);
  for (auto& p : loss_scaler.problems()) out.push_back(p);
  if (best_metric == BestMetric::kBleu && !eval_bleu) out.push_back("--best-metric bleu needs --eval-bleu");
  if (max_pairs < 0) out.push_back("--max-pairs must be >= 0, got " + std::to_string(max_pairs));
  const auto& f = init_from;
  for (auto& p : model::added_count_problems(f.added)) out.push_back(p);
  if (f.checkpoint.empty()) {
    if (f.added.encoder > 0 || f.added.decoder > 0)
      out.push_back("--add-encoder-layers/--add-decoder-layers add layers to a trained model: give --init-from CKPT");
    if (f.pretrained_lr_scale != 1.0) out.push_back("--pretrained-lr-scale needs --init-from CKPT");
    if (f.added.init != model::AddedLayerInit::kXavier)
      out.push_back("--init " + model::to_string(f.added.init) +
                    " initialises layers added to a trained model: give --init-from CKPT and --add-encoder-layers "
                    "or --add-decoder-layers");
  }
  if (!(f.pretrained_lr_scale >= 0 && std::isfinite(f.pretrained_lr_scale)))
    out.push_back("--pretrained-lr-scale must be finite and >= 0, got " + std::to_string(f.pretrained_lr_scale));
  if (f.pretrained_lr_scale != 1.0 && curvature.every > 0)
    out.push_back("--curvature-every measures one lr for every parameter: not with --pretrained-lr-scale");
  return out;
}

void to_json(nlohmann::json& j, const TrainConfig& c) {
  j = {{"data",
        {{"train", c.train_prefix},
         {"valid", c.valid_prefix},
         {"test", c.test_prefix},
         {"max_length_ratio", c.max_length_ratio},
         {"max_pairs", c.max_pairs},
         {"src", c.src_lang},
         {"tgt", c.tgt_lang},
         {"cache_dir", c.cache_dir},
         {"vocab_size", c.vocab.vocab_size},
         {"character_coverage", c.vocab.character_coverage}}},
       {"batching",
        {{"max_tokens", c.batching.max_tokens},
         {"max_sentences", c.batching.max_sentences},
         {"update_freq", c.update_freq}}},
       {"model", c.model},
       {"precision", model::to_string(c.precision)},
       {"optimizer", c.optimizer},
       {"schedule", c.schedule},
       {"loss",
        {{"label_smoothing", c.loss.label_smoothing},
         {"formula", to_string(c.loss.formula)},
         {"z_loss", c.loss.z_loss},
         {"clip_norm", c.clip_norm}}},
       {"seed", c.seed},
       {"limits", {{"max_epochs", c.max_epochs}, {"max_steps", c.max_steps}, {"stop_time_hours", c.stop_time_hours}}},
       {"output",
        {{"out", c.out},
         {"log_interval", c.log_interval},
         {"save_interval", c.save_interval},
         {"save_interval_updates", c.save_interval_updates},
         {"keep_last", c.keep_last},
         {"fail_on_divergence", c.fail_on_divergence},
         {"trace_steps", c.trace.steps},
         {"trace_params", c.trace.params},
         {"trace_logits", c.trace.logits},
         {"valid_at_init", c.valid_at_init}}},
       {"fp16",
        {{"init_scale", c.loss_scaler.init_scale},
         {"scale_window", c.loss_scaler.window},
         {"min_loss_scale", c.loss_scaler.min_scale}}},
       {"curvature",
        {{"every", c.curvature.every},
         {"sentences", c.curvature.sentences},
         {"steps", c.curvature.steps},
         {"preconditioner", to_string(c.curvature.preconditioner)}}},
       {"distributed", {{"bucket_cap_mb", c.bucket_cap_mb}}},
       {"eval",
        {{"eval_bleu", c.eval_bleu},
         {"best_metric", c.best_metric == BestMetric::kBleu ? "bleu" : "loss"}}}};
  if (!c.init_from.checkpoint.empty())
    j["init_from"] = {{"checkpoint", c.init_from.checkpoint},
                      {"add_encoder_layers", c.init_from.added.encoder},
                      {"add_decoder_layers", c.init_from.added.decoder},
                      {"init", model::to_string(c.init_from.added.init)},
                      {"pretrained_lr_scale", c.init_from.pretrained_lr_scale}};
}

std::vector<std::string> incompatible_changes(const nlohmann::json& saved, const nlohmann::json& now) {
  // The schedule's max_steps follows --max-steps, a limit that may grow between runs.
  auto strip = [](nlohmann::json j) {
    j["data"].erase("cache_dir");
    j["data"].erase("test");  // scored at the end only
    j["schedule"].erase("max_steps");
    j["model"].erase("src_vocab_size");  // filled in from the vocabulary
    j["model"].erase("tgt_vocab_size");
    if (!j.contains("precision")) j["precision"] = "fp32";  // runs from before --precision
    return j;
  };
  const auto a = strip(saved), b = strip(now);
  std::vector<std::string> out;
  for (const char* section :
       {"data", "batching", "model", "precision", "optimizer", "schedule", "loss", "seed", "init_from"}) {
    if (a.value(section, nlohmann::json()) == b.value(section, nlohmann::json())) continue;
    if (!a[section].is_object()) {
      out.push_back(std::string(section) + " was " + a[section].dump() + ", now " + b[section].dump());
      continue;
    }
    for (const auto& [key, value] : a[section].items())
      if (b[section].value(key, nlohmann::json()) != value)
        out.push_back(std::string(section) + "." + key + " was " + value.dump() + ", now " +
                      b[section].value(key, nlohmann::json()).dump());
  }
  return out;
}

TrainResult train(const TrainConfig& config, const TrainHooks& hooks, const torch::Device& device,
                  core::ProcessGroup& group) {
  auto problems = config.problems();
  if (config.trace.steps > 0 && !hooks.make_observer)
    problems.push_back("--trace-steps: train() was given no step observer to make (TrainHooks)");
  if (config.trace.logits && !hooks.make_logit_observer)
    problems.push_back("--trace-logits: train() was given no logit observer to make (TrainHooks)");
  if (config.trace.logits && group.size() > 1)
    problems.push_back("--trace-logits traces one process's batches: run it without a launcher (here WORLD_SIZE=" +
                       std::to_string(group.size()) + ")");
  if (config.curvature.every > 0 && !hooks.make_curvature)
    problems.push_back("--curvature-every: train() was given no curvature observer to make (TrainHooks)");
  if (config.trace.steps > 0 && group.size() > 1)
    problems.push_back("--trace-steps traces one process's steps: run it without a launcher (here WORLD_SIZE=" +
                       std::to_string(group.size()) + ")");
  if (config.eval_bleu && !hooks.bleu) problems.push_back("--eval-bleu: train() was given no BleuValidator (TrainHooks)");
  if (config.eval_bleu && hooks.bleu)
    for (auto& p : hooks.bleu->problems()) problems.push_back(p);
  for (auto& p : model::precision_problems(config.precision, device)) problems.push_back(p);
  core::throw_if_problems(problems);
  // --init-from: the model is the checkpoint's with the added layers (its vocabulary too).
  TrainConfig c = config;
  std::optional<model::LoadedModel> base;
  if (!c.init_from.checkpoint.empty()) {
    base = model::load_model(c.init_from.checkpoint);
    if (!base->extra_tensors.count(model::kVocabTensor))
      throw std::invalid_argument("--init-from " + c.init_from.checkpoint +
                                  ": holds no vocabulary (not a checkpoint of normlab train)");
    const auto& trained = base->model->config();
    core::throw_if_problems(model::added_layer_problems(trained, c.init_from.added));
    c.model = model::grown_config(trained, c.init_from.added);
    c.model.src_vocab_size = c.model.tgt_vocab_size = 0;  // from the vocabulary, as for every run
  }
  // Rank 0 of a data-parallel job writes RUN_DIR, alone (its lock); every rank reads it.
  const bool writer = group.is_main();
  const fs::path run(c.out), ckpt_dir = run / "checkpoints";
  std::optional<core::DirLock> lock;
  if (writer) {
    lock.emplace(c.out, "normlab train");
    fs::create_directories(ckpt_dir);
  }
  RunLog log(run, writer);
  nlohmann::json config_json = c;
  if (hooks.bleu) hooks.bleu->add_settings(config_json["eval"]);

  // Resume from the newest intact checkpoint, if any; it must be the same experiment.
  auto resumed = newest_intact_checkpoint(ckpt_dir, log);
  Position pos;
  if (resumed) {
    auto changes = incompatible_changes(resumed->meta.at("config"), config_json);
    if (!changes.empty())
      throw std::invalid_argument(c.out + " holds a different experiment (" +
                                  core::join_problems(changes) + "); use another --out or the same options");
    const auto& p = resumed->meta.at("position");
    pos.update = p.at("update");
    pos.epoch = p.at("epoch");
    pos.next_batch = p.at("next_batch");
    pos.wall_s = p.at("wall_s");
    // JSON has no infinity: null means no validation yet.
    if (!p.at("best_valid_loss").is_null()) pos.best_valid_loss = p.at("best_valid_loss");
    pos.best_valid_bleu = p.value("best_valid_bleu", -1.0);
  }
  TrainResult result;
  result.best_valid_loss = pos.best_valid_loss;
  // A run that reached its limits changes nothing when started again with them, train.log
  // included (a larger limit continues it).
  const double stop_time_s = c.stop_time_hours * 3600.0;
  const bool out_of_time = stop_time_s > 0 && pos.wall_s >= stop_time_s;
  if ((c.max_steps > 0 && pos.update >= c.max_steps) || (c.max_epochs > 0 && pos.epoch > c.max_epochs) ||
      out_of_time) {
    if (writer)
      std::cerr << ("normlab train: " + c.out + " is complete (update " + std::to_string(pos.update) + ", epoch " +
             std::to_string(pos.epoch - (pos.next_batch == 0 ? 1 : 0)) +
             (out_of_time ? ", " + std::to_string(static_cast<int64_t>(pos.wall_s)) + " s of training" : std::string()) +
             "): nothing to do; raise --max-steps, --max-epochs" + (out_of_time ? " or --stop-time-hours" : "") +
             " to continue it")
                << "\n";
    result.updates = pos.update;
    result.epochs = pos.epoch - 1;
    return result;
  }

  // Vocabulary: from the checkpoint, from RUN_DIR/vocab, or trained on the training text (by rank 0).
  const fs::path vocab_dir = run / "vocab";
  std::string vocab_bytes;
  if (resumed) {
    vocab_bytes = model::tensor_bytes(resumed->extra_tensors.at(model::kVocabTensor));
  } else if (base) {
    vocab_bytes = model::tensor_bytes(base->extra_tensors.at(model::kVocabTensor));
    if (writer) {
      fs::create_directories(vocab_dir);
      core::write_file_atomic((vocab_dir / data::kVocabModelFile).string(), vocab_bytes);
    }
  } else {
    if (writer && !fs::exists(vocab_dir / data::kVocabModelFile)) {
      auto t0 = Clock::now();
      data::save_vocab(data::train_vocab_on_corpus(c.train_prefix, c.src_lang, c.tgt_lang, c.vocab),
                       vocab_dir.string());
      log.line("normlab train: trained a " + std::to_string(c.vocab.vocab_size) + "-piece BPE vocabulary in " +
               std::to_string(std::chrono::duration<double>(Clock::now() - t0).count()) + " s");
    }
    group.barrier();
    auto bytes = core::read_file((vocab_dir / data::kVocabModelFile).string());
    vocab_bytes.assign(bytes.begin(), bytes.end());
  }
  const auto vocab = data::Vocab::from_bytes(vocab_bytes, (vocab_dir / data::kVocabModelFile).string());
  const std::string cache_dir = c.cache_dir.empty() ? (run / "cache").string() : c.cache_dir;
  // Rank 0 encodes and caches a corpus first; the other ranks then read its cache.
  auto load_in_turn = [&](const std::string& prefix, bool training) {
    if (!writer) group.barrier();
    auto corpus = load_corpus(prefix, c, vocab, cache_dir, training, log);
    if (writer) group.barrier();
    return corpus;
  };
  const auto train_corpus = load_in_turn(c.train_prefix, true);
  const auto valid_corpus = load_in_turn(c.valid_prefix, false);
  if (c.eval_bleu) hooks.bleu->prepare(vocab, data::read_parallel(c.valid_prefix, c.src_lang, c.tgt_lang).tgt);

  auto model_config = c.model;
  model_config.src_vocab_size = model_config.tgt_vocab_size = vocab.size();
  config_json["model"] = model_config;
  if (group.size() > 1) {
    auto fingerprint = [&](const Corpus& corpus) {
      return core::hash_hex(data::corpus_cache_key(corpus.files, vocab_bytes));
    };
    core::check_same_job({{"config", config_json},
                          {"data", {{"train", fingerprint(train_corpus)}, {"valid", fingerprint(valid_corpus)}}},
                          {"resume", {{"update", resumed ? pos.update : -1}}}},
                         group);
  }
  if (writer) core::write_file_atomic((run / "config.json").string(), config_json.dump(2) + "\n");

  model::Seq2Seq net{nullptr};
  const auto saved_ranks = resumed ? resumed->meta.at("position").value("world_size", 1) : group.size();
  if (resumed) {
    net = resumed->model;
    truncate_metrics(run / "metrics.jsonl", pos.update, pos.epoch);
    log.line("normlab train: resuming at update " + std::to_string(pos.update) + ", epoch " +
             std::to_string(pos.epoch) + ", batch " + std::to_string(pos.next_batch));
    if (saved_ranks != group.size())
      log.line("normlab train: the checkpoint was written by " + std::to_string(saved_ranks) +
               " ranks, this run has " + std::to_string(group.size()) +
               ": the batches per update change, and ranks without a saved dropout stream start a fresh one");
  } else if (base) {
    // DT-Fixup's mu is over the training data (the authors': every training example, eval mode).
    std::vector<model::ProfileBatch> batches;
    for (const auto& b : data::make_batches(train_corpus.sizes, train_corpus.kept, c.batching, c.seed, 1)) {
      auto batch = gather(train_corpus, b);
      batches.push_back({batch.src, batch.prev_output_tokens});
    }
    auto grown = model::add_layers(base->model, c.init_from.added, c.seed, batches);
    net = grown.model;
    nlohmann::json event = {{"event", "init_from"},
                            {"update", 0},
                            {"checkpoint", c.init_from.checkpoint},
                            {"add_encoder_layers", c.init_from.added.encoder},
                            {"add_decoder_layers", c.init_from.added.decoder},
                            {"init", model::to_string(c.init_from.added.init)}};
    event.update(nlohmann::json(grown.report));
    log.record(event);
    log.line("normlab train: " + c.init_from.checkpoint + " with " + std::to_string(c.init_from.added.encoder) +
             " encoder and " + std::to_string(c.init_from.added.decoder) + " decoder layers added (" +
             model::to_string(c.init_from.added.init) + "): " + nlohmann::json(grown.report).dump());
  } else {
    net = model::Seq2Seq(model_config);
    torch::manual_seed(c.seed);
    const auto first = data::make_batches(train_corpus.sizes, train_corpus.kept, c.batching, c.seed, 1);
    auto b = gather(train_corpus, first.at(0));
    model::ProfileBatch profile{b.src, b.prev_output_tokens};  // Admin profiles on the first batch
    model::initialize(net, c.seed, &profile);
  }
  net->to(device);
  net->train();
  net->set_precision(c.precision);
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (const auto& p : net->named_parameters()) named.emplace_back(p.key(), p.value());
  if (!resumed) broadcast_parameters(net->parameters(), group);  // DDP: every rank starts from rank 0's
  GradientReducer reducer(net->parameters(), group, c.bucket_cap_mb);
  Optimizer optimizer(named, c.optimizer);
  if (c.init_from.pretrained_lr_scale != 1.0) {
    auto trained = c.model;
    trained.encoder_layers -= c.init_from.added.encoder;
    trained.decoder_layers -= c.init_from.added.decoder;
    std::vector<double> scales;
    for (const auto& [name, p] : named)
      scales.push_back(model::is_added_parameter(name, trained) ? 1.0 : c.init_from.pretrained_lr_scale);
    optimizer.set_lr_scales(std::move(scales));
  }
  auto generator = at::detail::getDefaultCPUGenerator();
  if (resumed) {
    model::TensorMap state;
    for (const auto& [k, v] : resumed->extra_tensors)
      if (k.rfind(kOptimizerPrefix, 0) == 0) state[k.substr(std::strlen(kOptimizerPrefix))] = v.to(device);
    optimizer.load_state(state);
    const auto rng = resumed->extra_tensors.find(rng_key(group.rank()));
    if (rng != resumed->extra_tensors.end())
      generator.set_state(rng->second);
    else
      torch::manual_seed(rank_seed(c.seed, group.rank()));
  } else if (group.rank() > 0) {
    torch::manual_seed(rank_seed(c.seed, group.rank()));  // each rank its own dropout stream
  }

  std::unique_ptr<CurvatureObserver> curvature;  // --curvature-every (below)
  // fp16: fairseq's dynamic loss scaling; its window by default 2^14 / (world size x update-freq).
  std::unique_ptr<DynamicLossScaler> scaler;
  if (c.precision == model::Precision::kFp16) {
    const int64_t window = c.loss_scaler.window > 0 ? c.loss_scaler.window
                                                     : std::max<int64_t>(1, 16384 / (group.size() * c.update_freq));
    scaler = std::make_unique<DynamicLossScaler>(c.loss_scaler, window);
    if (resumed && resumed->extra_tensors.count(kLossScalerKey))
      scaler->load_state(resumed->extra_tensors.at(kLossScalerKey));
  }
  const auto start = Clock::now();
  const double wall_before = pos.wall_s;
  auto wall = [&] { return wall_before + std::chrono::duration<double>(Clock::now() - start).count(); };
  auto save = [&](const std::vector<std::string>& names) {
    // Every rank's dropout stream, so that each resumes its own.
    const auto streams = group.all_gather(model::tensor_bytes(generator.get_state()));
    if (!writer) return;
    model::TensorMap extra;
    for (const auto& [k, v] : optimizer.state()) extra[kOptimizerPrefix + k] = v;
    for (size_t r = 0; r < streams.size(); ++r) extra[rng_key(static_cast<int>(r))] = model::bytes_tensor(streams[r]);
    if (curvature)
      for (const auto& [k, v] : curvature->state()) extra[k] = v;
    if (scaler) extra[kLossScalerKey] = scaler->state();
    extra[model::kVocabTensor] = model::bytes_tensor(vocab_bytes);
    nlohmann::json meta = {{"config", config_json},
                           {"position",
                            {{"update", pos.update},
                             {"epoch", pos.epoch},
                             {"next_batch", pos.next_batch},
                             {"best_valid_loss", pos.best_valid_loss},
                             {"best_valid_bleu", pos.best_valid_bleu},
                             {"wall_s", wall()},
                             {"world_size", group.size()}}}};
    for (const auto& name : names) model::save_model((ckpt_dir / name).string(), net, meta, extra);
  };
  auto prune = [&] {
    if (c.keep_last <= 0 || !writer) return;
    std::vector<fs::path> numbered;
    for (const auto& e : fs::directory_iterator(ckpt_dir)) {
      const auto n = e.path().filename().string();
      // Only the numbered checkpoints training wrote: never an average or a file of the user's.
      if (numbered_checkpoint(n, false) || numbered_checkpoint(n, true)) numbered.push_back(e.path());
    }
    std::sort(numbered.begin(), numbered.end(),
              [](const fs::path& a, const fs::path& b) { return fs::last_write_time(a) > fs::last_write_time(b); });
    for (size_t i = static_cast<size_t>(c.keep_last); i < numbered.size(); ++i) fs::remove(numbered[i]);
  };

  // Curvature on the probe set (--curvature-every): the first --curvature-sentences validation
  // pairs, batched as validation batches them; measured at update 0 and every N updates.
  if (c.curvature.every > 0) {
    const auto n = std::min<size_t>(static_cast<size_t>(c.curvature.sentences), valid_corpus.kept.size());
    const std::vector<int64_t> first(valid_corpus.kept.begin(), valid_corpus.kept.begin() + static_cast<int64_t>(n));
    std::vector<data::Batch> probe;
    for (const auto& b : data::make_batches(valid_corpus.sizes, first, c.batching, c.seed, 0))
      probe.push_back(gather(valid_corpus, b));
    curvature = hooks.make_curvature(c.curvature, net, std::move(probe), (run / "curvature.jsonl").string(),
                                     pos.update, writer);
    if (resumed) curvature->load_state(resumed->extra_tensors);
    if (pos.update == 0) curvature->measure(0, learning_rate(c.schedule, 1, pos.epoch), optimizer);
  }
  // --valid-at-init: the loss of the initial model (LR sensitivity's "loss at init", REFERENCE §9);
  // dropout off, no random numbers drawn, so the run that follows is the same.
  if (c.valid_at_init && pos.update == 0 && !resumed) {
    const auto v = validate(net, valid_corpus, c, group);
    log.record({{"step", 0}, {"epoch", 1}, {"init_valid_loss", v.loss / v.tokens}, {"init_valid_nll", v.nll / v.tokens}});
    std::ostringstream line;
    line << std::fixed << std::setprecision(3) << "initial model | valid loss " << v.loss / v.tokens << " | nll "
         << v.nll / v.tokens;
    log.line(line.str());
  }

  // The first-steps trace (--trace-steps): nothing exists, and nothing is done per step, when it is off.
  std::unique_ptr<LogitObserver> logits_trace;  // --trace-logits
  if (c.trace.logits) logits_trace = hooks.make_logit_observer(net, (run / "trace").string(), pos.update);
  std::unique_ptr<StepObserver> observer;
  if (c.trace.steps > pos.update) observer = hooks.make_observer(c.trace, net, (run / "trace").string(), pos.update);

  int64_t tokens_since_log = 0;
  const int64_t first_update = pos.update;
  // Batches per update: --update-freq on each of the ranks.
  const int64_t update_batches = c.update_freq * group.size();
  // Updates this run will make, for the ETA: --max-steps, else --max-epochs of batches.
  const int64_t batches_per_epoch = static_cast<int64_t>(
      data::make_batches(train_corpus.sizes, train_corpus.kept, c.batching, c.seed, 1).size());
  const int64_t updates_per_epoch = (batches_per_epoch + update_batches - 1) / update_batches;
  const int64_t planned = c.max_steps > 0 ? c.max_steps : c.max_epochs * updates_per_epoch;
  auto eta = [&] {
    const double per_update = std::chrono::duration<double>(Clock::now() - start).count() /
                              static_cast<double>(std::max<int64_t>(pos.update - first_update, 1));
    const auto left = static_cast<int64_t>(per_update * static_cast<double>(std::max<int64_t>(planned - pos.update, 0)));
    std::ostringstream s;
    s << left / 3600 << "h" << std::setw(2) << std::setfill('0') << (left / 60) % 60 << "m";
    return s.str();
  };
  auto log_clock = Clock::now();
  Sums window;  // since the last metrics record
  double sync_s = 0;  // since the last record: waiting for collectives after backward (several ranks)
  int64_t overlapped = 0, reduced = 0;  // gradient buckets since the last record: started during backward, all
  double lr = 0, grad_norm = 0;  // of the last update
  // The training record of the updates since the last one (every --log-interval, and at the end).
  auto record_window = [&](int64_t n_batches) {
    if (window.tokens == 0) return;
    const double secs = std::chrono::duration<double>(Clock::now() - log_clock).count();
    nlohmann::json record = {{"step", pos.update},
                             {"epoch", pos.epoch},
                             {"lr", lr},
                             {"loss", window.loss / window.tokens},
                             {"nll", window.nll / window.tokens},
                             {"grad_norm", grad_norm},
                             {"tokens", window.tokens},
                             {"tokens_per_s", tokens_since_log / secs},
                             {"wall_s", wall()}};
    if (group.size() > 1) {
      record["sync_s"] = sync_s;
      record["overlap"] = reduced > 0 ? static_cast<double>(overlapped) / static_cast<double>(reduced) : 0.0;
    }
    if (scaler) record["loss_scale"] = scaler->scale();
    log.record(record);
    std::ostringstream line;
    line << std::fixed << std::setprecision(3) << "epoch " << pos.epoch << " | update " << pos.update
         << " | batch " << pos.next_batch << "/" << n_batches << " | loss " << window.loss / window.tokens
         << " | nll " << window.nll / window.tokens << " | lr " << std::scientific << std::setprecision(3) << lr
         << std::fixed << " | gnorm " << grad_norm << " | " << std::setprecision(0) << tokens_since_log / secs
         << " tok/s | ETA " << eta();
    log.line(line.str());
    window = Sums{};
    sync_s = 0;
    overlapped = reduced = 0;
    tokens_since_log = 0;
    log_clock = Clock::now();
  };
  // Validation and checkpoints: at the end of an epoch, or where --max-steps stops inside one
  // (fairseq at --max-update; its record says mid_epoch).
  auto validate_and_save = [&](bool end_of_epoch) {
    const auto v = validate(net, valid_corpus, c, group);
    const double valid_loss = v.loss / v.tokens, valid_nll = v.nll / v.tokens;
    const double bleu = c.eval_bleu ? valid_bleu(net, valid_corpus, *hooks.bleu, group) : -1.0;
    const bool best = c.best_metric == BestMetric::kBleu ? bleu > pos.best_valid_bleu
                                                         : valid_loss < pos.best_valid_loss;
    pos.best_valid_loss = std::min(pos.best_valid_loss, valid_loss);
    pos.best_valid_bleu = std::max(pos.best_valid_bleu, bleu);
    nlohmann::json record = {{"step", pos.update},
                             {"epoch", pos.epoch},
                             {"valid_loss", valid_loss},
                             {"valid_nll", valid_nll},
                             {"valid_ppl", std::exp(valid_nll)},
                             {"valid_tokens", v.tokens},
                             {"wall_s", wall()}};
    if (c.eval_bleu) record["valid_bleu"] = bleu;
    if (!end_of_epoch) record["mid_epoch"] = true;
    log.record(record);
    std::ostringstream line;
    line << std::fixed << std::setprecision(3) << "epoch " << pos.epoch << (end_of_epoch ? "" : " (mid-epoch)")
         << " | valid loss " << valid_loss << " | nll " << valid_nll << " | ppl " << std::exp(valid_nll);
    if (c.eval_bleu) line << " | bleu " << std::setprecision(2) << bleu;
    line << (best ? " | best" : "");
    log.line(line.str());
    std::vector<std::string> names = {"checkpoint_last.pt"};
    if (end_of_epoch && pos.epoch % c.save_interval == 0) names.push_back(epoch_checkpoint_name(pos.epoch));
    if (best) names.push_back("checkpoint_best.pt");
    if (end_of_epoch) {
      ++pos.epoch;  // the saved position is the start of the next epoch
      pos.next_batch = 0;
    }
    save(names);
    prune();
  };

  bool done = false;
  while (!done && (c.max_epochs == 0 || pos.epoch <= c.max_epochs)) {
    const auto batches = data::make_batches(train_corpus.sizes, train_corpus.kept, c.batching, c.seed, pos.epoch);
    const auto n_batches = static_cast<int64_t>(batches.size());
    while (pos.next_batch < n_batches) {
      // One update: the next update_freq x WORLD_SIZE batches of the epoch's order (fewer at
      // its end), each rank taking every WORLD_SIZE-th; gradient of the loss summed over all of
      // them, divided by their target tokens (fairseq, REFERENCE §8).
      reducer.zero_grad();
      Sums update;
      const bool tracing = observer && observer->active(pos.update + 1);
      if (tracing) observer->begin(pos.update + 1);
      const int64_t span = std::min(update_batches, n_batches - pos.next_batch);
      const data::Shard shard{group.rank(), group.size()};
      int64_t last_owned = -1;
      for (int64_t j = 0; j < span; ++j)
        if (shard.owns(j)) last_owned = j;
      for (int64_t j = 0; j < span; ++j) {
        if (!shard.owns(j)) continue;
        if (j == last_owned) reducer.arm();  // this backward's hooks start the gradient all-reduce
        auto b = gather(train_corpus, batches[static_cast<size_t>(pos.next_batch + j)]);
        if (tracing) observer->batch(b.src, b.prev_output_tokens);
        auto logits = net->forward(b.src.to(device), b.prev_output_tokens.to(device));
        auto s = label_smoothed_nll(logits, b.target.to(device), c.loss.label_smoothing, c.loss.formula, kPad, c.loss.z_loss);
        if (logits_trace) logits_trace->output(logits, b.target);
        (scaler ? s.loss * scaler->scale() : s.loss).backward();
        update.loss += s.loss.item<double>();
        update.nll += s.nll.item<double>();
        update.tokens += s.tokens;
      }
      pos.next_batch += span;
      // Any rank's clock past --stop-time-hours makes this update every rank's last.
      update.out_of_time = stop_time_s > 0 && wall() >= stop_time_s;
      const auto sync_start = Clock::now();
      reducer.finish();  // first: every rank starts its collectives in the same order
      overlapped += reducer.overlapped();
      reduced += reducer.buckets();
      update = all_reduced(update, group);
      if (!std::isfinite(update.loss)) {
        log.record({{"event", "diverged"}, {"step", pos.update + 1}, {"epoch", pos.epoch}, {"loss", nullptr}});
        log.line("normlab train: the loss became " + std::string(std::isnan(update.loss) ? "NaN" : "infinite") +
                 " at update " + std::to_string(pos.update + 1) + "; stopping");
        result.diverged = true;
        done = true;
        break;
      }
      sync_s += std::chrono::duration<double>(Clock::now() - sync_start).count();
      for (auto& p : net->parameters())
        if (p.grad().defined())
          p.grad().div_(static_cast<double>(update.tokens) * (scaler ? scaler->scale() : 1.0));
      grad_norm = clip_grad_norm(net->parameters(), c.clip_norm);
      if (scaler && !scaler->step(grad_norm)) {  // fp16 overflow: the update is skipped (not counted)
        log.record({{"event", "overflow"}, {"step", pos.update + 1}, {"epoch", pos.epoch},
                    {"loss_scale", scaler->scale()}});
        log.line("normlab train: fp16 gradient overflow at update " + std::to_string(pos.update + 1) +
                 ", skipped; loss scale now " + std::to_string(scaler->scale()));
        continue;
      }
      ++pos.update;
      lr = learning_rate(c.schedule, pos.update, pos.epoch);
      if (tracing) observer->gradients();
      optimizer.step(lr, tracing);
      if (tracing) observer->updates(optimizer.last_updates());
      if (logits_trace) logits_trace->end(pos.update);
      window.loss += update.loss;
      window.nll += update.nll;
      window.tokens += update.tokens;
      tokens_since_log += update.tokens;

      if (pos.update % c.log_interval == 0) record_window(n_batches);
      if (curvature && pos.update % c.curvature.every == 0)
        curvature->measure(pos.update, learning_rate(c.schedule, pos.update + 1, pos.epoch), optimizer);
      if (c.save_interval_updates > 0 && pos.update % c.save_interval_updates == 0) {
        save({update_checkpoint_name(pos.epoch, pos.update),
              "checkpoint_last.pt"});
        prune();
      }
      if (c.max_steps > 0 && pos.update >= c.max_steps) {
        done = true;
        break;
      }
      if (update.out_of_time > 0) {
        log.record({{"event", "stop_time"}, {"step", pos.update}, {"epoch", pos.epoch}, {"wall_s", wall()}});
        std::ostringstream line;
        line << "normlab train: --stop-time-hours " << c.stop_time_hours << " reached after update " << pos.update
             << " (" << std::fixed << std::setprecision(1) << wall() << " s of training); stopping";
        log.line(line.str());
        done = true;
        break;
      }
    }
    if (result.diverged) break;
    const bool end_of_epoch = pos.next_batch >= n_batches;  // else stopped inside it (--max-steps, --stop-time-hours)
    if (done || (c.max_epochs > 0 && pos.epoch == c.max_epochs)) record_window(n_batches);  // the last updates
    validate_and_save(end_of_epoch);
  }
  if (!result.diverged && !c.test_prefix.empty()) {
    const auto test_corpus = load_in_turn(c.test_prefix, false);
    const auto t = validate(net, test_corpus, c, group);
    log.record({{"step", pos.update},
                {"epoch", pos.epoch - (pos.next_batch == 0 ? 1 : 0)},
                {"test_loss", t.loss / t.tokens},
                {"test_nll", t.nll / t.tokens},
                {"test_ppl", std::exp(t.nll / t.tokens)},
                {"test_tokens", t.tokens}});
    std::ostringstream line;
    line << std::fixed << std::setprecision(3) << "test (" << c.test_prefix << ", final model) | loss "
         << t.loss / t.tokens << " | nll " << t.nll / t.tokens << " | ppl " << std::exp(t.nll / t.tokens);
    log.line(line.str());
  }
  result.updates = pos.update;
  result.epochs = pos.epoch - 1;
  result.best_valid_loss = pos.best_valid_loss;
  return result;
}

}  // namespace normlab::train
