// What the instruments feed the model (docs/probe.md, "Inputs"): real mini-batches made exactly
// as `normlab train` makes them (sentence pairs of a parallel corpus; a single-stack model's
// blocks of running text, an encoder's masked as its first epoch masks them), or random tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/batching.h"
#include "model/config.h"

namespace normlab::analysis {

struct InputConfig {
  std::string train_prefix;      // --train PREFIX (a single-stack model's: one text FILE); empty: random tokens
  std::string vocab_path;        // --vocab spm.model; empty with --train: trained on the text
  int64_t vocab_size = 8000;     // --vocab-size: pieces to train, or V of the random tokens
  std::string src_lang = "de", tgt_lang = "en";
  std::string cache_dir;         // encoded-corpus cache (empty: none)
  data::BatchingConfig batching; // --max-tokens
  int64_t max_positions = 1024;  // pairs longer than this are dropped (as train does)
  int64_t sentences = 16;        // random tokens: sentences (blocks) per batch
  int64_t length = 32;           // random tokens: tokens per sentence (</s> included), positions per block
  std::string model_kind = model::kEncoderDecoder;  // what the batches are for (fit_model)
  int64_t block_size = 0;        // --block-size: positions per block of a text (0: max_positions)
  bool classifier = false;       // the model has a classification head (refused: no such inputs here)

  // Takes the kind and the positions of the model the batches are for.
  void fit_model(const model::ModelConfig& model);
  // A single-stack model's batch layout (blocks, or masked blocks), else sentence pairs.
  data::Layout layout() const;
  std::vector<std::string> problems() const;  // every problem, naming the option
};

class BatchSource {
 public:
  // Loads (or trains into OUT_DIR/vocab) the vocabulary and encodes the corpus; progress on
  // stderr. Throws std::invalid_argument / std::runtime_error naming the file or option.
  BatchSource(const InputConfig& config, const std::string& out_dir);
  ~BatchSource();

  // The model's vocabulary: the pieces (or random tokens' V), and an encoder-only model's <mask>.
  int64_t vocab_size() const { return vocab_size_; }
  bool real() const;
  // The first `count` batches of epoch 1 as training with seed `seed` would see them, or
  // `count` random batches drawn from `seed` (an encoder's masked with seed `seed` as epoch 1
  // masks). Throws when the corpus has fewer batches.
  std::vector<data::Batch> batches(uint64_t seed, int64_t count) const;

 private:
  struct Corpus;
  std::vector<data::Batch> random_pairs(uint64_t seed, int64_t count) const;
  std::vector<data::Batch> random_blocks(uint64_t seed, int64_t count) const;
  InputConfig config_;
  int64_t vocab_size_ = 0;
  std::unique_ptr<Corpus> corpus_;  // null for random tokens
};

}  // namespace normlab::analysis
