#include "train/run_setup.h"

#include <chrono>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/file_io.h"
#include "core/hash.h"
#include "core/problems.h"
#include "core/process_group.h"
#include "data/batching.h"
#include "data/cache.h"
#include "train/checkpoint_names.h"
#include "train/width_lr.h"
#include "model/encoder_only.h"
#include "model/model.h"
#include "model/seq2seq.h"
#include "model/stacking.h"

namespace normlab::train {
namespace fs = std::filesystem;

std::string init_from_file(const InitFromConfig& init_from) {
  if (init_from.update == 0) return init_from.checkpoint;
  return update_checkpoint_path(init_from.checkpoint, init_from.update);
}

std::optional<model::LoadedModel> load_init_from(TrainConfig& c) {
  if (c.init_from.checkpoint.empty()) return std::nullopt;
  const auto file = init_from_file(c.init_from);
  auto base = model::load_model(file);
  const auto& trained = base.model->config();
  if (c.init_from.classes > 0 && trained.kind != model::kEncoderOnly)
    throw std::invalid_argument("--num-classes with --init-from " + file + ": a classifier is fine-tuned from an " +
                                model::kEncoderOnly + " model, not " + trained.kind);
  if (!base.extra_tensors.count(model::kVocabTensor))
    throw std::invalid_argument("--init-from " + file + ": holds no vocabulary (not a checkpoint of normlab train)");
  core::throw_if_problems(model::added_layer_problems(trained, c.init_from.added));
  c.model = model::grown_config(trained, c.init_from.added);
  if (c.init_from.classes > 0) {
    c.model.classes = c.init_from.classes;
    c.model.pooling = c.init_from.pooling.value_or(model::ClassifierPooling::kCls);
  }
  c.model.src_vocab_size = c.model.tgt_vocab_size = 0;  // from the vocabulary, as for every run
  return base;
}

Position resume_position(const model::LoadedModel& resumed, const nlohmann::json& config_json, const std::string& out) {
  auto changes = incompatible_changes(resumed.meta.at("config"), config_json);
  if (!changes.empty())
    throw std::invalid_argument(out + " holds a different experiment (" + core::join_problems(changes) +
                                "); use another --out or the same options");
  return position_from_json(resumed.meta.at("position"));
}

std::string run_vocab(const TrainConfig& c, RunDir& dir, const model::LoadedModel* resumed,
                      const model::LoadedModel* base, core::ProcessGroup& group) {
  const fs::path vocab_dir = dir.path() / "vocab";
  if (resumed) return model::tensor_bytes(resumed->extra_tensors.at(model::kVocabTensor));
  if (base) {
    auto bytes = model::tensor_bytes(base->extra_tensors.at(model::kVocabTensor));
    if (dir.writes()) {
      fs::create_directories(vocab_dir);
      core::write_file_atomic((vocab_dir / data::kVocabModelFile).string(), bytes);
    }
    return bytes;
  }
  if (dir.writes() && !fs::exists(vocab_dir / data::kVocabModelFile)) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto bytes = c.model.classifier()
                           ? data::train_vocab(classification_texts(c.train_prefix), c.vocab)
                           : data::train_vocab_on_data(c.train_prefix, c.model.single_stack(), c.src_lang,
                                                       c.tgt_lang, c.vocab);
    data::save_vocab(bytes, vocab_dir.string());
    dir.line(
        "normlab train: trained a " + std::to_string(c.vocab.vocab_size) + "-piece BPE vocabulary in " +
        std::to_string(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()) + " s");
  }
  group.barrier();
  const auto bytes = core::read_file((vocab_dir / data::kVocabModelFile).string());
  return std::string(bytes.begin(), bytes.end());
}

namespace {

// A classifier on the trained encoder (encoder_only.h's classifier_from), its event recorded.
model::Model classifier_model(const TrainConfig& c, const model::LoadedModel& base, RunDir& dir) {
  const auto made = model::classifier_from(model::as_encoder_only(base.model, "--init-from"), c.model.classes,
                                           c.model.pooling, c.seed);
  const auto file = init_from_file(c.init_from);
  const nlohmann::json event = {{"event", "init_from"},     {"update", 0},
                                {"checkpoint", file},
                                {"num_classes", c.model.classes},
                                {"classifier_pooling", model::to_string(c.model.pooling)},
                                {"copied", made.copied.size()},
                                {"initialised", made.initialised}, {"dropped", made.dropped}};
  dir.record(event);
  dir.line("normlab train: a " + std::to_string(c.model.classes) + "-class classifier on " + file + ": " + std::to_string(made.copied.size()) + " tensors copied, " +
           std::to_string(made.initialised.size()) + " initialised, " + std::to_string(made.dropped.size()) +
           " left behind");
  return made.model;
}

// DT-Fixup's mu is over the training data (the authors': every training example, eval mode).
model::Model grown_model(const TrainConfig& c, const model::LoadedModel& base, const Corpus& train, RunDir& dir) {
  if (c.model.classifier()) return classifier_model(c, base, dir);
  std::vector<data::Batch> batches;
  for (const auto& b : data::make_batches(train.sizes, train.kept, c.batching, c.seed, 1))
    batches.push_back(gather(train, b));
  const auto& added = c.init_from.added;
  auto grown = model::add_layers(base.model, added, c.seed, batches);
  nlohmann::json event = {{"event", "init_from"},
                          {"update", 0},
                          {"checkpoint", c.init_from.checkpoint},
                          {"add_encoder_layers", added.encoder},
                          {"add_decoder_layers", added.decoder},
                          {"init", model::to_string(added.init)}};
  event.update(nlohmann::json(grown.report));
  dir.record(event);
  dir.line("normlab train: " + c.init_from.checkpoint + " with " + std::to_string(added.encoder) + " encoder and " +
           std::to_string(added.decoder) + " decoder layers added (" + model::to_string(added.init) +
           "): " + nlohmann::json(grown.report).dump());
  return grown.model;
}

}  // namespace

model::Model new_model(const TrainConfig& c, const model::ModelConfig& model_config,
                       const model::LoadedModel* base, const Corpus& train, RunDir& dir) {
  if (base) return grown_model(c, *base, train, dir);
  auto net = model::create_model(model_config);
  torch::manual_seed(c.seed);
  const auto first = data::make_batches(train.sizes, train.kept, c.batching, c.seed, 1);
  const auto profile = gather(train, first.at(0));  // Admin profiles on the first batch
  model::initialize(net, c.seed, &profile);
  return net;
}

nlohmann::json job_fingerprint(const nlohmann::json& config_json, const Corpus& train, const Corpus& valid,
                               const std::string& vocab_bytes, int64_t resume_update) {
  auto fingerprint = [&](const Corpus& corpus) {
    return core::hash_hex(data::corpus_cache_key(corpus.files, vocab_bytes));
  };
  return {{"config", config_json},
          {"data", {{"train", fingerprint(train)}, {"valid", fingerprint(valid)}}},
          {"resume", {{"update", resume_update}}}};
}

std::vector<double> parameter_lr_scales(const TrainConfig& c, const model::ModelConfig& model,
                                        const NamedTensors& named) {
  auto trained = c.model;
  trained.encoder_layers -= c.init_from.added.encoder;
  trained.decoder_layers -= c.init_from.added.decoder;
  auto scales = width_lr_scales(model, c.optimizer, named);
  for (size_t i = 0; i < named.size(); ++i) {
    const auto& name = named[i].first;
    const bool new_head = c.init_from.classes > 0 && model::is_classification_head_parameter(name);
    if (!new_head && !model::is_added_parameter(name, trained)) scales[i] *= c.init_from.pretrained_lr_scale;
  }
  return scales;
}

}  // namespace normlab::train
