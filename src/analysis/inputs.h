// What the instruments feed the model (docs/probe.md, "Inputs"): real mini-batches of a
// parallel corpus, made exactly as `normlab train` makes them, or random token sentences.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/batching.h"

namespace normlab::analysis {

struct InputConfig {
  std::string train_prefix;      // --train PREFIX; empty: random token sentences
  std::string vocab_path;        // --vocab spm.model; empty with --train: trained on the text
  int64_t vocab_size = 8000;     // --vocab-size: pieces to train, or V of the random tokens
  std::string src_lang = "de", tgt_lang = "en";
  std::string cache_dir;         // encoded-corpus cache (empty: none)
  data::BatchingConfig batching; // --max-tokens
  int64_t max_positions = 1024;  // pairs longer than this are dropped (as train does)
  int64_t sentences = 16;        // random tokens: sentences per batch
  int64_t length = 32;           // random tokens: tokens per sentence (</s> included)

  std::vector<std::string> problems() const;  // every problem, naming the option
};

class BatchSource {
 public:
  // Loads (or trains into OUT_DIR/vocab) the vocabulary and encodes the corpus; progress on
  // stderr. Throws std::invalid_argument / std::runtime_error naming the file or option.
  BatchSource(const InputConfig& config, const std::string& out_dir);
  ~BatchSource();

  int64_t vocab_size() const { return vocab_size_; }
  bool real() const;
  // The first `count` batches of epoch 1 as training with seed `seed` would see them, or
  // `count` random batches drawn from `seed`. Throws when the corpus has fewer batches.
  std::vector<data::Batch> batches(uint64_t seed, int64_t count) const;

 private:
  struct Corpus;
  InputConfig config_;
  int64_t vocab_size_ = 0;
  std::unique_ptr<Corpus> corpus_;  // null for random tokens
};

}  // namespace normlab::analysis
