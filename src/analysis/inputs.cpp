#include "analysis/inputs.h"

#include <chrono>
#include <filesystem>
#include <iostream>
#include <stdexcept>

#include <torch/torch.h>

#include "core/tokens.h"
#include "data/cache.h"
#include "data/corpus.h"
#include "data/vocab.h"

namespace normlab::analysis {

struct BatchSource::Corpus {
  std::vector<data::Sentence> src, tgt;
  std::vector<int64_t> sizes, kept;
};

std::vector<std::string> InputConfig::problems() const {
  std::vector<std::string> out;
  if (vocab_size < 5) out.push_back("--vocab-size must be >= 5, got " + std::to_string(vocab_size));
  if (train_prefix.empty()) {
    if (!vocab_path.empty()) out.push_back("--vocab needs --train (random tokens use --vocab-size)");
    if (sentences < 1) out.push_back("--sentences must be >= 1, got " + std::to_string(sentences));
    if (length < 2) out.push_back("--length must be >= 2, got " + std::to_string(length));
  }
  for (auto& p : batching.validate()) out.push_back(p);
  return out;
}

BatchSource::BatchSource(const InputConfig& c, const std::string& out_dir) : config_(c) {
  if (c.train_prefix.empty()) {
    vocab_size_ = c.vocab_size;
    return;
  }
  std::string bytes;
  if (!c.vocab_path.empty()) {
    bytes = data::Vocab::load(c.vocab_path).bytes();
  } else {
    // As `normlab train` does: a joint BPE model of the training text (docs/data.md).
    const auto t0 = std::chrono::steady_clock::now();
    auto text = data::read_parallel(c.train_prefix, c.src_lang, c.tgt_lang);
    text.src.insert(text.src.end(), text.tgt.begin(), text.tgt.end());
    data::VocabTrainOptions options;
    options.vocab_size = c.vocab_size;
    bytes = data::train_vocab(text.src, options);
    const auto path = data::save_vocab(bytes, (std::filesystem::path(out_dir) / "vocab").string());
    std::cerr << "trained a " << c.vocab_size << "-piece BPE vocabulary in "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
              << " s -> " << path << "\n";
  }
  const auto vocab = data::Vocab::from_bytes(bytes, c.vocab_path.empty() ? "vocabulary" : c.vocab_path);
  vocab_size_ = vocab.size();
  auto loaded = data::load_encoded_corpus(c.train_prefix, c.src_lang, c.tgt_lang, vocab, c.cache_dir);
  std::cerr << loaded.message << "\n";
  corpus_ = std::make_unique<Corpus>();
  corpus_->src = std::move(loaded.corpus.src);
  corpus_->tgt = std::move(loaded.corpus.tgt);
  data::FilterOptions filter;
  filter.max_positions = c.max_positions;
  corpus_->kept = data::filter_pairs(corpus_->src, corpus_->tgt, filter).kept;
  corpus_->sizes = data::example_sizes(corpus_->src, corpus_->tgt);
}

BatchSource::~BatchSource() = default;

bool BatchSource::real() const { return corpus_ != nullptr; }

std::vector<data::Batch> BatchSource::batches(uint64_t seed, int64_t count) const {
  std::vector<data::Batch> out;
  if (corpus_) {
    const auto all = data::make_batches(corpus_->sizes, corpus_->kept, config_.batching, seed, 1);
    if (static_cast<int64_t>(all.size()) < count)
      throw std::invalid_argument("--batches " + std::to_string(count) + ": " + config_.train_prefix +
                                  " makes only " + std::to_string(all.size()) + " batches");
    for (int64_t i = 0; i < count; ++i)
      out.push_back(data::gather_batch(corpus_->src, corpus_->tgt, all[static_cast<size_t>(i)]));
    return out;
  }
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

}  // namespace normlab::analysis
