// The sentence pairs (or blocks of text) a training run reads (training, validation, test),
// encoded with the run's vocabulary and filtered once; batches are gathered from them by index.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/masking.h"
#include "data/vocab.h"
#include "model/config.h"

namespace normlab::train {

struct TrainConfig;

// How an encoder-only model's blocks are masked when gathered (data/masking.h).
struct CorpusMasking {
  data::MaskingConfig config;
  data::MaskTokens tokens;
  uint64_t seed = 1;
};

// Sentence pairs, or a single-stack model's blocks of running text (decoder-only: tgt the blocks,
// src empty; encoder-only: src the blocks, tgt empty).
struct Corpus {
  std::vector<data::Sentence> src, tgt;
  data::Layout layout = data::Layout::kPairs;
  std::optional<CorpusMasking> masking;  // encoder-only: gather() masks each batch
  std::vector<int64_t> sizes;      // data::example_sizes
  std::vector<int64_t> kept;       // indices that passed the filter
  std::vector<std::string> files;  // the text files it was read from
};

// PREFIX.SRC/.TGT of `c`'s languages, from or into `cache_dir`; `training`: the length-ratio
// filter and --max-pairs apply (fairseq: to the training data only). `log` gets its lines.
// Throws std::invalid_argument naming the files when no pair is left. A single-stack model's
// `prefix` is one text file, cut into blocks of c.text_block_size() (data/text_stream.h); an
// encoder-only model's are masked by c.masking with c.seed.
Corpus load_corpus(const std::string& prefix, const TrainConfig& c, const data::Vocab& vocab,
                   const std::string& cache_dir, bool training, const std::function<void(const std::string&)>& log);

// A text file (plain or .gz) as blocks of `block_size` positions (data/text_stream.h): every block
// kept, layout kBlocks (a causal LM's) or kMaskedBlocks (an encoder's). `log` gets one line:
// tokens, lines, blocks, tokens left out. Throws naming the file (no text; shorter than one block).
Corpus load_text_corpus(const std::string& path, const data::Vocab& vocab, int64_t block_size,
                        const std::function<void(const std::string&)>& log,
                        data::Layout layout = data::Layout::kBlocks);

// A classifier's examples (data/classification.h's TSV): <s> A </s> or <s> A </s> B </s>, each
// with its class id; every example kept, layout kClassify. `log` gets one line: examples, per
// class, the longest. Throws std::invalid_argument naming FILE:LINE for a label outside the
// model's classes and for an example longer than its max_positions (never truncated).
Corpus load_classification_corpus(const std::string& path, const data::Vocab& vocab, const model::ModelConfig& model,
                                  const std::function<void(const std::string&)>& log);
// The texts of a classifier's TSV (A and B of each example), what a new classifier's vocabulary
// is trained on.
std::vector<std::string> classification_texts(const std::string& path);

// What an encoder-only model of the vocabulary `vocab` masks with: <mask> after its last piece
// (model::model_vocab_size), replacements among its ordinary pieces.
data::MaskTokens mask_tokens(const data::Vocab& vocab);

// The examples `indices` of `corpus` as one padded batch; an encoder's masked with the masks of
// `epoch` (training: the epoch; validation and evaluation: 0, the same masks every time).
data::Batch gather(const Corpus& corpus, const std::vector<int64_t>& indices, int64_t epoch = 0);

}  // namespace normlab::train
