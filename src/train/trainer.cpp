#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/file_io.h"
#include "core/problems.h"
#include "core/tokens.h"
#include "data/cache.h"
#include "data/corpus.h"
#include "model/checkpoint.h"
#include "model/init.h"
#include "train/corpus_loss.h"

namespace normlab::train {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kRngKey = "rng/cpu";
constexpr const char* kOptimizerPrefix = "optimizer/";

// Progress lines to stderr and RUN_DIR/train.log; records to RUN_DIR/metrics.jsonl. The
// metrics file is opened per record: a resume replaces it (truncate_metrics renames a new file
// over it), and a stream kept open would go on writing into the replaced, unlinked file.
class RunLog {
 public:
  explicit RunLog(const fs::path& dir) : log_(dir / "train.log", std::ios::app), metrics_(dir / "metrics.jsonl") {
    std::ofstream(metrics_, std::ios::app);  // the run folder always has it, even before a record
  }
  void line(const std::string& text) {
    std::cerr << text << "\n";
    log_ << text << "\n";
    log_.flush();
  }
  void record(const nlohmann::json& j) {
    std::ofstream out(metrics_, std::ios::app);
    out << j.dump() << "\n";
    if (!out.flush()) throw std::runtime_error("cannot append to " + metrics_.string());
  }

 private:
  std::ofstream log_;
  fs::path metrics_;
};

// Drops the records that the resumed run will write again: those of updates after `update`,
// and validations of epoch `epoch` or later (a run killed after its last checkpoint logged
// them). Atomic.
void truncate_metrics(const fs::path& file, int64_t update, int64_t epoch) {
  if (!fs::exists(file)) return;
  std::ifstream in(file);
  std::string kept;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;  // a line cut by the kill
    if (j.value("step", int64_t{0}) > update) continue;
    if (j.contains("valid_loss") && j.value("epoch", int64_t{0}) >= epoch) continue;
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
};

// `training`: the length-ratio filter applies to the training data only (fairseq).
Corpus load_corpus(const std::string& prefix, const TrainConfig& c, const data::Vocab& vocab,
                   const std::string& cache_dir, bool training, RunLog& log) {
  auto loaded = data::load_encoded_corpus(prefix, c.src_lang, c.tgt_lang, vocab, cache_dir);
  log.line(loaded.message);
  Corpus corpus;
  corpus.src = std::move(loaded.corpus.src);
  corpus.tgt = std::move(loaded.corpus.tgt);
  data::FilterOptions filter;
  filter.max_positions = c.model.max_positions;
  filter.max_length_ratio = training ? c.max_length_ratio : 0.0;
  auto result = data::filter_pairs(corpus.src, corpus.tgt, filter);
  corpus.kept = std::move(result.kept);
  corpus.sizes = data::example_sizes(corpus.src, corpus.tgt);
  std::ostringstream s;
  s << prefix << ": " << corpus.kept.size() << " pairs kept of " << corpus.src.size() << " ("
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
};

Sums validate(model::Seq2Seq& net, const Corpus& corpus, const TrainConfig& c,
              const torch::Device& device) {
  const auto l = corpus_loss(net, corpus.src, corpus.tgt, corpus.kept, c.batching, c.seed,
                             c.label_smoothing, c.ls_formula, device);
  return {l.loss, l.nll, l.tokens};
}

// Corpus BLEU of the validation set (--eval-bleu): pairs the filter dropped are not decoded
// (an empty hypothesis), so every reference line counts.
double valid_bleu(model::Seq2Seq& net, const Corpus& corpus, BleuValidator& bleu) {
  std::vector<data::Sentence> sources(corpus.src.size());
  for (auto i : corpus.kept) sources[static_cast<size_t>(i)] = corpus.src[static_cast<size_t>(i)];
  return bleu.score(net, sources);
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
  if (max_epochs < 0 || max_steps < 0) out.push_back("--max-epochs and --max-steps must be >= 0");
  if (max_epochs == 0 && max_steps == 0) out.push_back("set --max-epochs or --max-steps");
  if (log_interval < 1) out.push_back("--log-interval must be >= 1, got " + std::to_string(log_interval));
  if (save_interval < 1) out.push_back("--save-interval must be >= 1, got " + std::to_string(save_interval));
  if (save_interval_updates < 0) out.push_back("--save-interval-updates must be >= 0");
  if (keep_last < 0) out.push_back("--keep-last must be >= 0");
  if (clip_norm < 0) out.push_back("--clip-norm must be >= 0");
  if (!(label_smoothing >= 0 && label_smoothing < 1)) out.push_back("--label-smoothing must be in [0, 1)");
  for (auto& p : vocab.validate()) out.push_back(p);
  for (auto& p : batching.validate()) out.push_back(p);
  for (auto& p : optimizer.problems()) out.push_back(p);
  for (auto& p : schedule.problems()) out.push_back(p);
  for (auto& p : trace.problems()) out.push_back(p);
  if (best_metric == BestMetric::kBleu && !eval_bleu) out.push_back("--best-metric bleu needs --eval-bleu");
  return out;
}

void to_json(nlohmann::json& j, const TrainConfig& c) {
  j = {{"data",
        {{"train", c.train_prefix},
         {"valid", c.valid_prefix},
         {"test", c.test_prefix},
         {"max_length_ratio", c.max_length_ratio},
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
        {{"label_smoothing", c.label_smoothing},
         {"formula", to_string(c.ls_formula)},
         {"clip_norm", c.clip_norm}}},
       {"seed", c.seed},
       {"limits", {{"max_epochs", c.max_epochs}, {"max_steps", c.max_steps}}},
       {"output",
        {{"out", c.out},
         {"log_interval", c.log_interval},
         {"save_interval", c.save_interval},
         {"save_interval_updates", c.save_interval_updates},
         {"keep_last", c.keep_last},
         {"fail_on_divergence", c.fail_on_divergence},
         {"trace_steps", c.trace.steps},
         {"trace_params", c.trace.params}}},
       {"eval",
        {{"eval_bleu", c.eval_bleu},
         {"best_metric", c.best_metric == BestMetric::kBleu ? "bleu" : "loss"}}}};
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
  for (const char* section : {"data", "batching", "model", "precision", "optimizer", "schedule", "loss", "seed"}) {
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

TrainResult train(const TrainConfig& c, const TrainHooks& hooks, const torch::Device& device) {
  auto problems = c.problems();
  if (c.trace.steps > 0 && !hooks.make_observer)
    problems.push_back("--trace-steps: train() was given no step observer to make (TrainHooks)");
  if (c.eval_bleu && !hooks.bleu) problems.push_back("--eval-bleu: train() was given no BleuValidator (TrainHooks)");
  if (c.eval_bleu && hooks.bleu)
    for (auto& p : hooks.bleu->problems()) problems.push_back(p);
  for (auto& p : model::precision_problems(c.precision, device)) problems.push_back(p);
  if (c.precision == model::Precision::kFp16)  // fairseq's dynamic loss scaling is not built yet
    problems.push_back("train --precision fp16 needs dynamic loss scaling, which normlab does not have yet: use bf16");
  core::throw_if_problems(problems);
  const fs::path run(c.out), ckpt_dir = run / "checkpoints";
  fs::create_directories(ckpt_dir);
  RunLog log(run);
  nlohmann::json config_json = c;
  if (hooks.bleu) hooks.bleu->add_settings(config_json["eval"]);

  // Resume from the newest intact checkpoint, if any; it must be the same experiment.
  auto resumed = newest_intact_checkpoint(ckpt_dir, log);
  if (resumed) {
    auto changes = incompatible_changes(resumed->meta.at("config"), config_json);
    if (!changes.empty())
      throw std::invalid_argument(c.out + " holds a different experiment (" +
                                  core::join_problems(changes) + "); use another --out or the same options");
  }

  // Vocabulary: from the checkpoint, from RUN_DIR/vocab, or trained on the training text.
  const fs::path vocab_dir = run / "vocab";
  std::string vocab_bytes;
  if (resumed) {
    vocab_bytes = model::tensor_bytes(resumed->extra_tensors.at(model::kVocabTensor));
  } else if (fs::exists(vocab_dir / data::kVocabModelFile)) {
    auto bytes = core::read_file((vocab_dir / data::kVocabModelFile).string());
    vocab_bytes.assign(bytes.begin(), bytes.end());
  } else {
    auto t0 = Clock::now();
    vocab_bytes = data::train_vocab_on_corpus(c.train_prefix, c.src_lang, c.tgt_lang, c.vocab);
    data::save_vocab(vocab_bytes, vocab_dir.string());
    log.line("normlab train: trained a " + std::to_string(c.vocab.vocab_size) + "-piece BPE vocabulary in " +
             std::to_string(std::chrono::duration<double>(Clock::now() - t0).count()) + " s");
  }
  const auto vocab = data::Vocab::from_bytes(vocab_bytes, (vocab_dir / data::kVocabModelFile).string());
  const std::string cache_dir = c.cache_dir.empty() ? (run / "cache").string() : c.cache_dir;
  const auto train_corpus = load_corpus(c.train_prefix, c, vocab, cache_dir, true, log);
  const auto valid_corpus = load_corpus(c.valid_prefix, c, vocab, cache_dir, false, log);
  if (c.eval_bleu) hooks.bleu->prepare(vocab, data::read_parallel(c.valid_prefix, c.src_lang, c.tgt_lang).tgt);

  auto model_config = c.model;
  model_config.src_vocab_size = model_config.tgt_vocab_size = vocab.size();
  config_json["model"] = model_config;
  core::write_file_atomic((run / "config.json").string(), config_json.dump(2) + "\n");

  Position pos;
  model::Seq2Seq net{nullptr};
  if (resumed) {
    net = resumed->model;
    const auto& p = resumed->meta.at("position");
    pos.update = p.at("update");
    pos.epoch = p.at("epoch");
    pos.next_batch = p.at("next_batch");
    pos.wall_s = p.at("wall_s");
    // JSON has no infinity: null means no validation yet.
    if (!p.at("best_valid_loss").is_null()) pos.best_valid_loss = p.at("best_valid_loss");
    pos.best_valid_bleu = p.value("best_valid_bleu", -1.0);
    truncate_metrics(run / "metrics.jsonl", pos.update, pos.epoch);
    log.line("normlab train: resuming at update " + std::to_string(pos.update) + ", epoch " +
             std::to_string(pos.epoch) + ", batch " + std::to_string(pos.next_batch));
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
  Optimizer optimizer(named, c.optimizer);
  if (resumed) {
    model::TensorMap state;
    for (const auto& [k, v] : resumed->extra_tensors)
      if (k.rfind(kOptimizerPrefix, 0) == 0) state[k.substr(std::strlen(kOptimizerPrefix))] = v.to(device);
    optimizer.load_state(state);
    auto generator = at::detail::getDefaultCPUGenerator();
    generator.set_state(resumed->extra_tensors.at(kRngKey));
  }

  const auto start = Clock::now();
  const double wall_before = pos.wall_s;
  auto wall = [&] { return wall_before + std::chrono::duration<double>(Clock::now() - start).count(); };
  auto save = [&](const std::vector<std::string>& names) {
    model::TensorMap extra;
    for (const auto& [k, v] : optimizer.state()) extra[kOptimizerPrefix + k] = v;
    extra[kRngKey] = at::detail::getDefaultCPUGenerator().get_state();
    extra[model::kVocabTensor] = model::bytes_tensor(vocab_bytes);
    nlohmann::json meta = {{"config", config_json},
                           {"position",
                            {{"update", pos.update},
                             {"epoch", pos.epoch},
                             {"next_batch", pos.next_batch},
                             {"best_valid_loss", pos.best_valid_loss},
                             {"best_valid_bleu", pos.best_valid_bleu},
                             {"wall_s", wall()}}}};
    for (const auto& name : names) model::save_model((ckpt_dir / name).string(), net, meta, extra);
  };
  auto prune = [&] {
    if (c.keep_last <= 0) return;
    std::vector<fs::path> numbered;
    for (const auto& e : fs::directory_iterator(ckpt_dir)) {
      const auto n = e.path().filename().string();
      if (n != "checkpoint_last.pt" && n != "checkpoint_best.pt" && e.path().extension() == ".pt")
        numbered.push_back(e.path());
    }
    std::sort(numbered.begin(), numbered.end(),
              [](const fs::path& a, const fs::path& b) { return fs::last_write_time(a) > fs::last_write_time(b); });
    for (size_t i = static_cast<size_t>(c.keep_last); i < numbered.size(); ++i) fs::remove(numbered[i]);
  };

  // The first-steps trace (--trace-steps): nothing exists, and nothing is done per step, when it is off.
  std::unique_ptr<StepObserver> observer;
  if (c.trace.steps > pos.update) observer = hooks.make_observer(c.trace, net, (run / "trace").string(), pos.update);

  TrainResult result;
  int64_t tokens_since_log = 0;
  const int64_t first_update = pos.update;
  // Updates this run will make, for the ETA: --max-steps, else --max-epochs of batches.
  const int64_t batches_per_epoch = static_cast<int64_t>(
      data::make_batches(train_corpus.sizes, train_corpus.kept, c.batching, c.seed, 1).size());
  const int64_t updates_per_epoch = (batches_per_epoch + c.update_freq - 1) / c.update_freq;
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
  bool done = false;
  while (!done && (c.max_epochs == 0 || pos.epoch <= c.max_epochs)) {
    const auto batches = data::make_batches(train_corpus.sizes, train_corpus.kept, c.batching, c.seed, pos.epoch);
    const auto n_batches = static_cast<int64_t>(batches.size());
    while (pos.next_batch < n_batches) {
      // One update: update_freq batches (fewer at the end of an epoch), gradient of the
      // summed loss divided by the update's target tokens (fairseq).
      net->zero_grad();
      Sums update;
      const bool tracing = observer && observer->active(pos.update + 1);
      if (tracing) observer->begin(pos.update + 1);
      for (int64_t k = 0; k < c.update_freq && pos.next_batch < n_batches; ++k, ++pos.next_batch) {
        auto b = gather(train_corpus, batches[pos.next_batch]);
        if (tracing) observer->batch(b.src, b.prev_output_tokens);
        auto logits = net->forward(b.src.to(device), b.prev_output_tokens.to(device));
        auto s = label_smoothed_nll(logits, b.target.to(device), c.label_smoothing, c.ls_formula, kPad);
        s.loss.backward();
        update.loss += s.loss.item<double>();
        update.nll += s.nll.item<double>();
        update.tokens += s.tokens;
      }
      if (!std::isfinite(update.loss)) {
        log.record({{"event", "diverged"}, {"step", pos.update + 1}, {"epoch", pos.epoch}, {"loss", nullptr}});
        log.line("normlab train: the loss became " + std::string(std::isnan(update.loss) ? "NaN" : "infinite") +
                 " at update " + std::to_string(pos.update + 1) + "; stopping");
        result.diverged = true;
        done = true;
        break;
      }
      for (auto& p : net->parameters())
        if (p.grad().defined()) p.grad().div_(static_cast<double>(update.tokens));
      const double grad_norm = clip_grad_norm(net->parameters(), c.clip_norm);
      ++pos.update;
      const double lr = learning_rate(c.schedule, pos.update, pos.epoch);
      if (tracing) observer->gradients();
      optimizer.step(lr, tracing);
      if (tracing) observer->updates(optimizer.last_updates());
      window.loss += update.loss;
      window.nll += update.nll;
      window.tokens += update.tokens;
      tokens_since_log += update.tokens;

      if (pos.update % c.log_interval == 0) {
        const double secs = std::chrono::duration<double>(Clock::now() - log_clock).count();
        log.record({{"step", pos.update},
                    {"epoch", pos.epoch},
                    {"lr", lr},
                    {"loss", window.loss / window.tokens},
                    {"nll", window.nll / window.tokens},
                    {"grad_norm", grad_norm},
                    {"tokens", window.tokens},
                    {"tokens_per_s", tokens_since_log / secs},
                    {"wall_s", wall()}});
        std::ostringstream line;
        line << std::fixed << std::setprecision(3) << "epoch " << pos.epoch << " | update " << pos.update
             << " | batch " << pos.next_batch << "/" << n_batches << " | loss " << window.loss / window.tokens
             << " | nll " << window.nll / window.tokens << " | lr " << std::scientific << std::setprecision(3) << lr
             << std::fixed << " | gnorm " << grad_norm << " | " << std::setprecision(0)
             << tokens_since_log / secs << " tok/s | ETA " << eta();
        log.line(line.str());
        window = Sums{};
        tokens_since_log = 0;
        log_clock = Clock::now();
      }
      if (c.save_interval_updates > 0 && pos.update % c.save_interval_updates == 0) {
        save({"checkpoint_" + std::to_string(pos.epoch) + "_" + std::to_string(pos.update) + ".pt",
              "checkpoint_last.pt"});
        prune();
      }
      if (c.max_steps > 0 && pos.update >= c.max_steps) {
        done = true;
        break;
      }
    }
    if (result.diverged) break;
    if (pos.next_batch < n_batches) break;  // stopped inside the epoch by --max-steps

    // End of epoch: validation, checkpoints.
    const auto v = validate(net, valid_corpus, c, device);
    const double valid_loss = v.loss / v.tokens, valid_nll = v.nll / v.tokens;
    const double bleu = c.eval_bleu ? valid_bleu(net, valid_corpus, *hooks.bleu) : -1.0;
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
    log.record(record);
    std::ostringstream line;
    line << std::fixed << std::setprecision(3) << "epoch " << pos.epoch << " | valid loss " << valid_loss
         << " | nll " << valid_nll << " | ppl " << std::exp(valid_nll);
    if (c.eval_bleu) line << " | bleu " << std::setprecision(2) << bleu;
    line << (best ? " | best" : "");
    log.line(line.str());
    std::vector<std::string> names = {"checkpoint_last.pt"};
    if (pos.epoch % c.save_interval == 0) names.push_back("checkpoint" + std::to_string(pos.epoch) + ".pt");
    if (best) names.push_back("checkpoint_best.pt");
    ++pos.epoch;  // the saved position is the start of the next epoch
    pos.next_batch = 0;
    save(names);
    prune();
    if (c.max_steps > 0 && pos.update >= c.max_steps) done = true;
  }
  if (!result.diverged && pos.next_batch > 0) save({"checkpoint_last.pt"});
  if (!result.diverged && !c.test_prefix.empty()) {
    const auto test_corpus = load_corpus(c.test_prefix, c, vocab, cache_dir, false, log);
    const auto t = validate(net, test_corpus, c, device);
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
