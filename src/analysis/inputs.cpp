#include "analysis/inputs.h"

#include <chrono>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <optional>
#include <stdexcept>

#include <torch/torch.h>

#include "core/tokens.h"
#include "data/cache.h"
#include "data/corpus.h"
#include "data/masking.h"
#include "data/vocab.h"
#include "train/train_data.h"

namespace normlab::analysis {

struct BatchSource::Corpus {
  train::Corpus corpus;                          // unmasked: an encoder's masks are each batches() call's
  std::optional<train::CorpusMasking> masking;   // an encoder's masking; its seed is the call's
};

void InputConfig::fit_model(const model::ModelConfig& model) {
  model_kind = model.kind;
  max_positions = model.max_positions;
  classifier = model.classifier();
}

data::Layout InputConfig::layout() const {
  if (model_kind == model::kDecoderOnly) return data::Layout::kBlocks;
  if (model_kind == model::kEncoderOnly) return data::Layout::kMaskedBlocks;
  return data::Layout::kPairs;
}

std::vector<std::string> InputConfig::problems() const {
  std::vector<std::string> out;
  if (vocab_size < 5) out.push_back("--vocab-size must be >= 5, got " + std::to_string(vocab_size));
  const bool text = layout() != data::Layout::kPairs;
  if (train_prefix.empty()) {
    if (!vocab_path.empty()) out.push_back("--vocab needs --train (random tokens use --vocab-size)");
    if (sentences < 1) out.push_back("--sentences must be >= 1, got " + std::to_string(sentences));
    if (length < 2) out.push_back("--length must be >= 2, got " + std::to_string(length));
    if (text && length > max_positions)
      out.push_back("--length " + std::to_string(length) + " exceeds --max-positions " + std::to_string(max_positions));
  }
  if (block_size != 0 && (!text || train_prefix.empty()))
    out.push_back("--block-size: the positions of a block of running text (--train FILE of a decoder-only or "
                  "encoder-only model)");
  if (block_size < 0 || block_size > max_positions)
    out.push_back("--block-size must be in [1, --max-positions " + std::to_string(max_positions) + "], got " +
                  std::to_string(block_size));
  if (classifier)
    out.push_back("--num-classes: the instruments feed a masked LM's blocks or random tokens, not a classifier's "
                  "examples");
  for (auto& p : batching.validate()) out.push_back(p);
  return out;
}

namespace {

// The vocabulary's bytes: --vocab's, else one trained on the training text as `normlab train`
// trains it (a joint BPE model of a parallel corpus's two sides; the lines of a running text),
// saved into OUT_DIR/vocab.
std::string input_vocab(const InputConfig& c, const std::string& out_dir) {
  if (!c.vocab_path.empty()) return data::Vocab::load(c.vocab_path).bytes();
  const auto t0 = std::chrono::steady_clock::now();
  data::VocabTrainOptions options;
  options.vocab_size = c.vocab_size;
  auto bytes =
      data::train_vocab_on_data(c.train_prefix, c.layout() != data::Layout::kPairs, c.src_lang, c.tgt_lang, options);
  const auto path = data::save_vocab(bytes, (std::filesystem::path(out_dir) / "vocab").string());
  std::cerr << "trained a " << c.vocab_size << "-piece BPE vocabulary in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s -> " << path
            << "\n";
  return bytes;
}

// A parallel corpus's pairs that fit max_positions (no length-ratio filter).
train::Corpus load_pairs(const InputConfig& c, const data::Vocab& vocab) {
  auto loaded = data::load_encoded_corpus(c.train_prefix, c.src_lang, c.tgt_lang, vocab, c.cache_dir);
  std::cerr << loaded.message << "\n";
  train::Corpus corpus;
  corpus.src = std::move(loaded.corpus.src);
  corpus.tgt = std::move(loaded.corpus.tgt);
  data::FilterOptions filter;
  filter.max_positions = c.max_positions;
  corpus.kept = data::filter_pairs(corpus.src, corpus.tgt, filter).kept;
  corpus.sizes = data::example_sizes(corpus.src, corpus.tgt);
  return corpus;
}

// fairseq's masking (15%: 80% <mask>, 10% random, 10% kept) of an encoder's blocks, drawn from `seed`.
train::CorpusMasking input_masking(int64_t pieces, uint64_t seed) {
  return {data::MaskingConfig{}, {pieces, kNumSpecialTokens, pieces}, seed};
}

}  // namespace

BatchSource::BatchSource(const InputConfig& c, const std::string& out_dir) : config_(c) {
  const auto layout = c.layout();
  if (c.train_prefix.empty()) {
    vocab_size_ = model::model_vocab_size(c.model_kind, c.vocab_size);
    return;
  }
  const auto vocab = data::Vocab::from_bytes(input_vocab(c, out_dir), c.vocab_path.empty() ? "vocabulary" : c.vocab_path);
  vocab_size_ = model::model_vocab_size(c.model_kind, vocab.size());
  corpus_ = std::make_unique<Corpus>();
  if (layout == data::Layout::kPairs) {
    corpus_->corpus = load_pairs(c, vocab);
    return;
  }
  auto& corpus = corpus_->corpus;
  corpus = train::load_text_corpus(c.train_prefix, vocab, c.block_size > 0 ? c.block_size : c.max_positions,
                                   [](const std::string& line) { std::cerr << line << "\n"; }, layout);
  if (layout == data::Layout::kMaskedBlocks) corpus_->masking = input_masking(static_cast<int64_t>(vocab.size()), 0);
}

BatchSource::~BatchSource() = default;

bool BatchSource::real() const { return corpus_ != nullptr; }

std::vector<data::Batch> BatchSource::batches(uint64_t seed, int64_t count) const {
  if (!corpus_) return config_.layout() == data::Layout::kPairs ? random_pairs(seed, count) : random_blocks(seed, count);
  const auto& corpus = corpus_->corpus;
  const auto& masking = corpus_->masking;
  const auto all = data::make_batches(corpus.sizes, corpus.kept, config_.batching, seed, 1);
  if (static_cast<int64_t>(all.size()) < count)
    throw std::invalid_argument("--batches " + std::to_string(count) + ": " + config_.train_prefix +
                                " makes only " + std::to_string(all.size()) + " batches");
  std::vector<data::Batch> out;
  for (int64_t i = 0; i < count; ++i) {
    const auto& indices = all[static_cast<size_t>(i)];
    out.push_back(train::gather(corpus, indices, 1));
    if (masking) data::mask_batch(out.back(), indices, masking->config, masking->tokens, seed, 1);  // as epoch 1
  }
  return out;
}

std::vector<data::Batch> BatchSource::random_pairs(uint64_t seed, int64_t count) const {
  std::vector<data::Batch> out;
  // Random sentences of ordinary tokens (ids >= 4, no specials inside), length-1 tokens each.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (int64_t i = 0; i < count; ++i) {
    auto ids = torch::randint(kNumSpecialTokens, vocab_size_, {config_.sentences, config_.length - 1},
                              gen, torch::kInt64);
    std::vector<data::Sentence> rows;
    for (int64_t r = 0; r < ids.size(0); ++r) {
      auto row = ids[r].contiguous();
      rows.emplace_back(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + row.numel());
    }
    out.push_back(data::make_batch(rows, rows, 0, rows.size()));
  }
  return out;
}

// Blocks of `length` positions of ordinary tokens (ids >= 4): a causal LM's length + 1 tokens
// (it predicts the last `length`), an encoder's <s> and length - 1 tokens, masked with `seed`
// as epoch 1 masks.
std::vector<data::Batch> BatchSource::random_blocks(uint64_t seed, int64_t count) const {
  const bool masked = config_.layout() == data::Layout::kMaskedBlocks;
  const int64_t pieces = masked ? vocab_size_ - 1 : vocab_size_;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<data::Batch> out;
  for (int64_t i = 0; i < count; ++i) {
    auto ids = torch::randint(kNumSpecialTokens, pieces, {config_.sentences, masked ? config_.length - 1 : config_.length + 1},
                              gen, torch::kInt64);
    train::Corpus corpus;
    corpus.layout = config_.layout();
    for (int64_t r = 0; r < ids.size(0); ++r) {
      auto row = ids[r].contiguous();
      data::Sentence block(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + row.numel());
      if (masked) block.insert(block.begin(), kBos);
      (masked ? corpus.src : corpus.tgt).push_back(std::move(block));
      (masked ? corpus.tgt : corpus.src).emplace_back();
    }
    if (masked) corpus.masking = input_masking(pieces, seed + static_cast<uint64_t>(i));
    std::vector<int64_t> rows(static_cast<size_t>(config_.sentences));
    std::iota(rows.begin(), rows.end(), 0);
    out.push_back(train::gather(corpus, rows, 1));
  }
  return out;
}

}  // namespace normlab::analysis
