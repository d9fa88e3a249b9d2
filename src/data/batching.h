// Token-bucketed batches as fairseq makes them (REFERENCE §2; docs/data.md, "Batching"):
// examples sorted by size with a seeded random tie-break, cut greedily into batches of at
// most max_tokens padded tokens, and the batches shuffled anew every epoch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/batch.h"

namespace normlab::data {

struct BatchingConfig {
  int64_t max_tokens = 4096;  // padded tokens per batch: sentences * largest size (0: no limit)
  int64_t max_sentences = 0;  // sentences per batch (0: no limit)
  std::vector<std::string> validate() const;  // every problem, empty when fine
};

// Size of each pair as batching counts it: max(n+1, m+1), i.e. the longer of the source
// `x </s>` and of the target `y </s>` (the decoder input `</s> y` has the same length).
// Blocks (Layout::kBlocks): N, the positions of a block of N+1 tokens; masked blocks and a classifier's examples: their length.
std::vector<int64_t> example_sizes(const std::vector<Sentence>& src, const std::vector<Sentence>& tgt,
                                   Layout layout = Layout::kPairs);

// Batches of the examples `indices` (each an index into `sizes`), as lists of those indices,
// in ascending size within a batch. Which examples share a batch depends on `seed` only; the
// order of the batches on (seed, epoch). Every index appears exactly once. Throws
// std::invalid_argument for a bad config, an index out of range or repeated, and for an
// example larger than max_tokens (naming it: filter it first, e.g. with --max-positions).
std::vector<std::vector<int64_t>> make_batches(const std::vector<int64_t>& sizes,
                                               const std::vector<int64_t>& indices,
                                               const BatchingConfig& config, uint64_t seed,
                                               int64_t epoch);
// All examples 0..sizes.size()-1.
std::vector<std::vector<int64_t>> make_batches(const std::vector<int64_t>& sizes,
                                               const BatchingConfig& config, uint64_t seed,
                                               int64_t epoch);

// Which of an epoch's batches one rank of a data-parallel job takes (fairseq, REFERENCE §8):
// every count-th, starting at index.
struct Shard {
  int index = 0;  // this rank
  int count = 1;  // world size
  bool owns(int64_t batch) const { return batch % count == index; }
};

}  // namespace normlab::data
