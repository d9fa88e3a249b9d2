// The sentence pairs (or blocks of text) a training run reads (training, validation, test),
// encoded with the run's vocabulary and filtered once; batches are gathered from them by index.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/vocab.h"

namespace normlab::train {

struct TrainConfig;

// Sentence pairs, or a decoder-only model's blocks of running text (tgt: the blocks, src: empty).
struct Corpus {
  std::vector<data::Sentence> src, tgt;
  data::Layout layout = data::Layout::kPairs;
  std::vector<int64_t> sizes;      // data::example_sizes
  std::vector<int64_t> kept;       // indices that passed the filter
  std::vector<std::string> files;  // the text files it was read from
};

// PREFIX.SRC/.TGT of `c`'s languages, from or into `cache_dir`; `training`: the length-ratio
// filter and --max-pairs apply (fairseq: to the training data only). `log` gets its lines.
// Throws std::invalid_argument naming the files when no pair is left. A decoder-only model's
// `prefix` is one text file, cut into blocks of c.text_block_size() (data/text_stream.h).
Corpus load_corpus(const std::string& prefix, const TrainConfig& c, const data::Vocab& vocab,
                   const std::string& cache_dir, bool training, const std::function<void(const std::string&)>& log);

// A text file (plain or .gz) as blocks of `block_size` positions (data/text_stream.h): every block
// kept, layout kBlocks. `log` gets one line: tokens, lines, blocks, tokens left out. Throws
// naming the file (no text; shorter than one block).
Corpus load_text_corpus(const std::string& path, const data::Vocab& vocab, int64_t block_size,
                        const std::function<void(const std::string&)>& log);

// The examples `indices` of `corpus` as one padded batch.
data::Batch gather(const Corpus& corpus, const std::vector<int64_t>& indices);

}  // namespace normlab::train
